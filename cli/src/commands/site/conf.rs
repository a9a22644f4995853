//! The pure half of `l3m site init`: what a node is called and where it listens, and the
//! nats-server configuration each node gets. No IO here, so the rendering is tested as text.

use std::fmt;

/// The default port clients connect to.
pub const CLIENT_PORT: u16 = 4222;
/// The default port the cluster's routes use.
pub const ROUTE_PORT: u16 = 6222;
/// The default port of the monitoring endpoint (bound to loopback only).
pub const MONITOR_PORT: u16 = 8222;

/// The cluster's name in every node's `cluster` block.
pub const CLUSTER: &str = "l3m";

/// One NATS node of the site, as `--node NAME=HOST[:CLIENT[:ROUTE[:MONITOR]]]` gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// The node's name: its folder, its `server_name`.
    pub name: String,
    /// The host name or IP address the other hosts reach it at; its certificate names it.
    pub host: String,
    /// Where clients connect.
    pub client_port: u16,
    /// Where the other nodes' routes connect.
    pub route_port: u16,
    /// The monitoring endpoint's port on the node's loopback (`/healthz`, `/connz`).
    pub monitor_port: u16,
}

/// Why a `--node` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeError {
    /// Not `NAME=HOST…`.
    #[error("`{0}` is not NAME=HOST[:CLIENT_PORT[:ROUTE_PORT[:MONITOR_PORT]]] (e.g. a=10.0.0.1)")]
    Shape(String),
    /// A name that cannot be a folder and a server name.
    #[error("node name `{0}` must be 1 to 32 of a-z, 0-9 and -")]
    Name(String),
    /// A host a certificate cannot name.
    #[error("node host `{0}` must be a DNS name or an IP address")]
    Host(String),
    /// A port that is not one.
    #[error("`{0}` is not a port (1 to 65535)")]
    Port(String),
    /// Two nodes with one name, or one port used twice on one host.
    #[error("{0}")]
    Clash(String),
}

impl Node {
    /// Parses one `--node` value.
    pub fn parse(text: &str) -> Result<Node, NodeError> {
        let (name, rest) = text
            .split_once('=')
            .ok_or_else(|| NodeError::Shape(text.to_owned()))?;
        let valid_name = !name.is_empty()
            && name.len() <= 32
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !valid_name {
            return Err(NodeError::Name(name.to_owned()));
        }
        let mut parts = rest.split(':');
        let host = parts.next().unwrap_or_default();
        let valid_host = !host.is_empty()
            && host.len() <= 253
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
        if !valid_host {
            return Err(NodeError::Host(host.to_owned()));
        }
        let mut port = |default: u16| -> Result<u16, NodeError> {
            match parts.next() {
                None => Ok(default),
                Some(p) => p
                    .parse::<u16>()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| NodeError::Port(p.to_owned())),
            }
        };
        let node = Node {
            name: name.to_owned(),
            host: host.to_owned(),
            client_port: port(CLIENT_PORT)?,
            route_port: port(ROUTE_PORT)?,
            monitor_port: port(MONITOR_PORT)?,
        };
        if parts.next().is_some() {
            return Err(NodeError::Shape(text.to_owned()));
        }
        Ok(node)
    }

    /// The URL clients give for this node.
    pub fn client_url(&self) -> String {
        format!("tls://{}:{}", self.host, self.client_port)
    }

    /// The names its certificate holds: its host, and loopback for processes on its own host.
    pub fn certificate_names(&self) -> Vec<String> {
        let mut names = vec![self.host.clone()];
        for local in ["localhost", "127.0.0.1"] {
            if self.host != local {
                names.push(local.to_owned());
            }
        }
        names
    }
}

/// Refuses a layout with two nodes of one name or a port used twice on one host.
pub fn check_layout(nodes: &[Node]) -> Result<(), NodeError> {
    if nodes.is_empty() {
        return Err(NodeError::Clash("a site needs at least one --node".into()));
    }
    let mut names = std::collections::BTreeSet::new();
    let mut ports = std::collections::BTreeSet::new();
    for node in nodes {
        if !names.insert(&node.name) {
            return Err(NodeError::Clash(format!(
                "two nodes are named `{}`",
                node.name
            )));
        }
        for port in [node.client_port, node.route_port, node.monitor_port] {
            if !ports.insert((&node.host, port)) {
                return Err(NodeError::Clash(format!(
                    "port {port} on {} is used twice",
                    node.host
                )));
            }
        }
    }
    Ok(())
}

/// Where a node's files live on its host, as its configuration names them.
pub struct Files<'a> {
    /// The node's folder on its host (holding `server.pem`, `server.key`, `ca.pem`).
    pub dir: &'a str,
}

impl Files<'_> {
    fn path(&self, file: &str) -> Quoted {
        Quoted(format!("{}/{file}", self.dir.trim_end_matches('/')))
    }
}

