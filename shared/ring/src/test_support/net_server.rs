//! A tiny real HTTP/1.1 server on a loopback address for the HTTP provider's tests: it records
//! every request head it receives, so a test can prove a refused fetch reached nothing.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use crate::tokens::{MintInput, NetToken, mint};

/// A server answering every request with what its handler returns for the request head.
pub struct Server {
    /// The port it listens on.
    pub port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Starts a server on `ip` (e.g. `127.0.0.2`) answering with `handler(request head)`.
    pub fn start(ip: &str, handler: impl Fn(&str) -> Vec<u8> + Send + 'static) -> Self {
        let listener = TcpListener::bind((ip, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                log.lock().unwrap().push(head.clone());
                // The client may hang up early (a refused body): that is the point, not an error.
                let _ = stream.write_all(&handler(&head));
            }
        });
        Self { port, seen }
    }

    /// A server answering `200` with `body` and a `Content-Length`.
    pub fn ok(ip: &str, body: &'static [u8]) -> Self {
        Self::start(ip, move |_| response("200 OK", &[], body))
    }

    /// The request heads received so far.
    pub fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// An HTTP/1.1 response with a `Content-Length`, closing the connection.
pub fn response(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}

/// A net token reaching exactly `hosts`.
pub fn token(hosts: &[String]) -> NetToken {
    let input = MintInput {
        net: Some(hosts.to_vec()),
        ..MintInput::default()
    };
    mint(&input, crate::ambient_authority())
        .unwrap()
        .net
        .unwrap()
}
