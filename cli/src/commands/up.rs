//! `l3m up`: the local stack.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::render::time::now_ms;

#[cfg(feature = "embedded")]
use indicatif::ProgressBar;
use l3m_core::duty::Duty;
use l3m_wire::bus::{Bus, NatsBus};
use l3m_wire::client::HubClient;

use crate::context::{Context, Selected, nats_auth, nats_tls};
#[cfg(feature = "embedded")]
use crate::embedded::{Embedded, sequencer_config, start_sequencers};
use crate::error::CliError;
use crate::stack::builds::{self, Decision};
use crate::stack::process::{self, GRACE, Started};
use crate::stack::runfile::{RunFile, StackProcess};
use crate::stack::users::{PASSWORD_ENV, Users};
use crate::stack::{Service, binaries, docker, nats, run_dir};

/// How long hubd may take to answer its first session request.
const HUBD_READY_WITHIN: Duration = Duration::from_secs(15);

/// How long a started service must stay alive to count as started.
const SETTLE: Duration = Duration::from_millis(700);

/// Start the local stack: nats-server (when the hub names no `nats`), hubd and the sequencer
/// supervisor, each as a child process logging to `HUB/.l3m-run/SERVICE.log`.
///
/// Beside the sequencer, the builder and the runner start too when a Docker engine answers
/// (`DOCKER_HOST`, else /var/run/docker.sock) and both binaries are found, sharing the artifact
/// cache `HUB/cache/artifacts`; otherwise one line says why builds are off and the rest starts.
/// The postman starts when the hub's entry sets `postman_listen`, the reviewer when l3m.toml
/// has a `[review]` table.
///
/// By default the services are left running when `l3m up` returns (each in its own process
/// group, so a Ctrl-C at the terminal does not reach them); `l3m down` stops them. With
/// `--foreground`, `l3m up` stays until Ctrl-C or SIGTERM and then stops them itself.
///
/// Binaries are found next to the `l3m` binary first, then on PATH, then in /usr/sbin,
/// /usr/local/bin and /usr/bin; a missing one is an error naming how to get it.
///
/// `--embedded` runs hubd inside this process instead (in the foreground), on the same NATS
/// server, so every other command works unchanged.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run the services inside this process (implies --foreground).
    #[cfg(feature = "embedded")]
    #[arg(long)]
    pub embedded: bool,
    /// Stay in the foreground until Ctrl-C, then stop the stack.
    #[arg(long)]
    pub foreground: bool,
    /// Which services to start.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "hubd,sequencer"
    )]
    pub services: Vec<Service>,
}

impl Args {
    /// Whether the services run in this process (only a CLI built with `embedded` can).
    fn embedded(&self) -> bool {
        #[cfg(feature = "embedded")]
        {
            self.embedded
        }
        #[cfg(not(feature = "embedded"))]
        {
            false
        }
    }
}

/// What `up` started so far; dropping it without [`Stack::keep`] stops all of it.
struct Stack {
    started: Vec<Started>,
    kept: bool,
}

impl Stack {
    fn entries(&self) -> Vec<StackProcess> {
        self.started.iter().map(|s| s.entry.clone()).collect()
    }

    /// Leaves the processes running.
    fn keep(mut self) {
        self.kept = true;
    }

    /// Whether some process has exited, and which.
    fn exited(&mut self) -> Option<String> {
        self.started.iter_mut().find_map(|s| {
            matches!(s.child.try_wait(), Ok(Some(_))).then(|| s.entry.service.clone())
        })
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if !self.kept {
            process::stop(&self.entries(), GRACE);
            for s in &mut self.started {
                let _ = s.child.wait();
            }
        }
    }
}

