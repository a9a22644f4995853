//! A process's credential and the cryptography of a session: proof of possession at open, a
//! session key no one on the bus learns, and a seal on every later request.
//!
//! Opening a session (one round trip): the client makes a fresh X25519 key pair and signs, with
//! its credential's Ed25519 key, the hub's id, the credential id, the duty it asks for and its
//! fresh public key ([`open_statement`]). hubd checks the signature against the public key it
//! registered, answers with its own fresh X25519 public key, and both sides derive the session
//! key from the shared secret ([`Ephemeral::with_hub`], [`Ephemeral::with_client`]). Replaying
//! an open request gets the replayer a session whose key only the original client can derive.
//!
//! Every later request is sealed: a keyed BLAKE3 MAC over a per-session counter, the message
//! kind and its body ([`SessionKey::seal`]). A capability seen on the bus is therefore useless
//! without the key, a sealed request cannot be altered, and hubd refuses a counter it has seen
//! (see hubd's session table), so a captured request cannot be replayed either. hubd's answer
//! to a sealed request is sealed in turn, encrypted to the session ([`crate::sealed_reply`]).

use std::fmt;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use l3m_core::credential::{CredentialId, PublicKey, Scope};
use l3m_core::duty::Duty;
use serde::{Deserialize, Serialize};

use crate::sealed_reply::ReplyKey;

/// Why a credential file could not be read or written, or a key was not usable.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    /// The file could not be read or written.
    #[error("cannot {action} the credential {}: {source}", path.display())]
    Io {
        /// `read` or `write`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is readable (or writable) by others than its owner.
    #[error("the credential {} has mode {mode:o}; make it 0600 (chmod 600 {})", path.display(), path.display())]
    Exposed {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The file is not a credential.
    #[error("{} is not an l3m credential file: {reason}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// The OS random source failed.
    #[error("the OS random source failed: {0}")]
    Random(String),
}

/// A credential's private half, as its process holds it: the id hubd knows it by, what it is
/// for, the Ed25519 signing key, and the public identity key of the hubd that issued it. Read
/// from a file only its owner may read.
#[derive(Clone)]
pub struct KeyFile {
    /// The id hubd registered.
    pub id: CredentialId,
    /// What it may open (as issued; hubd's registry is the authority).
    pub scope: Scope,
    /// hubd's identity key ([`HubIdentity`]): a session's opening answer must be signed with
    /// it. `None` for a credential written before hubds had one: such a client pins nothing.
    pub hub_key: Option<PublicKey>,
    signing: SigningKey,
}

impl fmt::Debug for KeyFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyFile")
            .field("id", &self.id)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// The file's format (TOML).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    id: CredentialId,
    scope: Scope,
    /// The Ed25519 seed, 64 hex digits.
    secret_key: String,
    /// hubd's identity key, 64 hex digits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hub_key: Option<String>,
}

const HEADER: &str = "# An l3m credential. Keep it private (mode 0600); whoever reads it can open the sessions\n\
                      # its scope allows until it expires or a human revokes it (l3m credential revoke).\n";

impl KeyFile {
    /// A fresh key pair for a credential to be registered as `id` with `scope`.
    pub fn generate(id: CredentialId, scope: Scope) -> Result<KeyFile, KeyFileError> {
        let mut seed = [0u8; 32];
        getrandom::getrandom(&mut seed).map_err(|e| KeyFileError::Random(e.to_string()))?;
        Ok(KeyFile {
            id,
            scope,
            hub_key: None,
            signing: SigningKey::from_bytes(&seed),
        })
    }

    /// The same credential, pinning the hubd whose identity key is `hub_key`.
    pub fn pinning(mut self, hub_key: Option<PublicKey>) -> KeyFile {
        self.hub_key = hub_key;
        self
    }

    /// A fresh random credential id.
    pub fn random_id() -> Result<CredentialId, KeyFileError> {
        let mut bytes = [0u8; 8];
        getrandom::getrandom(&mut bytes).map_err(|e| KeyFileError::Random(e.to_string()))?;
        Ok(CredentialId::from_random(bytes))
    }

