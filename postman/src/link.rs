//! Links between postmen: QUIC (quinn) with mutual TLS 1.3 (rustls, the `ring` provider named
//! explicitly), each side pinning the other's certificate by [`Fingerprint`], the ALPN
//! [`ALPN`], 0-RTT off, an idle timeout with a shorter keep-alive, and a bounded queue of
//! connections waiting to be accepted.
//!
//! A client whose certificate the server refuses still sees its handshake complete (TLS 1.3
//! authenticates the client last), so no letter moves before the [`Frame::Hello`] /
//! [`Frame::Welcome`] exchange on the link's first stream: the accepting side maps the
//! authenticated certificate to the office its settings pin it for, and refuses a hello that
//! claims another office.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

use crate::frame::{self, Frame, FrameError};
use crate::identity::{Fingerprint, Identity};

/// The application protocol both sides must name.
pub const ALPN: &[u8] = b"l3m-airmail/1";
/// The name a client asks for; certificates are pinned, so names are not checked.
const SERVER_NAME: &str = "l3m-hub.invalid";

/// A peer hub as this hub's settings pin it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Office {
    /// Its name in this hub's settings (and the name it gives in its hello).
    pub name: String,
    /// The SHA-256 of its certificate.
    pub fingerprint: Fingerprint,
}

/// Timeouts and bounds of a link.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// A link silent this long is closed.
    pub idle: Duration,
    /// Keep-alives go out this often (shorter than `idle`, so a quiet link stays up).
    pub keep_alive: Duration,
    /// How long a hello may take.
    pub hello_within: Duration,
    /// How long an office may take to answer a batch of letters before the link is dropped and
    /// made again (a peer that died silently is otherwise noticed only at the idle timeout).
    pub answer_within: Duration,
    /// Connections waiting to be accepted, and (in [`crate::carry::serve`]) connections not yet
    /// through their hello, before new ones are refused.
    pub max_incoming: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            idle: Duration::from_secs(30),
            keep_alive: Duration::from_secs(10),
            hello_within: Duration::from_secs(10),
            answer_within: Duration::from_secs(5),
            max_incoming: 64,
        }
    }
}

/// Why a link could not be made or used.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The TLS or QUIC configuration could not be built (a bad key, say).
    #[error("cannot configure the link: {0}")]
    Config(String),
    /// The connection failed before the link was up: the handshake (a certificate refused by
    /// either side), the network, or a timeout.
    #[error("the link to office {office} failed: {reason}")]
    Connect {
        /// The office (or the peer's address, for an incoming link).
        office: String,
        /// What failed.
        reason: String,
    },
    /// The peer refused the hello, and said why.
    #[error("office {office} refused the link: {reason}")]
    Refused {
        /// The office.
        office: String,
        /// Its reason.
        reason: String,
    },
    /// The peer's hello claims an office other than the one its certificate is pinned for.
    #[error("a peer authenticated as office {certified} claims to be office {claimed}; refused")]
    Impostor {
        /// The office its certificate belongs to.
        certified: String,
        /// The office it claimed.
        claimed: String,
    },
    /// The peer sent something other than the next step of the hello.
    #[error("office {office} answered the hello with {got}")]
    Unexpected {
        /// The office.
        office: String,
        /// What it sent.
        got: String,
    },
    /// A frame could not be read or written.
    #[error("office {office}: {source}")]
    Frame {
        /// The office.
        office: String,
        /// The frame error.
        source: FrameError,
    },
}

/// An established link: a QUIC connection to an authenticated office.
#[derive(Debug)]
pub struct Link {
    /// The office at the other end.
    pub office: Office,
    /// The connection, for the streams that carry letters.
    pub connection: quinn::Connection,
}

/// The TLS provider, named explicitly so a second provider elsewhere in the build cannot make
/// rustls guess.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn transport(limits: &Limits) -> Result<Arc<quinn::TransportConfig>, LinkError> {
    let mut transport = quinn::TransportConfig::default();
    transport.max_idle_timeout(Some(
        quinn::IdleTimeout::try_from(limits.idle).map_err(|e| LinkError::Config(e.to_string()))?,
    ));
    transport.keep_alive_interval(Some(limits.keep_alive));
    Ok(Arc::new(transport))
}

