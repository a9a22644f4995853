//! The sources uploaded for builds not yet asked for, each kept for exactly the voucher it came
//! under, until that build takes it or the voucher expires.
//!
//! Pure bookkeeping, no IO: `serve` checks each chunk's voucher first, and the pipeline takes a
//! whole bundle by the voucher of its build request. Bounded: a bundle is at most
//! [`MAX_BUNDLE_BYTES`], and at most [`MAX_OPEN`] are held at once, so an uploader that never
//! builds cannot fill the builder's memory.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use l3m_wire::build::Uploaded;
use l3m_wire::build::bundle::MAX_BUNDLE_BYTES;
use l3m_wire::reply::{ErrorCode, RemoteError};

/// The most uploads held at once (each its own voucher's).
pub const MAX_OPEN: usize = 8;

/// Why a chunk was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UploadError {
    /// The bundle is larger than a build takes.
    #[error("a source of {total} bytes is larger than a build takes ({MAX_BUNDLE_BYTES})")]
    TooLarge {
        /// Its length as announced.
        total: u64,
    },
    /// A chunk not where the upload stands (or a different total).
    #[error(
        "a chunk at {offset} of {total} bytes, where this voucher's upload holds {held} of \
         {expected}; start again from 0"
    )]
    OutOfOrder {
        /// Where the chunk starts.
        offset: u64,
        /// Its announced total.
        total: u64,
        /// What the upload holds.
        held: u64,
        /// The upload's total.
        expected: u64,
    },
    /// Too many uploads are held.
    #[error("{MAX_OPEN} uploads are waiting for their builds; try again shortly")]
    Busy,
}

impl UploadError {
    /// The typed refusal the uploader gets on the wire.
    pub fn to_remote(&self) -> RemoteError {
        let code = match self {
            UploadError::TooLarge { .. } => ErrorCode::Refused,
            UploadError::OutOfOrder { .. } => ErrorCode::Conflict,
            UploadError::Busy => ErrorCode::Refused,
        };
        RemoteError::new(code, self.to_string())
    }
}

/// One upload under way or done.
#[derive(Debug)]
struct Upload {
    total: u64,
    bytes: Vec<u8>,
    expires_ms: u64,
}

/// The uploads, by their voucher's nonce.
#[derive(Debug, Default)]
pub struct Uploads {
    held: Mutex<HashMap<String, Upload>>,
}

impl Uploads {
    /// Adds a chunk of the upload for the voucher `nonce` (which expires at `expires_ms`) at
    /// `now_ms`: `offset` 0 starts it (again), any other must follow what is held.
    pub fn receive(
        &self,
        nonce: &str,
        expires_ms: u64,
        total: u64,
        offset: u64,
        chunk: &[u8],
        now_ms: u64,
    ) -> Result<Uploaded, UploadError> {
        if total > MAX_BUNDLE_BYTES {
            return Err(UploadError::TooLarge { total });
        }
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.retain(|_, u| u.expires_ms > now_ms);
        if offset == 0 {
            if !held.contains_key(nonce) && held.len() >= MAX_OPEN {
                return Err(UploadError::Busy);
            }
            held.insert(
                nonce.to_owned(),
                Upload {
                    total,
                    bytes: Vec::new(),
                    expires_ms,
                },
            );
        }
        let (held_len, expected) = held
            .get(nonce)
            .map_or((0, 0), |u| (u.bytes.len() as u64, u.total));
        let fits = offset
            .checked_add(chunk.len() as u64)
            .is_some_and(|end| end <= total);
        let upload = match held.get_mut(nonce) {
            Some(u) if u.total == total && held_len == offset && fits => u,
            _ => {
                return Err(UploadError::OutOfOrder {
                    offset,
                    total,
                    held: held_len,
                    expected,
                });
            }
        };
        upload.bytes.extend_from_slice(chunk);
        let received = upload.bytes.len() as u64;
        Ok(Uploaded {
            received,
            done: received == upload.total,
        })
    }

    /// The whole bundle uploaded for the voucher `nonce`, taken; `None` if none arrived whole.
    pub fn take(&self, nonce: &str) -> Option<Vec<u8>> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        match held.remove(nonce) {
            Some(u) if u.bytes.len() as u64 == u.total => Some(u.bytes),
            Some(u) => {
                held.insert(nonce.to_owned(), u);
                None
            }
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_in_order_make_a_bundle_taken_once_by_its_voucher() {
        let uploads = Uploads::default();
        assert_eq!(
            uploads.receive("n1", 100, 5, 0, b"ab", 0),
            Ok(Uploaded {
                received: 2,
                done: false
            })
        );
        assert_eq!(uploads.take("n1"), None, "half an upload is not a bundle");
        let skipped = uploads.receive("n1", 100, 5, 3, b"de", 0);
        assert!(matches!(
            skipped,
            Err(UploadError::OutOfOrder { held: 2, .. })
        ));
        let overrun = uploads.receive("n1", 100, 5, 2, b"cdef", 0);
        assert!(matches!(overrun, Err(UploadError::OutOfOrder { .. })));
        assert!(uploads.receive("n1", 100, 5, 2, b"cde", 0).unwrap().done);
        assert_eq!(uploads.take("n2"), None, "another voucher's");
        assert_eq!(uploads.take("n1").as_deref(), Some(&b"abcde"[..]));
        assert_eq!(uploads.take("n1"), None, "taken once");
    }

    #[test]
    fn uploads_are_bounded_in_size_number_and_time() {
        let uploads = Uploads::default();
        let big = uploads.receive("n", 100, MAX_BUNDLE_BYTES + 1, 0, b"", 0);
        assert!(matches!(big, Err(UploadError::TooLarge { .. })));
        for i in 0..MAX_OPEN {
            uploads
                .receive(&format!("n{i}"), 100, 1, 0, b"", 0)
                .unwrap();
        }
        assert_eq!(
            uploads.receive("late", 100, 1, 0, b"", 0),
            Err(UploadError::Busy)
        );
        // Once their vouchers expired, the held uploads make room and are gone.
        uploads.receive("late", 300, 1, 0, b"x", 200).unwrap();
        assert_eq!(uploads.take("n0"), None);
        assert_eq!(uploads.take("late").as_deref(), Some(&b"x"[..]));
    }
}
