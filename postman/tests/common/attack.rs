//! Clients that are not honest offices, for the tests that check a postman refuses them and
//! outlives a flood of them: one with no certificate, one that takes any server, and half-open
//! connections that send their first flight and never another datagram.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use postman::link;
use tokio::net::UdpSocket;

/// Connects to `server` offering no certificate, says hello as north, and reads the answer:
/// `Ok` only if the server let such a client through to its answer.
pub async fn hello_without_certificate(
    server: std::net::SocketAddr,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let endpoint = no_certificate_client();
    let connection = endpoint.connect(server, "l3m-hub.invalid")?.await?;
    let (mut send, mut recv) = connection.open_bi().await?;
    let hello = postman::frame::Frame::Hello {
        office: "north".into(),
    };
    postman::frame::write(&mut send, &hello).await?;
    postman::frame::read(&mut recv).await?;
    Ok(())
}

/// A QUIC client endpoint on loopback that offers no certificate at all and takes any
/// server's: whatever fails when it connects is the server's refusal.
pub fn no_certificate_client() -> quinn::Endpoint {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServer))
        .with_no_client_auth();
    tls.alpn_protocols = vec![link::ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    endpoint
}

/// Sends `server` the first flight of `n` connections, each from its own socket, and never
/// answers: each costs the server a connection until its handshake times out. The sockets
/// are returned so the server's replies land somewhere silent while the caller keeps them.
pub async fn half_open(server: SocketAddr, n: usize) -> Vec<UdpSocket> {
    // A real client's Initial packets, caught on a socket of ours instead of sent to the server.
    let catch = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let to = catch.local_addr().unwrap();
    let client = no_certificate_client();
    let mut seen = HashSet::new();
    let mut sockets = Vec::new();
    let mut connecting = Vec::new();
    let mut buf = vec![0u8; 65_536];
    // A few at a time, so no first flight is lost in the catching socket's buffer.
    while sockets.len() < n {
        let batch = (n - sockets.len()).min(16);
        let want = sockets.len() + batch;
        connecting.extend((0..batch).map(|_| client.connect(to, "l3m-hub.invalid").unwrap()));
        while sockets.len() < want {
            let (len, _) = tokio::time::timeout(Duration::from_secs(10), catch.recv_from(&mut buf))
                .await
                .expect("the client sends its first flights")
                .unwrap();
            // A long header: flags, version (4 bytes), then the destination connection id's
            // length and bytes, which tell one connection's first flight from another's
            // retransmission.
            let Some(&dcid_len) = buf.get(5) else {
                continue;
            };
            let Some(dcid) = buf.get(6..6 + usize::from(dcid_len)) else {
                continue;
            };
            if buf[0] & 0x80 == 0 || !seen.insert(dcid.to_vec()) {
                continue;
            }
            let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            socket.send_to(&buf[..len], server).await.unwrap();
            sockets.push(socket);
        }
    }
    drop(connecting);
    client.close(0u32.into(), b"");
    sockets
}

/// Takes any server certificate (the test's client is the attacker, not the victim).
#[derive(Debug)]
pub struct AnyServer;

impl rustls::client::danger::ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}