fn config_error(e: impl std::fmt::Display) -> LinkError {
    LinkError::Config(e.to_string())
}

/// An endpoint that accepts links from `offices` on `addr` and can open links to them.
pub fn endpoint(
    identity: &Identity,
    offices: Vec<Office>,
    addr: SocketAddr,
    limits: &Limits,
) -> Result<quinn::Endpoint, LinkError> {
    let verifier = Arc::new(PinnedClients {
        offices,
        signatures: Signatures::of_provider(),
    });
    let mut tls = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(config_error)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![identity.cert.clone()], identity.key())
        .map_err(config_error)?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    // 0-RTT data is replayable: rustls's default of no early data stays.
    tls.max_early_data_size = 0;
    let crypto = QuicServerConfig::try_from(tls).map_err(config_error)?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    server.transport_config(transport(limits)?);
    server.max_incoming(limits.max_incoming);
    quinn::Endpoint::server(server, addr).map_err(|e| LinkError::Config(format!("{addr}: {e}")))
}

/// Opens a link to `office` at `addr` from `endpoint`, as office `me` (the name the peer's
/// settings give this hub): handshake, then hello.
pub async fn connect(
    endpoint: &quinn::Endpoint,
    identity: &Identity,
    me: &str,
    office: &Office,
    addr: SocketAddr,
    limits: &Limits,
) -> Result<Link, LinkError> {
    let failed = |reason: String| LinkError::Connect {
        office: office.name.clone(),
        reason,
    };
    let verifier = Arc::new(PinnedServer {
        office: office.clone(),
        signatures: Signatures::of_provider(),
    });
    let mut tls = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(config_error)?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_auth_cert(vec![identity.cert.clone()], identity.key())
        .map_err(config_error)?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    tls.enable_early_data = false;
    let crypto = QuicClientConfig::try_from(tls).map_err(config_error)?;
    let mut client = quinn::ClientConfig::new(Arc::new(crypto));
    client.transport_config(transport(limits)?);
    let connecting = endpoint
        .connect_with(client, addr, SERVER_NAME)
        .map_err(|e| failed(e.to_string()))?;
    let connection = tokio::time::timeout(limits.hello_within, connecting)
        .await
        .map_err(|_| failed("no handshake within the hello timeout".into()))?
        .map_err(|e| failed(e.to_string()))?;
    let hello = async {
        let (mut send, mut recv) = connection
            .open_bi()
            .await
            .map_err(|e| failed(e.to_string()))?;
        let frame_error = |source| LinkError::Frame {
            office: office.name.clone(),
            source,
        };
        frame::write(&mut send, &Frame::Hello { office: me.into() })
            .await
            .map_err(frame_error)?;
        match frame::read(&mut recv).await {
            Ok(Frame::Welcome { office: named }) if named == office.name => Ok(()),
            Ok(Frame::Refused { reason }) => Err(LinkError::Refused {
                office: office.name.clone(),
                reason,
            }),
            Ok(other) => Err(LinkError::Unexpected {
                office: office.name.clone(),
                got: format!("{other:?}"),
            }),
            // The peer refusing our certificate closes the connection here.
            Err(FrameError::Io(reason)) => Err(failed(reason)),
            Err(source) => Err(frame_error(source)),
        }
    };
    match tokio::time::timeout(limits.hello_within, hello).await {
        Ok(Ok(())) => Ok(Link {
            office: office.clone(),
            connection,
        }),
        Ok(Err(e)) => {
            connection.close(1u32.into(), b"hello failed");
            Err(e)
        }
        Err(_) => {
            connection.close(1u32.into(), b"hello timed out");
            Err(failed("no welcome within the hello timeout".into()))
        }
    }
}

