//! The fetch stage's only way out: an internal Docker network and an allowlisting proxy.
//!
//! A fetch stage's network is enforced, not requested. The builder makes an *internal* network
//! (no route off it), and listens on that network's gateway address with a forward proxy that
//! admits only the hosts the stage's plan lists (each a grant host pattern). The container is
//! told the proxy through `http_proxy`/`https_proxy`; anything else it tries has nowhere to go.
//! The proxy speaks plain HTTP/1 forwarding (`GET http://host/path`) and `CONNECT host:port`
//! tunnels, and refuses an unlisted host with `403` naming it, and a listed one whose DNS
//! answer is local (loopback, private, link-local: the builder's own services) unless the
//! operator mapped it with `--resolve`.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use bollard::models::NetworkCreateRequest;
use l3m_containers::{Driver, LABEL_OWNER, LABEL_SITE};
use l3m_core::grant::HostPattern;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// The longest request head the proxy reads before refusing.
const MAX_HEAD: usize = 16 << 10;

/// What went wrong opening the fetch network.
#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    /// The engine refused to make or describe the network.
    #[error("fetch network: {op}: {source}")]
    Engine {
        /// What was being done.
        op: &'static str,
        /// The engine's answer.
        #[source]
        source: bollard::errors::Error,
    },
    /// The network has no gateway address to listen on.
    #[error("fetch network {name} has no IPv4 gateway")]
    NoGateway {
        /// The network.
        name: String,
    },
    /// Listening on the gateway failed.
    #[error("fetch proxy: listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// The OS's answer.
        #[source]
        source: std::io::Error,
    },
}

/// A request head the proxy understood: where it wants to go and what to send there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forward {
    /// The host asked for (no port).
    pub host: String,
    /// The port asked for.
    pub port: u16,
    /// `None` for a CONNECT tunnel; otherwise the head to send upstream, in origin form.
    pub head: Option<Vec<u8>>,
}

/// Why a head was not forwarded; the text goes back in the 4xx body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    /// Not an HTTP/1 request line with an absolute `http://` target or a CONNECT authority.
    #[error("not a proxy request: {0}")]
    Malformed(String),
}

/// Parses a proxy request head (everything up to and including the blank line).
pub fn parse_head(head: &[u8]) -> Result<Forward, HeadError> {
    let text =
        std::str::from_utf8(head).map_err(|_| HeadError::Malformed("head is not UTF-8".into()))?;
    let (line, rest) = text
        .split_once("\r\n")
        .ok_or_else(|| HeadError::Malformed("no request line".into()))?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HeadError::Malformed(format!("request line {line:?}")));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(HeadError::Malformed(format!("version {version:?}")));
    }
    if method == "CONNECT" {
        let (host, port) = split_authority(target, 443)?;
        return Ok(Forward {
            host,
            port,
            head: None,
        });
    }
    let after = target.strip_prefix("http://").ok_or_else(|| {
        HeadError::Malformed(format!("target {target:?} is not an absolute http:// URL"))
    })?;
    let (authority, path) = match after.find('/') {
        Some(i) => (&after[..i], &after[i..]),
        None => (after, "/"),
    };
    let (host, port) = split_authority(authority, 80)?;
    let head = format!("{method} {path} {version}\r\n{rest}").into_bytes();
    Ok(Forward {
        host,
        port,
        head: Some(head),
    })
}

fn split_authority(authority: &str, default_port: u16) -> Result<(String, u16), HeadError> {
    let bad = || HeadError::Malformed(format!("authority {authority:?}"));
    if authority.contains('@') || authority.is_empty() {
        return Err(bad());
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, p.parse().map_err(|_| bad())?),
        None => (authority, default_port),
    };
    if host.is_empty()
        || !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
    {
        return Err(bad());
    }
    Ok((host.to_ascii_lowercase(), port))
}

