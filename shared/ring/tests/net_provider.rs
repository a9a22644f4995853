//! The HTTP provider does its job for listed hosts: real HTTP against a loopback server.

use l3m_ring::test_support::net_server;

use l3m_ring::net::{FetchMethod, FetchRequest, NetError, fetch};
use net_server::{Server, response, token};

#[tokio::test]
async fn fetches_the_body_status_and_headers_from_a_listed_host() {
    let server = Server::start("127.0.0.1", |_| {
        response("200 OK", &[("X-Kind", "note")], b"hello")
    });
    let t = token(&[format!("localhost:{}", server.port)]);
    let url = format!("http://localhost:{}/page", server.port);
    let got = fetch(&t, &FetchRequest::get(&url)).await.unwrap();
    assert_eq!((got.status, got.body.as_slice()), (200, &b"hello"[..]));
    assert_eq!(got.final_url, url);
    assert!(got.headers.contains(&("x-kind".into(), "note".into())));
    assert!(server.seen()[0].starts_with("GET /page HTTP/1.1"));
}

#[tokio::test]
async fn head_sends_head_and_allowlisted_headers() {
    let server = Server::start("127.0.0.1", |_| response("204 No Content", &[], b""));
    let t = token(&[format!("localhost:{}", server.port)]);
    let request = FetchRequest {
        method: FetchMethod::Head,
        headers: vec![("Accept".into(), "text/plain".into())],
        ..FetchRequest::get(format!("http://localhost:{}/", server.port))
    };
    let got = fetch(&t, &request).await.unwrap();
    assert_eq!(got.status, 204);
    assert!(got.body.is_empty());
    let head = &server.seen()[0];
    assert!(head.starts_with("HEAD / HTTP/1.1"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("accept: text/plain"),
        "{head}"
    );
}

#[tokio::test]
async fn follows_a_redirect_to_a_listed_host() {
    let target = Server::ok("127.0.0.1", b"moved here");
    let location = format!("http://localhost:{}/new", target.port);
    let source = Server::start("127.0.0.1", move |_| {
        response("302 Found", &[("Location", location.as_str())], b"")
    });
    let t = token(&[
        format!("localhost:{}", source.port),
        format!("localhost:{}", target.port),
    ]);
    let url = format!("http://localhost:{}/old", source.port);
    let got = fetch(&t, &FetchRequest::get(url)).await.unwrap();
    assert_eq!(got.body, b"moved here");
    assert_eq!(
        got.final_url,
        format!("http://localhost:{}/new", target.port)
    );
    assert_eq!(target.seen().len(), 1);
}

#[tokio::test]
async fn a_disallowed_header_is_refused_before_anything_is_sent() {
    let server = Server::ok("127.0.0.1", b"x");
    let t = token(&[format!("localhost:{}", server.port)]);
    let request = FetchRequest {
        headers: vec![("Host".into(), "elsewhere.example".into())],
        ..FetchRequest::get(format!("http://localhost:{}/", server.port))
    };
    let err = fetch(&t, &request).await.unwrap_err();
    assert!(
        matches!(err, NetError::Header { ref name, .. } if name == "Host"),
        "{err}"
    );
    assert!(server.seen().is_empty());
}