    /// The public half hubd registers.
    pub fn public_key(&self) -> PublicKey {
        PublicKey(self.signing.verifying_key().to_bytes())
    }

    /// Reads `path`, refusing a file others may read.
    pub fn read(path: &Path) -> Result<KeyFile, KeyFileError> {
        let text = read_private(path)?;
        let malformed = |reason: String| KeyFileError::Malformed {
            path: path.to_path_buf(),
            reason,
        };
        let stored: Stored = toml::from_str(&text).map_err(|e| malformed(e.to_string()))?;
        let seed = PublicKey::parse(&stored.secret_key)
            .map_err(|_| malformed("`secret_key` is not 64 hex digits".into()))?;
        let hub_key = stored
            .hub_key
            .as_deref()
            .map(PublicKey::parse)
            .transpose()
            .map_err(|_| malformed("`hub_key` is not 64 hex digits".into()))?;
        Ok(KeyFile {
            id: stored.id,
            scope: stored.scope,
            hub_key,
            signing: SigningKey::from_bytes(&seed.0),
        })
    }

    /// Writes the credential to a new file `path` with mode 0600 (its folder made 0700 if new);
    /// never overwrites.
    pub fn write(&self, path: &Path) -> Result<(), KeyFileError> {
        let failed = |source| KeyFileError::Io {
            action: "write",
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty() && !d.exists())
        {
            std::fs::create_dir_all(dir).map_err(failed)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(failed)?;
        }
        let stored = Stored {
            id: self.id.clone(),
            scope: self.scope.clone(),
            secret_key: PublicKey(self.signing.to_bytes()).to_string(),
            hub_key: self.hub_key.as_ref().map(PublicKey::to_string),
        };
        let body = toml::to_string(&stored).map_err(|e| KeyFileError::Malformed {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(failed)?;
        file.write_all(HEADER.as_bytes()).map_err(failed)?;
        file.write_all(body.as_bytes()).map_err(failed)?;
        file.sync_all().map_err(failed)
    }

    /// Signs the statement that opens a session for `duty` on `hub` with `client_key`.
    pub fn sign_open(&self, hub: &str, duty: &Duty, client_key: &[u8; 32]) -> [u8; 64] {
        self.signing
            .sign(&open_statement(hub, &self.id, duty, client_key))
            .to_bytes()
    }
}

/// A key a process signs with for its own lifetime only (hubd's voucher key): made fresh at
/// start, never stored, its public half handed out with every session.
pub struct LifetimeSigner(SigningKey);

impl fmt::Debug for LifetimeSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LifetimeSigner(..)")
    }
}

impl LifetimeSigner {
    /// A fresh key from the OS random source.
    pub fn generate() -> Result<LifetimeSigner, KeyFileError> {
        let mut seed = [0u8; 32];
        getrandom::getrandom(&mut seed).map_err(|e| KeyFileError::Random(e.to_string()))?;
        Ok(LifetimeSigner(SigningKey::from_bytes(&seed)))
    }

    /// The public half.
    pub fn public(&self) -> [u8; 32] {
        self.0.verifying_key().to_bytes()
    }

    /// The signature over `statement`.
    pub fn sign(&self, statement: &[u8]) -> [u8; 64] {
        self.0.sign(statement).to_bytes()
    }
}

/// hubd's long-lived identity: an Ed25519 key made when the hub is made, kept in a file only
/// hubd's OS user may read, whose public half every credential carries ([`KeyFile::hub_key`]).
/// hubd signs each `open-session` answer with it, so a client knows it talks to its hub's hubd,
/// not to whoever may answer on hubd's subjects.
pub struct HubIdentity(SigningKey);

impl fmt::Debug for HubIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HubIdentity(..)")
    }
}

