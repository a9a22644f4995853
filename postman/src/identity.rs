//! A hub's identity between hubs: an ECDSA P-256 key pair and a self-signed certificate (not a
//! CA), made once and kept in the hub folder where only the postman reads the key. A peer hub
//! pins the certificate's SHA-256 [`Fingerprint`]; there is no CA and no trust on first use.

use std::fmt;
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sha2::{Digest, Sha256};

pub use l3m_core::refs::paths::{IDENTITY_CERT, IDENTITY_DIR, IDENTITY_KEY};

/// The SHA-256 of a certificate's DER bytes: what an office is pinned by.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// The fingerprint of `cert` (its DER bytes).
    pub fn of(cert: &[u8]) -> Fingerprint {
        Fingerprint(Sha256::digest(cert).into())
    }

    /// Parses 64 hex digits, optionally prefixed `sha256:` and with `:` between bytes (as
    /// `openssl x509 -fingerprint` prints them): the forms settings accept
    /// ([`normalize_fingerprint`](l3m_core::settings::normalize_fingerprint), the one rule).
    pub fn parse(text: &str) -> Result<Fingerprint, IdentityError> {
        let bad = || IdentityError::BadFingerprint {
            text: text.chars().take(120).collect(),
        };
        let hex = l3m_core::settings::normalize_fingerprint(text).ok_or_else(bad)?;
        let mut out = [0u8; 32];
        for (byte, pair) in out.iter_mut().zip(hex.as_bytes().chunks(2)) {
            let digit = |d: u8| char::from(d).to_digit(16);
            match (digit(pair[0]), digit(pair[1])) {
                (Some(high), Some(low)) => *byte = (high * 16 + low) as u8,
                _ => return Err(bad()),
            }
        }
        Ok(Fingerprint(out))
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sha256:")?;
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A hub's certificate and the private key it was made with.
pub struct Identity {
    /// The self-signed certificate (DER).
    pub cert: CertificateDer<'static>,
    key: PrivatePkcs8KeyDer<'static>,
}

impl Clone for Identity {
    fn clone(&self) -> Self {
        Identity {
            cert: self.cert.clone(),
            key: self.key.clone_key(),
        }
    }
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("fingerprint", &self.fingerprint())
            .finish_non_exhaustive()
    }
}

/// Why an identity could not be made, read or written, or a fingerprint not parsed.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The key pair or certificate could not be generated.
    #[error("cannot make the hub's certificate: {0}")]
    Generate(String),
    /// A file could not be read or written.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The key file may be read by others than its owner.
    #[error(
        "{} is readable by others (mode {mode:o}); only the postman may read the hub's key: chmod 600 it",
        path.display()
    )]
    KeyExposed {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A fingerprint is not 64 hex digits.
    #[error(
        "`{text}` is not a certificate fingerprint: give the 64 hex digits `l3m office show-identity` prints on the peer"
    )]
    BadFingerprint {
        /// What was given (cut).
        text: String,
    },
}

impl Identity {
    /// A fresh key pair and a self-signed end-entity certificate naming hub `name`.
    pub fn generate(name: &str) -> Result<Identity, IdentityError> {
        let generate = |e: rcgen::Error| IdentityError::Generate(e.to_string());
        let key = rcgen::KeyPair::generate().map_err(generate)?;
        let mut params = rcgen::CertificateParams::new(vec![format!("{name}.l3m-hub.invalid")])
            .map_err(generate)?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("l3m hub {name}"));
        params.is_ca = rcgen::IsCa::ExplicitNoCa;
        let cert = params.self_signed(&key).map_err(generate)?;
        Ok(Identity {
            cert: cert.der().clone(),
            key: PrivatePkcs8KeyDer::from(key.serialize_der()),
        })
    }

    /// The fingerprint a peer pins.
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint::of(&self.cert)
    }

    /// The private key, for the TLS configurations.
    pub fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(self.key.clone_key())
    }

    /// Reads the identity kept in `dir`, refusing a key others may read.
    pub fn read(dir: &Path) -> Result<Identity, IdentityError> {
        let key_path = dir.join(IDENTITY_KEY);
        let meta = std::fs::metadata(&key_path).map_err(io("read", &key_path))?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(IdentityError::KeyExposed {
                path: key_path,
                mode,
            });
        }
        let key = std::fs::read(&key_path).map_err(io("read", &key_path))?;
        let cert_path = dir.join(IDENTITY_CERT);
        let cert = std::fs::read(&cert_path).map_err(io("read", &cert_path))?;
        Ok(Identity {
            cert: CertificateDer::from(cert),
            key: PrivatePkcs8KeyDer::from(key),
        })
    }

    /// Writes the identity into `dir` (made 0700), the key 0600; an existing file is never
    /// overwritten, so a hub's identity cannot be replaced by accident.
    pub fn write(&self, dir: &Path) -> Result<(), IdentityError> {
        std::fs::create_dir_all(dir).map_err(io("create", dir))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(io("restrict", dir))?;
        write_new(&dir.join(IDENTITY_KEY), self.key.secret_pkcs8_der(), 0o600)?;
        write_new(&dir.join(IDENTITY_CERT), &self.cert, 0o644)
    }

    /// The identity in `dir`, made for hub `name` if there is none yet.
    pub fn load_or_create(dir: &Path, name: &str) -> Result<Identity, IdentityError> {
        if dir.join(IDENTITY_KEY).exists() {
            return Identity::read(dir);
        }
        let identity = Identity::generate(name)?;
        identity.write(dir)?;
        Ok(identity)
    }
}

/// Writes `bytes` to a new file at `path` with `mode`, synced.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), IdentityError> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(io("create", path))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(io("write", path))
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> IdentityError {
    let path = path.to_path_buf();
    move |source| IdentityError::Io {
        action,
        path,
        source,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_identity_reads_back_with_its_fingerprint_and_its_key_private() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("identity");
        let made = Identity::load_or_create(&at, "north").unwrap();
        let again = Identity::load_or_create(&at, "north").unwrap();
        assert_eq!(made.fingerprint(), again.fingerprint());
        let mode = |f: &str| std::fs::metadata(at.join(f)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(IDENTITY_KEY), 0o600);
        assert!(made.write(&at).is_err(), "an identity is never overwritten");
        std::fs::set_permissions(
            at.join(IDENTITY_KEY),
            std::fs::Permissions::from_mode(0o640),
        )
        .unwrap();
        assert!(matches!(
            Identity::read(&at),
            Err(IdentityError::KeyExposed { mode: 0o640, .. })
        ));
    }

    #[test]
    fn a_fingerprint_reads_back_as_printed_and_with_colons() {
        let f = Identity::generate("south").unwrap().fingerprint();
        let printed = f.to_string();
        assert_eq!(Fingerprint::parse(&printed).unwrap(), f);
        let colons: String = printed
            .trim_start_matches("sha256:")
            .as_bytes()
            .chunks(2)
            .map(|c| std::str::from_utf8(c).unwrap().to_uppercase())
            .collect::<Vec<_>>()
            .join(":");
        assert_eq!(Fingerprint::parse(&colons).unwrap(), f);
        // `+a` reads as a hex byte to `u8::from_str_radix`; a fingerprint never has one.
        for bad in [
            "",
            "sha256:12",
            &"zz".repeat(32),
            &"é".repeat(32),
            &"+a".repeat(32),
        ] {
            assert!(Fingerprint::parse(bad).is_err(), "{bad}");
        }
    }
}
