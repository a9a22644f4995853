//! How a stage ended, as data both the driver and the wire carry.

use serde::{Deserialize, Serialize};

/// How a stage ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "exit", rename_all = "kebab-case")]
pub enum StageExit {
    /// The command exited with this code (0 is success).
    Exited {
        /// The exit code.
        code: i64,
    },
    /// The kernel killed it for exceeding its memory limit.
    OutOfMemory,
    /// It outlived its deadline and was killed.
    Deadline,
}

/// The result of one stage: how it ended and what it printed, bounded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageOutcome {
    /// The stage's name in its plan.
    pub stage: String,
    /// How it ended.
    pub exit: StageExit,
    /// stdout and stderr interleaved, at most the stage's `log_bytes`.
    #[serde(with = "serde_bytes_compat")]
    pub log: Vec<u8>,
    /// Bytes of output dropped past the bound.
    pub log_dropped: u64,
    /// Wall time from create to removal, milliseconds.
    pub elapsed_ms: u64,
}

impl StageOutcome {
    /// Whether the stage exited 0.
    pub fn succeeded(&self) -> bool {
        self.exit == StageExit::Exited { code: 0 }
    }
}

/// Logs are bytes, not text: carried as a byte string so a stage printing invalid UTF-8 cannot
/// break the reply.
mod serde_bytes_compat {
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(bytes)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E>(self, v: &[u8]) -> Result<Vec<u8>, E> {
                Ok(v.to_vec())
            }
            fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
                Ok(v)
            }
        }
        d.deserialize_bytes(V)
    }
}