/// The open fetch network and its proxy; [`Egress::close`] removes both.
#[derive(Debug)]
pub struct Egress {
    /// The internal network's name, for the fetch container's `network_mode`.
    pub network: String,
    /// `host:port` of the proxy, as the container reaches it.
    pub proxy: SocketAddr,
    stop: CancellationToken,
}

impl Egress {
    /// Makes an internal network labelled for this builder, and serves the proxy on its gateway
    /// for `hosts`. `resolve` maps a host name to an address, before DNS (an air-gapped mirror,
    /// a test's package server).
    pub async fn open(
        driver: &Driver,
        stage: &str,
        hosts: Vec<HostPattern>,
        resolve: Arc<HashMap<String, SocketAddr>>,
    ) -> Result<Egress, EgressError> {
        let who = driver.identity();
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let raw = format!("l3m-fetch-{}-{stage}-{}-{n}", who.site, std::process::id());
        let network: String = raw
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let request = NetworkCreateRequest {
            name: network.clone(),
            internal: Some(true),
            labels: Some(HashMap::from([
                (LABEL_OWNER.to_owned(), who.owner.to_string()),
                (LABEL_SITE.to_owned(), who.site.clone()),
            ])),
            ..Default::default()
        };
        let engine = |op| move |source| EgressError::Engine { op, source };
        driver
            .docker()
            .create_network(request)
            .await
            .map_err(engine("create"))?;
        let info = driver
            .docker()
            .inspect_network(
                &network,
                None::<bollard::query_parameters::InspectNetworkOptions>,
            )
            .await
            .map_err(engine("inspect"))?;
        let gateway: Option<IpAddr> = info
            .ipam
            .and_then(|i| i.config)
            .into_iter()
            .flatten()
            .find_map(|c| c.gateway.and_then(|g| g.parse().ok()));
        let Some(gateway) = gateway else {
            let _ = driver.docker().remove_network(&network).await;
            return Err(EgressError::NoGateway { name: network });
        };
        let listener = match TcpListener::bind((gateway, 0)).await {
            Ok(l) => l,
            Err(source) => {
                let _ = driver.docker().remove_network(&network).await;
                return Err(EgressError::Listen {
                    addr: gateway.to_string(),
                    source,
                });
            }
        };
        let proxy = listener
            .local_addr()
            .map_err(|source| EgressError::Listen {
                addr: gateway.to_string(),
                source,
            })?;
        let stop = CancellationToken::new();
        tokio::spawn(serve(listener, Arc::new(hosts), resolve, stop.clone()));
        Ok(Egress {
            network,
            proxy,
            stop,
        })
    }

    /// The environment a fetch container gets so its tools use the proxy.
    pub fn env(&self) -> Vec<String> {
        let url = format!("http://{}", self.proxy);
        vec![
            format!("http_proxy={url}"),
            format!("https_proxy={url}"),
            format!("HTTP_PROXY={url}"),
            format!("HTTPS_PROXY={url}"),
            format!("L3M_PROXY_HOST={}", self.proxy.ip()),
            format!("L3M_PROXY_PORT={}", self.proxy.port()),
        ]
    }

    /// Stops the proxy and removes the network.
    pub async fn close(self, driver: &Driver) -> Result<(), EgressError> {
        self.stop.cancel();
        driver
            .docker()
            .remove_network(&self.network)
            .await
            .map_err(|source| EgressError::Engine {
                op: "remove",
                source,
            })
    }
}

async fn serve(
    listener: TcpListener,
    hosts: Arc<Vec<HostPattern>>,
    resolve: Arc<HashMap<String, SocketAddr>>,
    stop: CancellationToken,
) {
    loop {
        let conn = tokio::select! {
            () = stop.cancelled() => return,
            conn = listener.accept() => conn,
        };
        let Ok((client, _)) = conn else { continue };
        let (hosts, resolve, stop) = (Arc::clone(&hosts), Arc::clone(&resolve), stop.clone());
        tokio::spawn(async move {
            tokio::select! {
                () = stop.cancelled() => {}
                r = relay(client, &hosts, &resolve) => if let Err(e) = r {
                    tracing::debug!(error = %e, "fetch proxy connection ended");
                },
            }
        });
    }
}

