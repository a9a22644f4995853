//! A site whose NATS spans hosts, on loopback: `l3m site init` makes a CA, three nodes'
//! certificates and configurations; three real nats-servers form a cluster over mutual-TLS
//! routes; hubd and the CLI connect over TLS to different nodes. Killing hubd's node with
//! SIGKILL does not stop the hub: hubd moves to another node and the CLI's next writes land.
//! Nothing crosses in clear: a recorded client connection holds no password, subject or
//! agent name; a plaintext client, a client trusting another CA and a plaintext route are
//! refused.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test's own progress notes go to stderr directly (`cli/clippy.toml` denies it in the CLI).
#![allow(clippy::disallowed_macros)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Home;
use l3m_wire::bus::{NatsAuth, NatsBus, NatsTls};

/// A port free on loopback now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One node of the test's site: its name, ports, and its nats-server once started.
struct NodeProc {
    name: String,
    client: u16,
    route: u16,
    monitor: u16,
    child: Option<Child>,
}

impl NodeProc {
    fn spec(&self) -> String {
        format!(
            "{}=127.0.0.1:{}:{}:{}",
            self.name, self.client, self.route, self.monitor
        )
    }

    fn url(&self) -> String {
        format!("tls://127.0.0.1:{}", self.client)
    }

    /// GET `path` from the node's monitoring endpoint.
    fn monitor(&self, path: &str) -> Option<serde_json::Value> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.monitor)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
        let mut text = String::new();
        stream.read_to_string(&mut text).ok()?;
        let body = text.split_once("\r\n\r\n")?.1;
        serde_json::from_str(body).ok()
    }

    /// The users of the clients connected to this node now.
    fn users(&self) -> Vec<String> {
        let Some(connz) = self.monitor("/connz?auth=1") else {
            return Vec::new();
        };
        connz["connections"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["authorized_user"].as_str().map(str::to_owned))
            .collect()
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
}

/// The site: its folder, its nodes, and the passwords nats-server and the services read.
struct Site {
    dir: tempfile::TempDir,
    nodes: Vec<NodeProc>,
    passwords: Vec<(String, String)>,
}

impl Drop for Site {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            node.kill();
        }
    }
}

