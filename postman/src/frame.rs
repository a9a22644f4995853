//! Frames between postmen: each a big-endian `u32` length, then a MessagePack map
//! `{ v: u32, frame: Frame }`. The length is checked against [`MAX_FRAME`] before a byte of the
//! body is read, and the version before the frame is decoded, so an oversized, unknown or
//! malformed frame is a typed error, never a crash or an unbounded read.

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};

/// The frame format this build speaks.
pub const VERSION: u32 = 1;
/// The largest frame body read or written.
pub const MAX_FRAME: usize = 1024 * 1024;

/// What one postman says to another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Frame {
    /// The connecting postman names the office it is (as the other hub's settings name it).
    Hello {
        /// The office the sender claims to be.
        office: String,
    },
    /// The accepting postman took the hello; it names the office it is, as a check.
    Welcome {
        /// The office the accepting hub is.
        office: String,
    },
    /// The other side refused what it was sent, and why.
    Refused {
        /// Why, for the operator.
        reason: String,
    },
    /// Letters and receipts for the receiving hub: each a stored outbox line as the sending
    /// hub staged it.
    Letters {
        /// The lines.
        letters: Vec<String>,
    },
    /// What the receiving hub made of [`Frame::Letters`], once it holds them durably.
    Delivered {
        /// Now in their recipients' inboxes.
        delivered: Vec<String>,
        /// Delivered before (a retry).
        already: Vec<String>,
        /// Letters refused: each letter id with the reason (bounced to its sender).
        bounced: Vec<(String, String)>,
        /// Receipts refused: each letter id with the reason.
        #[serde(default)]
        refused: Vec<(String, String)>,
    },
}

#[derive(Serialize)]
struct Out<'a> {
    v: u32,
    frame: &'a Frame,
}

#[derive(Deserialize)]
struct Head {
    v: u32,
}

#[derive(Deserialize)]
struct In {
    #[allow(dead_code)] // read by `Head` first
    v: u32,
    frame: Frame,
}

/// Why a frame could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The frame's announced length exceeds [`MAX_FRAME`]; nothing of it was read.
    #[error("a frame of {len} bytes exceeds the limit of {max} bytes")]
    Oversized {
        /// The length announced (or encoded).
        len: u64,
        /// The limit.
        max: usize,
    },
    /// The frame carries a version this build does not speak.
    #[error("frame version {found} is not spoken here (this build speaks version {VERSION})")]
    UnknownVersion {
        /// The version found.
        found: u32,
    },
    /// The frame is not MessagePack of a known shape.
    #[error("a malformed frame: {0}")]
    Malformed(String),
    /// The stream ended before a whole frame.
    #[error("the stream ended mid-frame")]
    Truncated,
    /// The stream failed.
    #[error("the stream failed: {0}")]
    Io(String),
}

/// Encodes `frame` and writes it to `out`.
pub async fn write<W: AsyncWrite + Unpin>(out: &mut W, frame: &Frame) -> Result<(), FrameError> {
    let body = rmp_serde::to_vec_named(&Out { v: VERSION, frame })
        .map_err(|e| FrameError::Malformed(e.to_string()))?;
    if body.len() > MAX_FRAME {
        return Err(FrameError::Oversized {
            len: body.len() as u64,
            max: MAX_FRAME,
        });
    }
    let len = u32::try_from(body.len()).map_err(|_| FrameError::Oversized {
        len: body.len() as u64,
        max: MAX_FRAME,
    })?;
    out.write_all(&len.to_be_bytes())
        .await
        .map_err(|e| FrameError::Io(e.to_string()))?;
    out.write_all(&body)
        .await
        .map_err(|e| FrameError::Io(e.to_string()))
}

/// Reads one frame from `input`, checking its size before reading it and its version before
/// decoding it.
pub async fn read<R: AsyncRead + Unpin>(input: &mut R) -> Result<Frame, FrameError> {
    let mut len = [0u8; 4];
    input.read_exact(&mut len).await.map_err(eof)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(FrameError::Oversized {
            len: len as u64,
            max: MAX_FRAME,
        });
    }
    let mut body = vec![0u8; len];
    input.read_exact(&mut body).await.map_err(eof)?;
    decode(&body)
}

/// Decodes one frame body: the version first, then the frame.
pub fn decode(body: &[u8]) -> Result<Frame, FrameError> {
    let head: Head =
        rmp_serde::from_slice(body).map_err(|e| FrameError::Malformed(e.to_string()))?;
    if head.v != VERSION {
        return Err(FrameError::UnknownVersion { found: head.v });
    }
    rmp_serde::from_slice::<In>(body)
        .map(|decoded| decoded.frame)
        .map_err(|e| FrameError::Malformed(e.to_string()))
}

fn eof(e: std::io::Error) -> FrameError {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        FrameError::Truncated
    } else {
        FrameError::Io(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn a_frame_reads_back_as_written() {
        let frame = Frame::Hello {
            office: "north".into(),
        };
        let mut wire = Vec::new();
        write(&mut wire, &frame).await.unwrap();
        assert_eq!(read(&mut wire.as_slice()).await.unwrap(), frame);
    }

    #[tokio::test]
    async fn oversized_unknown_malformed_and_cut_frames_are_typed_errors() {
        let huge = ((MAX_FRAME + 1) as u32).to_be_bytes();
        assert!(matches!(
            read(&mut huge.as_slice()).await,
            Err(FrameError::Oversized { .. })
        ));
        #[derive(Serialize)]
        struct Future {
            v: u32,
            frame: &'static str,
        }
        let body = rmp_serde::to_vec_named(&Future { v: 9, frame: "x" }).unwrap();
        assert!(matches!(
            decode(&body),
            Err(FrameError::UnknownVersion { found: 9 })
        ));
        assert!(matches!(decode(&[0xc1]), Err(FrameError::Malformed(_))));
        let mut wire = Vec::new();
        write(&mut wire, &Frame::Refused { reason: "x".into() })
            .await
            .unwrap();
        wire.truncate(wire.len() - 1);
        assert!(matches!(
            read(&mut wire.as_slice()).await,
            Err(FrameError::Truncated)
        ));
    }
}