/// A string in nats-server's configuration syntax (JSON-style quotes).
struct Quoted(String);

impl fmt::Display for Quoted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// The nats-server configuration of `node` in a site of `nodes`: clients over TLS with the
/// site's certificate, routes to every other node over mutual TLS (each side shows a
/// certificate the site's CA signed), monitoring on loopback, and `permissions` (deploy/
/// nats.conf's users, passwords from the server's environment).
pub fn node_config(node: &Node, nodes: &[Node], files: &Files<'_>, permissions: &str) -> String {
    let (cert, key, ca) = (
        files.path("server.pem"),
        files.path("server.key"),
        files.path("ca.pem"),
    );
    let routes: Vec<String> = nodes
        .iter()
        .filter(|n| n.name != node.name)
        .map(|n| {
            format!(
                "    {:?}",
                format!("nats-route://{}:{}", n.host, n.route_port)
            )
        })
        .collect();
    format!(
        "# written by `l3m site init` for node {name} of a {count}-node site; see docs/operators.md
server_name: {name:?}
listen: \"0.0.0.0:{client}\"
http: \"127.0.0.1:{monitor}\"

# Clients: TLS only, with the site's certificate; nothing is accepted in clear.
tls {{
  cert_file: {cert}
  key_file: {key}
  ca_file: {ca}
  timeout: 5
}}

# Routes: mutual TLS, each node showing a certificate the site's CA signed.
cluster {{
  name: {CLUSTER}
  listen: \"0.0.0.0:{route}\"
  no_advertise: true
  routes: [
{routes}
  ]
  tls {{
    cert_file: {cert}
    key_file: {key}
    ca_file: {ca}
    verify: true
    timeout: 5
  }}
}}

{permissions}",
        name = node.name,
        count = nodes.len(),
        client = node.client_port,
        monitor = node.monitor_port,
        route = node.route_port,
        routes = routes.join(",\n"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three() -> Vec<Node> {
        ["a=10.0.0.1", "b=10.0.0.2", "c=hub-c.example:5222:7222:9222"]
            .iter()
            .map(|t| Node::parse(t).unwrap())
            .collect()
    }

    #[test]
    fn a_node_parses_with_default_or_given_ports() {
        let nodes = three();
        assert_eq!(nodes[0].client_port, CLIENT_PORT);
        assert_eq!(nodes[0].route_port, ROUTE_PORT);
        assert_eq!(nodes[2].host, "hub-c.example");
        assert_eq!(
            (
                nodes[2].client_port,
                nodes[2].route_port,
                nodes[2].monitor_port
            ),
            (5222, 7222, 9222)
        );
        assert_eq!(nodes[2].client_url(), "tls://hub-c.example:5222");
    }

    #[test]
    fn bad_nodes_are_refused_naming_what_is_wrong() {
        for (text, want) in [
            ("a", NodeError::Shape("a".into())),
            ("A=h", NodeError::Name("A".into())),
            ("../x=h", NodeError::Name("../x".into())),
            ("a=", NodeError::Host(String::new())),
            ("a=h\"x", NodeError::Host("h\"x".into())),
            ("a=h:0", NodeError::Port("0".into())),
            ("a=h:70000", NodeError::Port("70000".into())),
            ("a=h:1:2:3:4", NodeError::Shape("a=h:1:2:3:4".into())),
        ] {
            assert_eq!(Node::parse(text), Err(want), "{text}");
        }
        let twice = [Node::parse("a=h").unwrap(), Node::parse("a=g").unwrap()];
        assert!(matches!(check_layout(&twice), Err(NodeError::Clash(_))));
        let same_port = [
            Node::parse("a=h:1:2:3").unwrap(),
            Node::parse("b=h:3:4:5").unwrap(),
        ];
        assert!(matches!(check_layout(&same_port), Err(NodeError::Clash(_))));
        assert!(check_layout(&[]).is_err());
        assert!(check_layout(&three()).is_ok());
    }

    #[test]
    fn each_node_routes_to_the_others_over_mutual_tls_and_serves_clients_over_tls() {
        let nodes = three();
        let text = node_config(
            &nodes[0],
            &nodes,
            &Files {
                dir: "/etc/l3m/nats/",
            },
            "authorization {}",
        );
        assert!(text.contains("server_name: \"a\""));
        assert!(text.contains("\"nats-route://10.0.0.2:6222\""));
        assert!(text.contains("\"nats-route://hub-c.example:7222\""));
        assert!(
            !text.contains("nats-route://10.0.0.1"),
            "no route to itself"
        );
        assert!(text.contains("cert_file: \"/etc/l3m/nats/server.pem\""));
        assert_eq!(text.matches("tls {").count(), 2, "clients and routes");
        assert_eq!(text.matches("verify: true").count(), 1, "routes verify");
        assert!(text.contains("http: \"127.0.0.1:8222\""));
        assert!(text.ends_with("authorization {}"));
    }
}