impl HubIdentity {
    /// Reads the identity at `path`, or makes one there (mode 0600, never overwriting).
    pub fn load_or_create(path: &Path) -> Result<HubIdentity, KeyFileError> {
        if path.exists() {
            let text = read_private(path)?;
            let seed = PublicKey::parse(text.trim()).map_err(|_| KeyFileError::Malformed {
                path: path.to_path_buf(),
                reason: "not 64 hex digits".into(),
            })?;
            return Ok(HubIdentity(SigningKey::from_bytes(&seed.0)));
        }
        let mut seed = [0u8; 32];
        getrandom::getrandom(&mut seed).map_err(|e| KeyFileError::Random(e.to_string()))?;
        let failed = |source| KeyFileError::Io {
            action: "write",
            path: path.to_path_buf(),
            source,
        };
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(failed)?;
        file.write_all(PublicKey(seed).to_string().as_bytes())
            .map_err(failed)?;
        file.sync_all().map_err(failed)?;
        Ok(HubIdentity(SigningKey::from_bytes(&seed)))
    }

    /// The public half, which credentials carry.
    pub fn public(&self) -> PublicKey {
        PublicKey(self.0.verifying_key().to_bytes())
    }

    /// The signature over `statement`.
    pub fn sign(&self, statement: &[u8]) -> [u8; 64] {
        self.0.sign(statement).to_bytes()
    }
}

/// Reads a file that must be its owner's alone (no group or other permission bits).
pub fn read_private(path: &Path) -> Result<String, KeyFileError> {
    let failed = |source| KeyFileError::Io {
        action: "read",
        path: path.to_path_buf(),
        source,
    };
    let mode = std::fs::metadata(path)
        .map_err(failed)?
        .permissions()
        .mode()
        & 0o777;
    if mode & 0o077 != 0 {
        return Err(KeyFileError::Exposed {
            path: path.to_path_buf(),
            mode,
        });
    }
    std::fs::read_to_string(path).map_err(failed)
}

/// What a client signs to open a session: bound to the hub, the credential, the duty and the
/// client's fresh key, so the signature opens nothing else.
pub fn open_statement(hub: &str, id: &CredentialId, duty: &Duty, client_key: &[u8; 32]) -> Vec<u8> {
    let duty = serde_json::to_string(duty).unwrap_or_default();
    let mut statement = Vec::with_capacity(96 + hub.len() + duty.len());
    statement.extend_from_slice(b"l3m open-session v1\0");
    for part in [hub.as_bytes(), id.as_str().as_bytes(), duty.as_bytes()] {
        statement.extend_from_slice(part);
        statement.push(0);
    }
    statement.extend_from_slice(client_key);
    statement
}

/// Whether `signature` is `key`'s signature over `statement`.
pub fn verify(key: &PublicKey, statement: &[u8], signature: &[u8; 64]) -> bool {
    VerifyingKey::from_bytes(&key.0).is_ok_and(|key| {
        key.verify(statement, &Signature::from_bytes(signature))
            .is_ok()
    })
}

/// One side's fresh X25519 key for one session.
pub struct Ephemeral {
    secret: x25519_dalek::StaticSecret,
    /// Its public half, sent to the other side.
    pub public: [u8; 32],
}

impl fmt::Debug for Ephemeral {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Ephemeral(..)")
    }
}

impl Ephemeral {
    /// A fresh key pair from the OS random source.
    pub fn generate() -> Result<Ephemeral, KeyFileError> {
        let mut bytes = [0u8; 32];
        getrandom::getrandom(&mut bytes).map_err(|e| KeyFileError::Random(e.to_string()))?;
        let secret = x25519_dalek::StaticSecret::from(bytes);
        let public = x25519_dalek::PublicKey::from(&secret).to_bytes();
        Ok(Ephemeral { secret, public })
    }

    /// The client's session key, once hubd answered with its key `hub`.
    pub fn with_hub(&self, hub: &[u8; 32]) -> SessionKey {
        self.agree(hub, &self.public, hub)
    }