/// Refuses to start over a live stack; clears a stale run file.
fn check_not_up(hub: &Selected) -> Result<(), CliError> {
    if let Some(run) = RunFile::read(hub.root())? {
        let live: Vec<String> = run
            .processes
            .iter()
            .filter(|p| process::alive(p))
            .map(|p| format!("{} (pid {})", p.service, p.pid))
            .collect();
        if !live.is_empty() {
            return Err(CliError::Runtime(format!(
                "the stack is already up: {}; run `l3m down` first",
                live.join(", ")
            )));
        }
        tracing::info!("removing a stale run file");
        RunFile::remove(hub.root())?;
    }
    Ok(())
}

/// Waits until hubd answers a session request, or fails with its log.
async fn wait_for_hubd(hub: &Selected, url: &str, started: &mut Started) -> Result<(), CliError> {
    let credential = hub.human_key()?;
    let begun = Instant::now();
    let bus: Arc<dyn Bus> = Arc::new(
        NatsBus::connect_with(url, nats_auth(hub)?, &nats_tls(hub))
            .await
            .map_err(|e| CliError::Runtime(format!("cannot reach NATS at {url}: {e}")))?,
    );
    loop {
        if let Ok(Some(status)) = started.child.try_wait() {
            return Err(CliError::Runtime(format!(
                "hubd exited with {status} while starting; its log ({}):\n{}",
                started.entry.log.display(),
                process::log_tail(&started.entry.log, 20)
            )));
        }
        let duty = Duty::Human {
            human: hub.human.clone(),
        };
        let attempt = HubClient::open(Arc::clone(&bus), hub.hub_id()?, &credential, duty);
        if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(1), attempt).await {
            return Ok(());
        }
        if begun.elapsed() > HUBD_READY_WITHIN {
            return Err(CliError::Runtime(format!(
                "hubd did not answer within {HUBD_READY_WITHIN:?}; its log ({}):\n{}",
                started.entry.log.display(),
                process::log_tail(&started.entry.log, 20)
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How a service is started: its arguments, and what is added to its environment.
struct Launch {
    args: Vec<String>,
    env: Vec<(String, String)>,
}

/// How each service is started, and what is added to its environment: on the
/// local stack's server (`users`), its own NATS user with the password in [`PASSWORD_ENV`]; on
/// a server `l3m.toml` names, the configured user with the variable it names (inherited).
fn service_args(
    service: Service,
    hub: &Selected,
    url: &str,
    users: Option<&Users>,
) -> Result<Launch, CliError> {
    let root = hub.root().display().to_string();
    let mut args: Vec<String> = match service {
        Service::Hubd | Service::Postman => vec!["serve".into(), "--hub".into(), root],
        Service::Sequencer => vec!["supervise".into(), "--hub".into(), root],
        // The reviewer holds no hub path: it reads only its configuration and the bus.
        Service::Reviewer => vec!["--config".into(), hub.document.display().to_string()],
        // The builder and the runner hold only the artifact cache they share.
        Service::Builder | Service::Runner => vec![
            "--cache".into(),
            builds::cache(hub.root()).display().to_string(),
        ],
    };
    args.extend([
        "--hub-id".into(),
        hub.entry.hub_id.clone(),
        "--nats".into(),
        url.to_owned(),
    ]);
    if let Some(ca) = &hub.entry.nats_ca {
        args.extend(["--nats-ca".into(), ca.display().to_string()]);
    }
    let mut env = Vec::new();
    let identity = match (users, &hub.entry.nats_user, &hub.entry.nats_password_env) {
        (Some(users), _, _) => {
            let user = service.as_str();
            let password = users.password(user).ok_or_else(|| {
                CliError::Runtime(format!("the local stack has no NATS user for {user}"))
            })?;
            env.push((PASSWORD_ENV.to_owned(), password.to_owned()));
            Some((user.to_owned(), PASSWORD_ENV.to_owned()))
        }
        (None, Some(user), Some(var)) => {
            if std::env::var_os(var).is_none() {
                return Err(CliError::usage(format!(
                    "${var} (the NATS password) is not set: export it"
                )));
            }
            Some((user.clone(), var.clone()))
        }
        _ => None,
    };
    // The password reaches the service through its environment, never argv.
    if let Some((user, var)) = identity {
        args.extend([
            "--nats-user".into(),
            user,
            "--nats-password-env".into(),
            var,
        ]);
    }
    match service {
        Service::Hubd | Service::Reviewer => {}
        // They reach the engine the way `l3m up` asked it: through DOCKER_HOST when it is set.
        Service::Builder | Service::Runner => {
            if let Ok(host) = std::env::var("DOCKER_HOST") {
                env.push(("DOCKER_HOST".to_owned(), host));
            }
        }
        Service::Postman => {
            let listen = hub.entry.postman_listen.clone().ok_or_else(|| {
                CliError::usage(format!(
                    "the postman needs somewhere to listen: set `postman_listen = \"HOST:PORT\"` in [hubs.{}] of {}",
                    hub.name,
                    hub.document.display()
                ))
            })?;
            args.extend(["--listen".into(), listen]);
        }
        Service::Sequencer => {
            args.extend([
                "--credential".into(),
                hub.root()
                    .join(l3m_core::refs::paths::host_key())
                    .display()
                    .to_string(),
                "--config".into(),
                hub.document.display().to_string(),
            ]);
        }
    }
    Ok(Launch { args, env })
}

/// Starts one service and checks it came up.
async fn start_service(
    service: Service,
    binary: &Path,
    hub: &Selected,
    url: &str,
    users: Option<&Users>,
    stack: &mut Stack,
) -> Result<(), CliError> {
    let log = run_dir(hub.root()).join(format!("{}.log", service.as_str()));
    let launch = service_args(service, hub, url, users)?;
    let inherit = match service {
        Service::Hubd | Service::Postman | Service::Builder | Service::Runner => {
            process::Inherit::Minimal
        }
        // The sequencer and the reviewer call models: their API keys come from the environment.
        Service::Sequencer | Service::Reviewer => process::Inherit::All,
    };
    let mut started = process::start(
        service.as_str(),
        binary,
        &launch.args,
        inherit,
        &launch.env,
        log,
    )?;
    let ready = match service {
        Service::Hubd => wait_for_hubd(hub, url, &mut started).await,
        Service::Sequencer
        | Service::Postman
        | Service::Reviewer
        | Service::Builder
        | Service::Runner => {
            tokio::time::sleep(SETTLE).await;
            match started.child.try_wait() {
                Ok(Some(status)) => Err(CliError::Runtime(format!(
                    "{} exited with {status} right after it started; its log ({}):\n{}",
                    service.as_str(),
                    started.entry.log.display(),
                    process::log_tail(&started.entry.log, 20)
                ))),
                _ => Ok(()),
            }
        }
    };
    stack.started.push(started);
    ready
}

/// Waits for Ctrl-C or SIGTERM.
async fn until_stopped() -> Result<(), CliError> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| CliError::Runtime(format!("cannot watch for SIGTERM: {e}")))?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    Ok(())
}

/// Runs `l3m up`.
pub async fn cmd_up(args: Args, cx: Context) -> Result<(), CliError> {
    let hub = cx.hub()?;
    check_not_up(&hub)?;
    let dir = run_dir(hub.root());
    std::fs::create_dir_all(&dir).map_err(|e| CliError::io("create", &dir, e))?;
    let mut services = args.services.clone();
    if hub.entry.postman_listen.is_some() {
        services.push(Service::Postman);
    }
    if cx.document()?.review.is_some() && services.contains(&Service::Sequencer) {
        services.push(Service::Reviewer);
    }
    services.sort();
    services.dedup();
    // Asked for by name, the builder and the runner need an engine like they need binaries.
    if services.iter().any(|s| builds::STAGES.contains(s)) && !args.embedded() {
        docker::ping().map_err(|e| {
            CliError::Runtime(format!(
                "the builder and the runner need a Docker engine: {e}"
            ))
        })?;
    }
    if !services.contains(&Service::Hubd) && hub.entry.nats.is_none() {
        tracing::info!(
            "starting without hubd: commands will find no hubd until one serves this hub"
        );
    }
    // Every binary is found before anything starts, so a missing one starts nothing.
    let nats_binary = match hub.entry.nats {
        None => Some(binaries::find(
            "nats-server",
            binaries::install_hint("nats-server"),
        )?),
        Some(_) => None,
    };
    let service_binaries = if args.embedded() {
        Vec::new()
    } else {
        services
            .iter()
            .map(|s| {
                Ok((
                    *s,
                    binaries::find(s.binary(), binaries::install_hint(s.binary()))?,
                ))
            })
            .collect::<Result<Vec<_>, CliError>>()?
    };
    // Implied beside the sequencer, they start only where they can; else one line says why.
    let (implied, builds_off) = match (builds::implied(&services), args.embedded()) {
        (true, false) => {
            let find = |s: Service| {
                binaries::find(s.binary(), binaries::install_hint(s.binary()))
                    .map_err(|e| e.to_string())
            };
            let engine = tokio::task::spawn_blocking(docker::ping)
                .await
                .map_err(|e| CliError::Runtime(format!("asking the Docker engine: {e}")))?;
            match builds::decide(engine, find(Service::Builder), find(Service::Runner)) {
                Decision::Start(stages) => (stages, None),
                Decision::Off(why) => (Vec::new(), Some(why)),
            }
        }
        _ => (Vec::new(), None),
    };
    let mut builds_off = builds_off;
    let bar = crate::output::spinner("starting the stack");
    let mut stack = Stack {
        started: Vec::new(),
        kept: false,
    };
    let mut users = match &hub.entry.nats_passwords {
        Some(file) => Some(Users::read_env_file(file)?),
        None => None,
    };
    let url = match (&hub.entry.nats, nats_binary) {
        (Some(url), _) => url.clone(),
        (None, Some(binary)) => {
            bar.set_message("starting nats-server");
            let generated = Users::generate()?;
            generated.write(&dir)?;
            let (started, url) = nats::start(&binary, &dir, &generated)?;
            stack.started.push(started);
            users = Some(generated);
            url
        }
        (None, None) => {
            return Err(CliError::Runtime(
                "no NATS server and no nats-server binary".into(),
            ));
        }
    };
    #[cfg(feature = "embedded")]
    if args.embedded {
        return run_embedded(&hub, &url, users.as_ref(), &services, stack, bar).await;
    }
    for (service, binary) in &service_binaries {
        bar.set_message(format!("starting {}", service.as_str()));
        start_service(*service, binary, &hub, &url, users.as_ref(), &mut stack).await?;
    }
    let before = stack.started.len();
    for (service, binary) in &implied {
        bar.set_message(format!("starting {}", service.as_str()));
        if let Err(e) =
            start_service(*service, binary, &hub, &url, users.as_ref(), &mut stack).await
        {
            // An implied stage that cannot stay up takes its other half down and leaves the
            // rest up, saying why in one line.
            let mut gone: Vec<Started> = stack.started.drain(before..).collect();
            let entries: Vec<StackProcess> = gone.iter().map(|g| g.entry.clone()).collect();
            process::stop(&entries, GRACE);
            for g in &mut gone {
                let _ = g.child.wait();
            }
            let log = run_dir(hub.root()).join(format!("{}.log", service.as_str()));
            builds_off = Some(builds::exited_line(*service, &e.to_string(), &log));
            break;
        }
    }
    let run = RunFile {
        nats: url.clone(),
        hub_id: hub.entry.hub_id.clone(),
        started_at_ms: now_ms(),
        embedded: false,
        processes: stack.entries(),
    };
    run.write(hub.root())?;
    bar.finish_and_clear();
    for p in &run.processes {
        println!("{:<12} pid {:<8} log {}", p.service, p.pid, p.log.display());
    }
    if let Some(why) = &builds_off {
        println!("{why}");
    }
    println!(
        "the stack is up on {url} (run file {})",
        RunFile::path(hub.root()).display()
    );
    if !args.foreground {
        println!("stop it with `l3m down`");
        stack.keep();
        return Ok(());
    }
    println!("Ctrl-C stops it");
    tokio::select! {
        stopped = until_stopped() => stopped?,
        gone = async {
            loop {
                if let Some(service) = stack.exited() { return service; }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        } => eprintln!("l3m: {gone} exited; stopping the stack"),
    }
    drop(stack);
    RunFile::remove(hub.root())?;
    println!("the stack is down");
    Ok(())
}

/// A connection for `service` run in this process: its own user when the stack made users, so
/// each duty keeps its own permissions and replies.
#[cfg(feature = "embedded")]
async fn service_bus(
    hub: &Selected,
    url: &str,
    users: Option<&Users>,
    service: Service,
) -> Result<Arc<dyn Bus>, CliError> {
    let auth = match users.and_then(|u| u.auth(service.as_str())) {
        Some(auth) => auth,
        None => nats_auth(hub)?,
    };
    let bus = NatsBus::connect_with(url, auth, &nats_tls(hub))
        .await
        .map_err(|e| CliError::Runtime(format!("cannot reach NATS at {url}: {e}")))?;
    Ok(Arc::new(bus))
}

/// `l3m up --embedded`: hubd (and, with the sequencer library, the supervisor) in this process.
#[cfg(feature = "embedded")]
async fn run_embedded(
    hub: &Selected,
    url: &str,
    users: Option<&Users>,
    services: &[Service],
    stack: Stack,
    bar: ProgressBar,
) -> Result<(), CliError> {
    let connect = |service: Service| service_bus(hub, url, users, service);
    if services.contains(&Service::Postman) {
        println!(
            "the postman runs as its own process, not in the embedded stack: run `postman serve` beside it"
        );
    }
    if services.contains(&Service::Reviewer) {
        println!(
            "the reviewer runs as its own process, not in the embedded stack: run `reviewer --config {}` beside it",
            hub.document.display()
        );
    }
    let mut embedded = None;
    if services.contains(&Service::Hubd) {
        bar.set_message("starting hubd in this process");
        let bus = connect(Service::Hubd).await?;
        embedded = Some(Embedded::start(bus, hub.root(), hub.hub_id()?).await?);
    }
    let mut sequencers = None;
    if services.contains(&Service::Sequencer) {
        let config = sequencer_config(&hub.document)?;
        let dir = hub.document.parent().unwrap_or(hub.root()).to_path_buf();
        sequencers = Some(
            start_sequencers(
                connect(Service::Sequencer).await?,
                hub.root(),
                &hub.hub_id()?,
                config,
                &dir,
            )
            .await?,
        );
    }
    let me = std::env::current_exe()
        .map_err(|e| CliError::Runtime(format!("cannot find this binary: {e}")))?;
    let mut processes = stack.entries();
    processes.push(StackProcess {
        service: "l3m".into(),
        pid: std::process::id(),
        binary: me,
        log: run_dir(hub.root()).join("l3m.log"),
    });
    RunFile {
        nats: url.to_owned(),
        hub_id: hub.entry.hub_id.clone(),
        started_at_ms: now_ms(),
        embedded: true,
        processes,
    }
    .write(hub.root())?;
    bar.finish_and_clear();
    println!("the embedded stack is up on {url}; Ctrl-C stops it");
    until_stopped().await?;
    if let Some(sequencers) = sequencers {
        sequencers.stop().await;
    }
    if let Some(embedded) = embedded {
        embedded.stop().await;
    }
    drop(stack);
    RunFile::remove(hub.root())?;
    println!("the stack is down");
    Ok(())
}