async fn relay(
    mut client: TcpStream,
    hosts: &[HostPattern],
    resolve: &HashMap<String, SocketAddr>,
) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > MAX_HEAD {
            return refuse(&mut client, 431, "request head too large").await;
        }
        let mut chunk = [0u8; 2048];
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let forward = match parse_head(&buf[..head_end]) {
        Ok(f) => f,
        Err(e) => return refuse(&mut client, 400, &e.to_string()).await,
    };
    if !hosts.iter().any(|p| p.matches(&forward.host)) {
        tracing::info!(host = %forward.host, "fetch proxy refused an unlisted host");
        let why = format!(
            "l3m: host {} is not in this fetch stage's grant",
            forward.host
        );
        return refuse(&mut client, 403, &why).await;
    }
    let target = match resolve.get(&forward.host) {
        Some(addr) => *addr,
        None => match tokio::net::lookup_host((forward.host.as_str(), forward.port))
            .await?
            .next()
        {
            Some(addr) if is_local(addr.ip()) => {
                let why = format!(
                    "l3m: {} resolves to a local address {}; map a mirror with --resolve",
                    forward.host,
                    addr.ip()
                );
                return refuse(&mut client, 403, &why).await;
            }
            Some(addr) => addr,
            None => return refuse(&mut client, 502, "host does not resolve").await,
        },
    };
    let mut upstream = match TcpStream::connect(target).await {
        Ok(s) => s,
        Err(e) => return refuse(&mut client, 502, &format!("upstream: {e}")).await,
    };
    match &forward.head {
        None => {
            client
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await?
        }
        Some(head) => upstream.write_all(head).await?,
    }
    upstream.write_all(&buf[head_end..]).await?;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

/// Whether DNS sent a listed name to this host or its neighbours (loopback, link-local,
/// private, unspecified): the way a listed name could reach the builder's own services.
pub fn is_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| is_local(IpAddr::V4(v4)))
        }
    }
}

async fn refuse(client: &mut TcpStream, status: u16, why: &str) -> std::io::Result<()> {
    let reply = format!(
        "HTTP/1.1 {status} Refused\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{why}\n",
        why.len() + 1
    );
    client.write_all(reply.as_bytes()).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn absolute_targets_are_rewritten_to_origin_form() {
        let f = parse_head(b"GET http://Pkgs.Test:8080/a/b?c HTTP/1.1\r\nHost: pkgs.test\r\n\r\n")
            .unwrap();
        assert_eq!((f.host.as_str(), f.port), ("pkgs.test", 8080));
        assert_eq!(
            f.head.unwrap(),
            b"GET /a/b?c HTTP/1.1\r\nHost: pkgs.test\r\n\r\n"
        );
    }

    #[test]
    fn a_listed_name_that_resolves_here_or_nearby_is_local() {
        for local in [
            "127.0.0.1",
            "10.1.2.3",
            "172.17.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_local(local.parse().unwrap()), "{local}");
        }
        for public in ["151.101.2.132", "2a04:4e42::644"] {
            assert!(!is_local(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn connect_names_a_tunnel() {
        let f = parse_head(b"CONNECT crates.test:443 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(
            f,
            Forward {
                host: "crates.test".into(),
                port: 443,
                head: None
            }
        );
    }

    #[test]
    fn origin_form_userinfo_and_odd_hosts_are_refused() {
        for bad in [
            &b"GET /x HTTP/1.1\r\n\r\n"[..],
            b"GET http://user@pkgs.test/ HTTP/1.1\r\n\r\n",
            b"GET http://pkgs test/ HTTP/1.1\r\n\r\n",
            b"GET http://pkgs.test:99999/ HTTP/1.1\r\n\r\n",
            b"GET http://pkgs.test/ SPDY/3\r\n\r\n",
            b"\xff\xfe\r\n\r\n",
        ] {
            assert!(parse_head(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