    /// hubd's session key for the client that sent `client`; `None` for a low-order key (all
    /// zero, say), whose shared secret a third party could compute too.
    pub fn with_client(&self, client: &[u8; 32]) -> Option<SessionKey> {
        let shared = self.shared(client);
        shared
            .was_contributory()
            .then(|| SessionKey::derive(shared.as_bytes(), client, &self.public))
    }

    /// The key shared with the holder of `theirs`, bound to both public keys in the order
    /// client, hub (the same on both sides).
    fn agree(&self, theirs: &[u8; 32], client: &[u8; 32], hub: &[u8; 32]) -> SessionKey {
        SessionKey::derive(self.shared(theirs).as_bytes(), client, hub)
    }

    fn shared(&self, theirs: &[u8; 32]) -> x25519_dalek::SharedSecret {
        self.secret
            .diffie_hellman(&x25519_dalek::PublicKey::from(*theirs))
    }
}

/// The key both ends of one session share; never sent anywhere. Requests are sealed with it
/// (a MAC), replies with the distinct key derived from it ([`SessionKey::reply`]).
#[derive(Clone)]
pub struct SessionKey {
    mac: [u8; 32],
    reply: ReplyKey,
}

impl fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionKey(..)")
    }
}

/// A request's seal: its counter in the session and the MAC over counter, kind and body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seal {
    /// The request's number in its session (each used once).
    pub n: u64,
    /// Keyed BLAKE3 of `n`, the kind and the body.
    #[serde(with = "serde_bytes")]
    pub mac: [u8; 32],
}

impl SessionKey {
    /// Derives the session key from the X25519 shared secret and both public keys.
    fn derive(shared: &[u8; 32], client: &[u8; 32], hub: &[u8; 32]) -> SessionKey {
        let mut hasher = blake3::Hasher::new_derive_key("l3m session key v1");
        hasher.update(shared).update(client).update(hub);
        let mac = *hasher.finalize().as_bytes();
        SessionKey {
            reply: ReplyKey::derive(&mac),
            mac,
        }
    }

    /// The key this session's replies are sealed with: only the two ends of the session make
    /// or open them.
    pub fn reply(&self) -> &ReplyKey {
        &self.reply
    }

    /// The seal of request number `n` of kind `kind` with body `body`.
    pub fn seal(&self, n: u64, kind: &str, body: &[u8]) -> Seal {
        Seal {
            n,
            mac: *self.mac(n, kind, body).as_bytes(),
        }
    }

    /// Whether `seal` is this key's seal of `kind` and `body` (compared in constant time).
    pub fn verifies(&self, seal: &Seal, kind: &str, body: &[u8]) -> bool {
        self.mac(seal.n, kind, body) == blake3::Hash::from_bytes(seal.mac)
    }

    /// The proof that the holder of this session key is the one a voucher was issued to: a
    /// MAC over the voucher's statement, which only the two ends of the session can make.
    pub fn holder_proof(&self, voucher_statement: &[u8]) -> [u8; 32] {
        *self.mac(0, HOLDER_PROOF, voucher_statement).as_bytes()
    }

    /// Whether `proof` is this key's [`SessionKey::holder_proof`] of `voucher_statement`
    /// (compared in constant time).
    pub fn proves_holder(&self, voucher_statement: &[u8], proof: &[u8; 32]) -> bool {
        self.mac(0, HOLDER_PROOF, voucher_statement) == blake3::Hash::from_bytes(*proof)
    }

    fn mac(&self, n: u64, kind: &str, body: &[u8]) -> blake3::Hash {
        let mut hasher = blake3::Hasher::new_keyed(&self.mac);
        hasher
            .update(&n.to_le_bytes())
            .update(&(kind.len() as u64).to_le_bytes())
            .update(kind.as_bytes())
            .update(body);
        hasher.finalize()
    }
}

