//! Whether a Docker engine answers, asked the way the builder and the runner will reach it
//! (`DOCKER_HOST`, else the default socket), with one `GET /_ping`.
//!
//! `l3m up` asks before it starts the builder and the runner, and `l3m doctor` before it calls
//! builds possible: a `docker` binary on PATH says nothing about an engine behind it. The ask
//! is plain HTTP/1.0 over the socket, so a CLI built without the services' libraries can make
//! it too.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Duration;

/// Where an engine listens when `DOCKER_HOST` is not set.
pub const DEFAULT_SOCKET: &str = "/var/run/docker.sock";

/// How long the ping may take, connection included.
pub const PING_WITHIN: Duration = Duration::from_secs(3);

/// Where the engine is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A Unix socket.
    Unix(PathBuf),
    /// `host:port`, plain HTTP.
    Tcp(String),
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Unix(path) => write!(f, "unix://{}", path.display()),
            Endpoint::Tcp(addr) => write!(f, "tcp://{addr}"),
        }
    }
}

/// The endpoint `DOCKER_HOST` names (its value, when set and not empty), or why l3m cannot use it.
pub fn endpoint(docker_host: Option<&str>) -> Result<Endpoint, String> {
    let Some(host) = docker_host.filter(|h| !h.is_empty()) else {
        return Ok(Endpoint::Unix(PathBuf::from(DEFAULT_SOCKET)));
    };
    if let Some(path) = host.strip_prefix("unix://") {
        return Ok(Endpoint::Unix(PathBuf::from(path)));
    }
    for scheme in ["tcp://", "http://"] {
        if let Some(addr) = host.strip_prefix(scheme) {
            return Ok(Endpoint::Tcp(addr.trim_end_matches('/').to_owned()));
        }
    }
    Err(format!(
        "DOCKER_HOST={host}: l3m reaches an engine over unix:// or tcp:// only"
    ))
}

/// Whether `response` is an engine's answer to a ping: status 200.
pub fn answered(response: &[u8]) -> bool {
    let text = String::from_utf8_lossy(response);
    let status = text.lines().next().unwrap_or("");
    let mut parts = status.split_whitespace();
    parts.next().is_some_and(|v| v.starts_with("HTTP/1.")) && parts.next() == Some("200")
}

/// Sends the ping over `stream` and reads the answer.
fn ask(mut stream: impl Read + Write) -> std::io::Result<Vec<u8>> {
    stream.write_all(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")?;
    let mut response = Vec::new();
    stream.take(4096).read_to_end(&mut response)?;
    Ok(response)
}

/// Pings the engine the environment names; `Err` says, in one line, why none answers.
pub fn ping() -> Result<(), String> {
    let host = std::env::var("DOCKER_HOST").ok();
    ping_at(&endpoint(host.as_deref())?)
}

/// Pings the engine at `endpoint`.
pub fn ping_at(endpoint: &Endpoint) -> Result<(), String> {
    let response = match endpoint {
        Endpoint::Unix(path) => std::os::unix::net::UnixStream::connect(path)
            .and_then(|s| {
                s.set_read_timeout(Some(PING_WITHIN))?;
                s.set_write_timeout(Some(PING_WITHIN))?;
                ask(s)
            })
            .map_err(|e| format!("no Docker engine answers at {endpoint}: {e}"))?,
        Endpoint::Tcp(addr) => {
            let connect = || -> std::io::Result<Vec<u8>> {
                let socket = std::net::ToSocketAddrs::to_socket_addrs(addr)?
                    .next()
                    .ok_or_else(|| std::io::Error::other("the name has no address"))?;
                let s = std::net::TcpStream::connect_timeout(&socket, PING_WITHIN)?;
                s.set_read_timeout(Some(PING_WITHIN))?;
                s.set_write_timeout(Some(PING_WITHIN))?;
                ask(s)
            };
            connect().map_err(|e| format!("no Docker engine answers at {endpoint}: {e}"))?
        }
    };
    if answered(&response) {
        Ok(())
    } else {
        Err(format!(
            "what answers at {endpoint} is not a Docker engine (its ping did not return 200)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_host_names_a_socket_or_a_tcp_address() {
        let unix = |p: &str| Ok(Endpoint::Unix(PathBuf::from(p)));
        assert_eq!(endpoint(None), unix(DEFAULT_SOCKET));
        assert_eq!(endpoint(Some("")), unix(DEFAULT_SOCKET));
        assert_eq!(endpoint(Some("unix:///run/d.sock")), unix("/run/d.sock"));
        assert_eq!(
            endpoint(Some("tcp://10.0.0.1:2375")),
            Ok(Endpoint::Tcp("10.0.0.1:2375".into()))
        );
        assert!(
            endpoint(Some("ssh://me@host"))
                .unwrap_err()
                .contains("ssh://")
        );
    }

    #[test]
    fn only_a_200_is_an_answer() {
        assert!(answered(b"HTTP/1.0 200 OK\r\nApi-Version: 1.41\r\n\r\nOK"));
        assert!(answered(b"HTTP/1.1 200 OK\r\n\r\nOK"));
        assert!(!answered(b"HTTP/1.1 404 Not Found\r\n\r\n"));
        assert!(!answered(b"SSH-2.0-OpenSSH_9.2\r\n"));
        assert!(!answered(b""));
    }

    /// A one-shot server on a socket in `dir` that answers `reply` to whatever it is sent.
    fn serve(dir: &std::path::Path, reply: &'static [u8]) -> Endpoint {
        let path = dir.join("engine.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut request = [0u8; 256];
            let _ = s.read(&mut request);
            s.write_all(reply).unwrap();
        });
        Endpoint::Unix(path)
    }

    #[test]
    fn an_engine_answers_and_a_stranger_or_nobody_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let engine = serve(dir.path(), b"HTTP/1.0 200 OK\r\n\r\nOK");
        assert_eq!(ping_at(&engine), Ok(()));
        let other = tempfile::tempdir().unwrap();
        let stranger = serve(other.path(), b"SSH-2.0-OpenSSH_9.2\r\n");
        assert!(
            ping_at(&stranger)
                .unwrap_err()
                .contains("not a Docker engine")
        );
        let nobody = Endpoint::Unix(dir.path().join("none.sock"));
        assert!(ping_at(&nobody).unwrap_err().contains("none.sock"));
    }
}