/// Accepts one incoming link as office `me`: the handshake (which admits only certificates of
/// `offices`), then the hello, which must name the office the certificate is pinned for.
pub async fn accept(
    incoming: quinn::Incoming,
    me: &str,
    offices: &[Office],
    limits: &Limits,
) -> Result<Link, LinkError> {
    let peer = incoming.remote_address().to_string();
    let failed = |reason: String| LinkError::Connect {
        office: peer.clone(),
        reason,
    };
    let connection = tokio::time::timeout(limits.hello_within, incoming)
        .await
        .map_err(|_| failed("no handshake within the hello timeout".into()))?
        .map_err(|e| failed(e.to_string()))?;
    let office = certified_office(&connection, offices).ok_or_else(|| {
        failed("its certificate matches no office (the handshake should have refused it)".into())
    })?;
    let hello = async {
        let (mut send, mut recv) = connection
            .accept_bi()
            .await
            .map_err(|e| failed(e.to_string()))?;
        let frame_error = |source| LinkError::Frame {
            office: office.name.clone(),
            source,
        };
        let claimed = match frame::read(&mut recv).await.map_err(frame_error)? {
            Frame::Hello { office } => office,
            other => {
                return Err(LinkError::Unexpected {
                    office: office.name.clone(),
                    got: format!("{other:?}"),
                });
            }
        };
        if claimed != office.name {
            let refused = LinkError::Impostor {
                certified: office.name.clone(),
                claimed,
            };
            let reason = refused.to_string();
            // Best effort: the peer learns why before the connection closes.
            let _told = frame::write(&mut send, &Frame::Refused { reason }).await;
            let _finished = send.finish();
            let _read = tokio::time::timeout(Duration::from_millis(500), send.stopped()).await;
            return Err(refused);
        }
        frame::write(&mut send, &Frame::Welcome { office: me.into() })
            .await
            .map_err(frame_error)
    };
    match tokio::time::timeout(limits.hello_within, hello).await {
        Ok(Ok(())) => Ok(Link { office, connection }),
        Ok(Err(e)) => {
            connection.close(1u32.into(), b"hello refused");
            Err(e)
        }
        Err(_) => {
            connection.close(1u32.into(), b"hello timed out");
            Err(failed("no hello within the hello timeout".into()))
        }
    }
}

/// The office whose pinned certificate the connection's peer presented.
fn certified_office(connection: &quinn::Connection, offices: &[Office]) -> Option<Office> {
    let chain = connection
        .peer_identity()?
        .downcast::<Vec<CertificateDer<'static>>>()
        .ok()?;
    let seen = Fingerprint::of(chain.first()?);
    offices.iter().find(|o| o.fingerprint == seen).cloned()
}

/// How both verifiers check a handshake signature: TLS 1.3 only, with the provider's
/// algorithms (pinning replaces the chain check, never the signature check).
#[derive(Debug)]
struct Signatures {
    algorithms: WebPkiSupportedAlgorithms,
}

impl Signatures {
    fn of_provider() -> Self {
        Signatures {
            algorithms: provider().signature_verification_algorithms,
        }
    }

    fn no_tls12() -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General(
            "TLS 1.2 is not spoken between postmen".into(),
        ))
    }

    fn tls13(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Verifies the server is the pinned office: its certificate's fingerprint, and its handshake
/// signature with that certificate's key.
#[derive(Debug)]
struct PinnedServer {
    office: Office,
    signatures: Signatures,
}

impl ServerCertVerifier for PinnedServer {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let seen = Fingerprint::of(end_entity);
        if seen == self.office.fingerprint {
            return Ok(ServerCertVerified::assertion());
        }
        Err(rustls::Error::General(format!(
            "office {} presented certificate {seen}, not the pinned {}",
            self.office.name, self.office.fingerprint
        )))
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Signatures::no_tls12()
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.signatures.tls13(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.signatures.schemes()
    }
}

/// Admits a client only with the certificate of an office the settings pin.
#[derive(Debug)]
struct PinnedClients {
    offices: Vec<Office>,
    signatures: Signatures,
}

impl ClientCertVerifier for PinnedClients {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let seen = Fingerprint::of(end_entity);
        if self.offices.iter().any(|o| o.fingerprint == seen) {
            return Ok(ClientCertVerified::assertion());
        }
        tracing::warn!(%seen, "refused a peer whose certificate matches no office");
        Err(rustls::Error::General(format!(
            "certificate {seen} matches no office in this hub's settings"
        )))
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Signatures::no_tls12()
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.signatures.tls13(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.signatures.schemes()
    }
}