/// The kind a holder proof is made under; no message has it, so a proof is never a seal.
const HOLDER_PROOF: &str = "l3m voucher holder v1";

/// 32 bytes from the OS's random source as 64 hex digits: session capabilities, letter ids,
/// nonces and passwords, wherever a value must be unguessable.
pub fn random_hex() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use l3m_core::names::AgentName;

    fn host() -> KeyFile {
        KeyFile::generate(KeyFile::random_id().unwrap(), Scope::Host { subtree: None }).unwrap()
    }

    #[test]
    fn a_signature_opens_only_what_it_names() {
        let key = host();
        let duty = Duty::Sequencer {
            agent: AgentName::parse("bob").unwrap(),
        };
        let eph = [7u8; 32];
        let signature = key.sign_open("main", &duty, &eph);
        let statement = open_statement("main", &key.id, &duty, &eph);
        assert!(verify(&key.public_key(), &statement, &signature));
        let other_hub = open_statement("north", &key.id, &duty, &eph);
        assert!(!verify(&key.public_key(), &other_hub, &signature));
        let other_duty = Duty::Sequencer {
            agent: AgentName::parse("carol").unwrap(),
        };
        let other = open_statement("main", &key.id, &other_duty, &eph);
        assert!(!verify(&key.public_key(), &other, &signature));
        assert!(!verify(&host().public_key(), &statement, &signature));
    }

    #[test]
    fn both_sides_agree_on_the_key_and_a_seal_binds_counter_kind_and_body() {
        let (client, hub) = (
            Ephemeral::generate().unwrap(),
            Ephemeral::generate().unwrap(),
        );
        let a = client.with_hub(&hub.public);
        let b = hub.with_client(&client.public).unwrap();
        let seal = a.seal(3, "hubd.append-log", b"body");
        assert!(b.verifies(&seal, "hubd.append-log", b"body"));
        assert!(!b.verifies(&seal, "hubd.append-log", b"bodY"));
        assert!(!b.verifies(&seal, "hubd.read-log", b"body"));
        assert!(!b.verifies(&Seal { n: 4, ..seal }, "hubd.append-log", b"body"));
        let stranger = Ephemeral::generate().unwrap();
        let c = stranger.with_hub(&hub.public);
        assert!(!c.verifies(&seal, "hubd.append-log", b"body"));
    }

    #[test]
    fn a_low_order_client_key_agrees_no_session() {
        let hub = Ephemeral::generate().unwrap();
        assert!(hub.with_client(&[0u8; 32]).is_none(), "all zero");
        let mut one = [0u8; 32];
        one[0] = 1;
        assert!(hub.with_client(&one).is_none(), "the identity point");
        let client = Ephemeral::generate().unwrap();
        assert!(hub.with_client(&client.public).is_some());
    }

    #[test]
    fn a_key_file_reads_back_and_refuses_to_be_shared() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("creds/host.key");
        let key = host();
        key.write(&path).unwrap();
        let back = KeyFile::read(&path).unwrap();
        assert_eq!(back.id, key.id);
        assert_eq!(back.public_key(), key.public_key());
        assert_eq!(back.hub_key, None);
        assert!(key.write(&path).is_err(), "never overwrites");
        let hub = HubIdentity::load_or_create(&dir.path().join("identity.key")).unwrap();
        let pinned = host().pinning(Some(hub.public()));
        pinned.write(&dir.path().join("pinned.key")).unwrap();
        let back = KeyFile::read(&dir.path().join("pinned.key")).unwrap();
        assert_eq!(back.hub_key, Some(hub.public()));
        let again = HubIdentity::load_or_create(&dir.path().join("identity.key")).unwrap();
        assert_eq!(again.public(), hub.public(), "the identity is long-lived");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(matches!(
            KeyFile::read(&path),
            Err(KeyFileError::Exposed { mode: 0o640, .. })
        ));
        assert!(!format!("{key:?}").contains(&PublicKey(key.signing.to_bytes()).to_string()));
    }
}
