//! Red team for the HTTP provider: each trick to reach a host the token does not list, and each
//! limit, is refused by its named boundary, and the outside server sees nothing.

use crate::net_server;

use l3m_ring::net::{FetchRequest, NetError, fetch};
use net_server::{Server, response, token};

/// The outside: a server on 127.0.0.2, which no test token lists.
fn outside() -> Server {
    Server::ok("127.0.0.2", b"outside secret")
}

#[tokio::test]
async fn net_boundary_unlisted_host() {
    let out = outside();
    let t = token(&["localhost".into()]);
    let err = fetch(
        &t,
        &FetchRequest::get(format!("http://127.0.0.2:{}/", out.port)),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, NetError::HostNotListed { ref host, .. } if host == "127.0.0.2"),
        "{err}"
    );
    assert!(out.seen().is_empty());
}

#[tokio::test]
async fn net_boundary_redirect_to_unlisted_host() {
    let out = outside();
    let location = format!("http://127.0.0.2:{}/", out.port);
    let allowed = Server::start("127.0.0.1", move |_| {
        response("302 Found", &[("Location", location.as_str())], b"")
    });
    let t = token(&[format!("localhost:{}", allowed.port)]);
    let err = fetch(
        &t,
        &FetchRequest::get(format!("http://localhost:{}/", allowed.port)),
    )
    .await
    .unwrap_err();
    match &err {
        NetError::Redirect { to, reason, .. } => {
            assert!(to.contains("127.0.0.2"), "{err}");
            assert!(
                matches!(**reason, NetError::HostNotListed { ref host, .. } if host == "127.0.0.2")
            );
        }
        other => panic!("expected a redirect refusal, got {other}"),
    }
    assert_eq!(allowed.seen().len(), 1);
    assert!(out.seen().is_empty());
}

#[tokio::test]
async fn net_boundary_ip_literal_for_listed_name() {
    let server = Server::ok("127.0.0.1", b"x");
    let t = token(&[format!("localhost:{}", server.port)]);
    let err = fetch(
        &t,
        &FetchRequest::get(format!("http://127.0.0.1:{}/", server.port)),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, NetError::HostNotListed { ref host, .. } if host == "127.0.0.1"),
        "{err}"
    );
    // Another spelling of the same literal is the same literal.
    let err = fetch(
        &t,
        &FetchRequest::get(format!("http://2130706433:{}/", server.port)),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, NetError::HostNotListed { ref host, .. } if host == "127.0.0.1"),
        "{err}"
    );
    assert!(server.seen().is_empty());
}

#[tokio::test]
async fn net_boundary_trailing_dot() {
    let server = Server::ok("127.0.0.1", b"x");
    let t = token(&[format!("localhost:{}", server.port)]);
    let err = fetch(
        &t,
        &FetchRequest::get(format!("http://localhost.:{}/", server.port)),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, NetError::TrailingDot { ref host, .. } if host == "localhost."),
        "{err}"
    );
    assert!(server.seen().is_empty());
}

#[tokio::test]
async fn net_boundary_userinfo_trick() {
    let out = outside();
    let t = token(&["allowed.example".into(), format!("localhost:{}", out.port)]);
    for url in [
        format!("http://allowed.example@127.0.0.2:{}/", out.port),
        format!("http://localhost:{}@127.0.0.2:{}/", out.port, out.port),
    ] {
        let err = fetch(&t, &FetchRequest::get(&url)).await.unwrap_err();
        assert!(matches!(err, NetError::Userinfo { .. }), "{url}: {err}");
    }
    assert!(out.seen().is_empty());
}

#[tokio::test]
async fn net_boundary_mixed_case() {
    let server = Server::ok("127.0.0.1", b"same host");
    let out = outside();
    let t = token(&[format!("localhost:{}", server.port)]);
    let got = fetch(
        &t,
        &FetchRequest::get(format!("http://LocalHOST:{}/", server.port)),
    )
    .await
    .unwrap();
    assert_eq!(got.body, b"same host");
    let err = fetch(
        &t,
        &FetchRequest::get(format!("http://LOCALHOST.evil:{}/", out.port)),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, NetError::HostNotListed { ref host, .. } if host == "localhost.evil"),
        "{err}"
    );
    assert!(out.seen().is_empty());
}

#[tokio::test]
async fn net_boundary_scheme_other_than_http() {
    let server = Server::ok("127.0.0.1", b"x");
    let t = token(&[format!("localhost:{}", server.port)]);
    for url in [
        "file:///etc/passwd".to_string(),
        format!("ftp://localhost:{}/", server.port),
        format!("ws://localhost:{}/", server.port),
    ] {
        let err = fetch(&t, &FetchRequest::get(&url)).await.unwrap_err();
        assert!(matches!(err, NetError::Scheme { .. }), "{url}: {err}");
    }
    assert!(server.seen().is_empty());
}

#[tokio::test]
async fn net_boundary_port_not_listed() {
    let server = Server::ok("127.0.0.1", b"x");
    let t = token(&["localhost".into()]);
    let err = fetch(
        &t,
        &FetchRequest::get(format!("http://localhost:{}/", server.port)),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, NetError::HostNotListed { port: Some(p), .. } if p == server.port),
        "{err}"
    );
    assert!(server.seen().is_empty());
}

#[tokio::test]
async fn net_boundary_oversized_body_with_length() {
    let server = Server::ok("127.0.0.1", &[b'x'; 4096]);
    let t = token(&[format!("localhost:{}", server.port)]);
    let request = FetchRequest {
        max_bytes: 1000,
        ..FetchRequest::get(format!("http://localhost:{}/", server.port))
    };
    let err = fetch(&t, &request).await.unwrap_err();
    assert!(
        matches!(err, NetError::BodyTooLarge { limit: 1000, .. }),
        "{err}"
    );
}

#[tokio::test]
async fn net_boundary_oversized_body_streamed_without_length() {
    // No Content-Length: the body ends when the server closes, so only the streaming limit
    // stops it. The server offers 8 MiB; the limit is 64 KiB.
    let server = Server::start("127.0.0.1", |_| {
        let mut out = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_vec();
        out.extend(std::iter::repeat_n(b'y', 8 << 20));
        out
    });
    let t = token(&[format!("localhost:{}", server.port)]);
    let request = FetchRequest {
        max_bytes: 64 << 10,
        ..FetchRequest::get(format!("http://localhost:{}/", server.port))
    };
    let err = fetch(&t, &request).await.unwrap_err();
    assert!(
        matches!(err, NetError::BodyTooLarge { limit, .. } if limit == 64 << 10),
        "{err}"
    );
}
