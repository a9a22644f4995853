//! The site's certificates: one CA, made once, and one certificate per NATS node, signed by it.
//! Every node shows its certificate to clients and to the other nodes' routes; every l3m
//! process and every node trusts the CA alone.

use std::time::{SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use super::conf::Node;
use crate::error::CliError;

/// How many years the CA is valid.
const CA_YEARS: i32 = 10;
/// How many years a node's certificate is valid (reissue with a new site before then).
const NODE_YEARS: i32 = 5;

/// A certificate and its private key, both PEM.
pub struct Pem {
    /// The certificate.
    pub cert: String,
    /// The private key (PKCS#8); write it readable by its owner alone.
    pub key: String,
}

/// The site's CA and the certificate of each node.
pub struct SitePki {
    /// The CA.
    pub ca: Pem,
    /// Each node's certificate, in the order given.
    pub nodes: Vec<Pem>,
}

fn failed(what: &str) -> impl Fn(rcgen::Error) -> CliError + '_ {
    move |e| CliError::Runtime(format!("making {what} failed: {e}"))
}

/// The current year (UTC), from the system clock.
fn this_year() -> i32 {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // 365.2425 days a year; off by at most a day at the turn of a year, which the validity
    // window (from the year's first day) absorbs.
    1970 + i32::try_from(secs / 31_556_952).unwrap_or(0)
}

/// Valid from the first day of this year for `years` years.
fn validity(params: &mut CertificateParams, years: i32) {
    let year = this_year();
    params.not_before = rcgen::date_time_ymd(year, 1, 1);
    params.not_after = rcgen::date_time_ymd(year + years, 1, 1);
}

/// A fresh CA named for `site`, and a certificate for each of `nodes` signed by it, valid
/// for the node's host (and loopback) as server and as client (routes are mutual).
pub fn generate(site: &str, nodes: &[Node]) -> Result<SitePki, CliError> {
    let ca_key = KeyPair::generate().map_err(failed("the CA's key"))?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(failed("the CA"))?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, format!("l3m site {site} CA"));
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    validity(&mut ca_params, CA_YEARS);
    let ca_key_pem = ca_key.serialize_pem();
    let ca = CertifiedIssuer::self_signed(ca_params, ca_key).map_err(failed("the CA"))?;
    let mut issued = Vec::with_capacity(nodes.len());
    for node in nodes {
        let what = format!("node {}'s certificate", node.name);
        let key = KeyPair::generate().map_err(failed(&what))?;
        let mut params = CertificateParams::new(node.certificate_names()).map_err(failed(&what))?;
        params.distinguished_name.push(
            DnType::CommonName,
            format!("l3m site {site} node {}", node.name),
        );
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        validity(&mut params, NODE_YEARS);
        let cert = params.signed_by(&key, &ca).map_err(failed(&what))?;
        issued.push(Pem {
            cert: cert.pem(),
            key: key.serialize_pem(),
        });
    }
    Ok(SitePki {
        ca: Pem {
            cert: ca.pem(),
            key: ca_key_pem,
        },
        nodes: issued,
    })
}