impl Site {
    /// `l3m site init` for three loopback nodes, then each node started and the routes
    /// awaited.
    fn start(home: &Home) -> Site {
        let dir = tempfile::tempdir().unwrap();
        let nodes: Vec<NodeProc> = ["a", "b", "c"]
            .into_iter()
            .map(|name| NodeProc {
                name: name.to_owned(),
                client: free_port(),
                route: free_port(),
                monitor: free_port(),
                child: None,
            })
            .collect();
        let out = dir.path().join("site");
        let mut init = home.l3m(&["site", "init", "--out", out.to_str().unwrap()]);
        for node in &nodes {
            init.args(["--node", &node.spec()]);
        }
        init.assert().success();
        let passwords = std::fs::read_to_string(out.join("passwords.env"))
            .unwrap()
            .lines()
            .map(|l| {
                let (k, v) = l.split_once('=').unwrap();
                (k.to_owned(), v.to_owned())
            })
            .collect();
        let mut site = Site {
            dir,
            nodes,
            passwords,
        };
        let server = ["/usr/sbin/nats-server", "nats-server"]
            .into_iter()
            .find(|p| Command::new(p).arg("--version").output().is_ok())
            .expect("nats-server (scripts/install-deps installs it)");
        for node in &mut site.nodes {
            let config = out.join(&node.name).join("nats.conf");
            let log = std::fs::File::create(out.join(format!("{}.log", node.name))).unwrap();
            node.child = Some(
                Command::new(server)
                    .arg("-c")
                    .arg(&config)
                    .envs(site.passwords.iter().cloned())
                    .stdout(Stdio::null())
                    .stderr(log)
                    .spawn()
                    .unwrap(),
            );
        }
        let begun = Instant::now();
        while !site.nodes.iter().all(|n| {
            n.monitor("/routez")
                .is_some_and(|r| r["num_routes"].as_u64() == Some(2))
        }) {
            assert!(
                begun.elapsed() < Duration::from_secs(30),
                "the three nodes did not route to each other: {}",
                site.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        site
    }

    fn out(&self) -> PathBuf {
        self.dir.path().join("site")
    }

    fn ca(&self) -> PathBuf {
        self.out().join("ca.pem")
    }

    fn password(&self, user: &str) -> String {
        let var = format!("{}_NATS_PASSWORD", user.to_uppercase());
        self.passwords
            .iter()
            .find(|(k, _)| *k == var)
            .unwrap()
            .1
            .clone()
    }

    fn logs(&self) -> String {
        self.nodes
            .iter()
            .map(|n| {
                let log = std::fs::read_to_string(self.out().join(format!("{}.log", n.name)));
                format!("== {}\n{}", n.name, log.unwrap_or_default())
            })
            .collect()
    }

    /// The node `user` is connected to, once it is connected to one.
    fn node_of(&self, user: &str) -> usize {
        let begun = Instant::now();
        loop {
            if let Some(i) = self
                .nodes
                .iter()
                .position(|n| n.child.is_some() && n.users().iter().any(|u| u == user))
            {
                return i;
            }
            assert!(
                begun.elapsed() < Duration::from_secs(30),
                "{user} is connected to no node"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Points the home's hub entry at `url` over TLS with the site's CA and its passwords file,
/// so the CLI connects as `cli` and each service `l3m up` starts as its own user.
fn point_cli_at(home: &Home, site: &Site, url: &str) {
    let path = home.path().join("l3m.toml");
    let mut doc: toml_edit::DocumentMut = std::fs::read_to_string(&path).unwrap().parse().unwrap();
    let hubs = doc["hubs"].as_table_mut().unwrap();
    let name = hubs.iter().next().unwrap().0.to_owned();
    let hub = hubs[&name].as_table_mut().unwrap();
    hub["nats"] = toml_edit::value(url);
    hub["nats_passwords"] = toml_edit::value(site.out().join("passwords.env").to_str().unwrap());
    hub["nats_ca"] = toml_edit::value(site.ca().to_str().unwrap());
    std::fs::write(&path, doc.to_string()).unwrap();
}

fn hub_id(home: &Home) -> String {
    let text = std::fs::read_to_string(home.path().join("l3m.toml")).unwrap();
    let doc: toml::Table = toml::from_str(&text).unwrap();
    let hubs = doc["hubs"].as_table().unwrap();
    hubs.values().next().unwrap()["hub_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// hubd, started on the whole cluster's URL list over TLS; killed on drop.
struct Hubd(Child);

impl Drop for Hubd {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_hubd(home: &Home, site: &Site) -> Hubd {
    common::build_services();
    let hubd = assert_cmd::cargo::cargo_bin("l3m").with_file_name("hubd");
    let urls: Vec<String> = site.nodes.iter().map(NodeProc::url).collect();
    let child = Command::new(hubd)
        .args(["serve", "--hub"])
        .arg(home.hub_root())
        .args(["--hub-id", &hub_id(home), "--nats", &urls.join(",")])
        .args([
            "--nats-user",
            "hubd",
            "--nats-password-env",
            "HUBD_NATS_PASSWORD",
        ])
        .arg("--nats-ca")
        .arg(site.ca())
        .args(["--durability", "relaxed"])
        .env("HUBD_NATS_PASSWORD", site.password("hubd"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Hubd(child)
}

/// `l3m ARGS`, retried while the stack is settling for up to `within`; returns its stdout.
fn l3m_until(home: &Home, args: &[&str], within: Duration) -> String {
    let begun = Instant::now();
    loop {
        let out = home.l3m(args).output().unwrap();
        if out.status.success() {
            return String::from_utf8(out.stdout).unwrap();
        }
        assert!(
            begun.elapsed() < within,
            "l3m {args:?} kept failing: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn agents(home: &Home) -> Vec<String> {
    let tree = l3m_until(home, &["ls", "--json"], Duration::from_secs(5));
    let value: serde_json::Value = serde_json::from_str(&tree).unwrap();
    let mut names: Vec<String> = value["agents"]
        .as_array()
        .unwrap_or_else(|| panic!("l3m ls --json: {value}"))
        .iter()
        .map(|a| a["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn the_hub_outlives_the_death_of_its_nats_node() {
    let home = Home::new();
    home.init();
    let mut site = Site::start(&home);
    let _hubd = start_hubd(&home, &site);
    let hubd_node = site.node_of("hubd");
    let other = (hubd_node + 1) % 3;
    point_cli_at(&home, &site, &site.nodes[other].url());
    l3m_until(&home, &["spawn", "before"], Duration::from_secs(30));
    assert_eq!(agents(&home), ["before"]);

    site.nodes[hubd_node].kill();
    eprintln!(
        "killed node {}, which hubd was on",
        site.nodes[hubd_node].name
    );
    // hubd reconnects to a surviving node; the CLI, on another node, reaches it again.
    l3m_until(&home, &["spawn", "after"], Duration::from_secs(30));
    assert_eq!(agents(&home), ["after", "before"]);
    let moved = site.node_of("hubd");
    assert_ne!(moved, hubd_node, "hubd is on a surviving node");
}

/// A TCP relay from a loopback port to `to`, keeping every byte that passes either way.
fn recording_relay(to: u16) -> (u16, Arc<Mutex<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else {
                return;
            };
            for (mut from, mut into) in [
                (client.try_clone().unwrap(), server.try_clone().unwrap()),
                (server, client),
            ] {
                let record = Arc::clone(&record);
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16 * 1024];
                    while let Ok(n) = from.read(&mut buf) {
                        if n == 0 || into.write_all(&buf[..n]).is_err() {
                            break;
                        }
                        record.lock().unwrap().extend_from_slice(&buf[..n]);
                    }
                    let _ = into.shutdown(std::net::Shutdown::Both);
                });
            }
        }
    });
    (port, seen)
}

/// The first line a NATS port says (its INFO), read in clear.
fn info_line(port: u16) -> String {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).unwrap();
    line
}

/// Connects to `port`, sends a CONNECT with `password` and a PING in clear, and returns all
/// the server said until it closed (or went quiet).
fn speak_in_clear(port: u16, password: &str) -> String {
    let mut plain = TcpStream::connect(("127.0.0.1", port)).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(8)))
        .unwrap();
    let hello = format!(
        "CONNECT {{\"user\":\"cli\",\"pass\":\"{password}\",\"verbose\":false}}\r\nPING\r\n"
    );
    let _ = plain.write_all(hello.as_bytes());
    let mut said = Vec::new();
    let _ = plain.read_to_end(&mut said);
    String::from_utf8_lossy(&said).into_owned()
}

#[test]
fn nothing_crosses_in_clear_and_nothing_untrusted_connects() {
    let home = Home::new();
    home.init();
    let site = Site::start(&home);
    let _hubd = start_hubd(&home, &site);
    let (relay, seen) = recording_relay(site.nodes[0].client);
    point_cli_at(&home, &site, &format!("tls://127.0.0.1:{relay}"));
    l3m_until(
        &home,
        &["spawn", "secretive-agent"],
        Duration::from_secs(30),
    );
    assert_eq!(agents(&home), ["secretive-agent"]);
    let seen = seen.lock().unwrap().clone();
    assert!(seen.len() > 1000, "the relay carried the CLI's traffic");
    let password = site.password("cli");
    for secret in [
        password.as_str(),
        "secretive-agent",
        "l3m.",
        "CONNECT",
        "_INBOX_cli",
    ] {
        assert!(
            !seen.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "`{secret}` crossed the wire in clear"
        );
    }

    // A client port says TLS is required before anything else; a client or a route that
    // speaks in clear anyway gets no answer to its PING, only a closed connection.
    let info = info_line(site.nodes[1].client);
    assert!(
        info.starts_with("INFO ") && info.contains("\"tls_required\":true"),
        "the client port said {info}"
    );
    for port in [site.nodes[1].client, site.nodes[1].route] {
        let answer = speak_in_clear(port, &password);
        assert!(
            !answer.contains("PONG"),
            "port {port} answered in clear: {answer}"
        );
    }

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let auth = || NatsAuth::UserPassword {
        user: "cli".into(),
        password: password.clone(),
    };
    let url = site.nodes[1].url();
    // Without the site's CA (the system's roots) and with another site's CA: refused.
    let other = tempfile::tempdir().unwrap();
    home.l3m(&[
        "site",
        "init",
        "--out",
        other.path().join("s").to_str().unwrap(),
        "--node",
        "x=127.0.0.1",
    ])
    .assert()
    .success();
    for tls in [
        NatsTls::Plain,
        NatsTls::SiteCa(other.path().join("s/ca.pem")),
    ] {
        let attempt = runtime.block_on(async {
            tokio::time::timeout(
                Duration::from_secs(15),
                NatsBus::connect_with(&url, auth(), &tls),
            )
            .await
        });
        assert!(
            !matches!(attempt, Ok(Ok(_))),
            "a client with {tls:?} connected to the site"
        );
    }
    // With it: connected.
    runtime
        .block_on(NatsBus::connect_with(
            &url,
            auth(),
            &NatsTls::SiteCa(site.ca()),
        ))
        .unwrap();
}

#[test]
fn a_site_is_made_once_and_its_keys_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s");
    let init = |out: &Path| {
        home.l3m(&[
            "site",
            "init",
            "--out",
            out.to_str().unwrap(),
            "--node",
            "a=10.0.0.1",
            "--node",
            "b=hub-b.example:5222",
            "--json",
        ])
        .output()
        .unwrap()
    };
    let first = init(&out);
    assert!(first.status.success());
    let written: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(written["nodes"][1]["url"], "tls://hub-b.example:5222");
    for private in ["ca.key", "passwords.env", "a/server.key", "b/server.key"] {
        let mode = std::fs::metadata(out.join(private))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{private} is readable by others");
    }
    let ca = std::fs::read(out.join("ca.pem")).unwrap();
    let again = init(&out);
    assert_eq!(
        again.status.code(),
        Some(2),
        "a second init is a usage error"
    );
    assert!(String::from_utf8_lossy(&again.stderr).contains("not empty"));
    assert_eq!(
        std::fs::read(out.join("ca.pem")).unwrap(),
        ca,
        "the CA is kept"
    );
    // A bad node is refused, naming it.
    let bad = home
        .l3m(&["site", "init", "--out", "/nonexistent/x", "--node", "A=h"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("node name `A`"));
}
