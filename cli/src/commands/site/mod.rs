//! `l3m site`: set up a site whose NATS spans several hosts — a cluster of nodes joined by
//! routes, every connection over TLS with certificates the site's own CA signed.

mod conf;
mod pki;

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::context::Context;
use crate::error::CliError;
use crate::stack::users::Users;
pub use conf::{Node, NodeError};

/// The site's users and their permissions (passwords from nats-server's environment).
const PERMISSIONS: &str = include_str!("../../../../deploy/nats.conf");

/// Set up a site across hosts.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    Init(InitArgs),
}

/// Make a site's NATS cluster: a CA, each node's certificate and nats-server configuration,
/// and the NATS users' passwords.
///
/// Writes into OUT (which must not exist or be empty):
///   ca.pem             the site's CA: give it to every l3m process (`--nats-ca`, or
///                      `nats_ca` in a hub's entry of l3m.toml) and to every node
///   ca.key             the CA's key (mode 0600): keep it off the nodes; it signs new nodes
///   passwords.env      the NATS users' passwords (mode 0600), VAR=value lines: nats-server
///                      reads them from its environment, each service its own
///   NODE/nats.conf     the node's configuration: clients over TLS, routes to every other
///                      node over mutual TLS, monitoring on the node's loopback, the users
///   NODE/server.pem, NODE/server.key (0600), NODE/ca.pem
///
/// Copy NODE/ to its host (at --install-dir), then run there:
///   set -a; . ./passwords.env; set +a; nats-server -c INSTALL_DIR/nats.conf
///
/// Example, three hosts:
///   l3m site init --out site --node a=10.0.0.1 --node b=10.0.0.2 --node c=10.0.0.3
#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// The folder to write the site into.
    #[arg(long)]
    out: PathBuf,
    /// A node: NAME=HOST[:CLIENT_PORT[:ROUTE_PORT[:MONITOR_PORT]]] (ports 4222, 6222, 8222 by
    /// default). HOST is what the other hosts reach it at; its certificate names it. Repeat
    /// for each node; three make a cluster that outlives one node's death.
    #[arg(long = "node", required = true, value_parser = Node::parse)]
    nodes: Vec<Node>,
    /// The folder each node's files will live in on its host, as its nats.conf names them
    /// [default: OUT/NODE here, made absolute].
    #[arg(long, value_name = "DIR")]
    install_dir: Option<String>,
    /// The site's name, written into its certificates.
    #[arg(long, default_value = "l3m")]
    name: String,
    /// Print what was written as JSON.
    #[arg(long)]
    json: bool,
}

/// Dispatches `l3m site …`.
pub async fn dispatch(command: Command, _cx: Context) -> Result<(), CliError> {
    match command {
        Command::Init(args) => cmd_init(args),
    }
}

/// What `site init` wrote.
#[derive(Debug, Serialize)]
struct Written {
    ca: PathBuf,
    passwords: PathBuf,
    nodes: Vec<WrittenNode>,
}

#[derive(Debug, Serialize)]
struct WrittenNode {
    name: String,
    url: String,
    config: PathBuf,
}

fn cmd_init(args: InitArgs) -> Result<(), CliError> {
    conf::check_layout(&args.nodes).map_err(|e| CliError::usage(e.to_string()))?;
    let out = &args.out;
    let occupied = std::fs::read_dir(out).map(|mut d| d.next().is_some());
    if matches!(occupied, Ok(true)) {
        return Err(CliError::usage(format!(
            "{} is not empty: a site is made once (its CA signs every node); choose a new folder",
            out.display()
        )));
    }
    std::fs::create_dir_all(out).map_err(|e| CliError::io("create", out, e))?;
    let out = std::fs::canonicalize(out).map_err(|e| CliError::io("resolve", out, e))?;
    let pki = pki::generate(&args.name, &args.nodes)?;
    write(&out.join("ca.pem"), &pki.ca.cert, false)?;
    write(&out.join("ca.key"), &pki.ca.key, true)?;
    let passwords: String = Users::generate()?
        .server_env()
        .into_iter()
        .map(|(var, value)| format!("{var}={value}\n"))
        .collect();
    write(&out.join("passwords.env"), &passwords, true)?;
    let mut written = Vec::new();
    for (node, pem) in args.nodes.iter().zip(&pki.nodes) {
        let dir = out.join(&node.name);
        std::fs::create_dir(&dir).map_err(|e| CliError::io("create", &dir, e))?;
        write(&dir.join("server.pem"), &pem.cert, false)?;
        write(&dir.join("server.key"), &pem.key, true)?;
        write(&dir.join("ca.pem"), &pki.ca.cert, false)?;
        let install = args
            .install_dir
            .clone()
            .unwrap_or_else(|| dir.display().to_string());
        let files = conf::Files { dir: &install };
        let config = dir.join("nats.conf");
        write(
            &config,
            &conf::node_config(node, &args.nodes, &files, PERMISSIONS),
            false,
        )?;
        written.push(WrittenNode {
            name: node.name.clone(),
            url: node.client_url(),
            config,
        });
    }
    let written = Written {
        ca: out.join("ca.pem"),
        passwords: out.join("passwords.env"),
        nodes: written,
    };
    if args.json {
        return crate::output::json(&written);
    }
    outln!(
        "a site of {} NATS nodes in {}",
        written.nodes.len(),
        out.display()
    );
    for node in &written.nodes {
        outln!(
            "  {:<8} {}  ({})",
            node.name,
            node.url,
            node.config.display()
        );
    }
    let urls: Vec<&str> = written.nodes.iter().map(|n| n.url.as_str()).collect();
    outln!(
        "clients: --nats {} --nats-ca {}\nkeep {} off the nodes: it signs new ones",
        urls.join(","),
        written.ca.display(),
        out.join("ca.key").display()
    );
    Ok(())
}

/// Writes `text` to a new file at `path`, readable by its owner alone when `private`.
fn write(path: &Path, text: &str, private: bool) -> Result<(), CliError> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if private { 0o600 } else { 0o644 })
        .open(path)
        .map_err(|e| CliError::io("create", path, e))?;
    file.write_all(text.as_bytes())
        .map_err(|e| CliError::io("write", path, e))
}
