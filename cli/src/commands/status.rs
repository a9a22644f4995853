//! `l3m status`: the whole site from one place — hubd's health, every other process that
//! answers (sequencer hosts, running sequencers, postmen, reviewers, builders, runners: each
//! its host, pid, health and counts), which host runs which agents, and the postman's links.

use std::collections::BTreeMap;
use std::time::Duration;

use l3m_wire::health::{self, Health};
use l3m_wire::hubd::tree::AgentState;
use l3m_wire::postman::PostmanStatus;
use l3m_wire::subjects::Service;
use serde::Serialize;

use crate::context::Context;
use crate::error::CliError;
use crate::output;
use crate::render::escape::Foreign;

/// How long a service may take to say how it is.
const ANSWER_WITHIN: Duration = Duration::from_secs(3);

/// How long `status` listens for the processes of the other services: every one that runs
/// answers in a few milliseconds, and one that takes longer is as good as down to an operator.
const GATHER_WITHIN: Duration = Duration::from_millis(700);

/// The services that may run as several processes, each asked with [`health::gather`].
const GATHERED: [Service; 6] = [
    Service::Host,
    Service::Sequencer,
    Service::Postman,
    Service::Reviewer,
    Service::Builder,
    Service::Runner,
];

/// Show the site: hubd's health (its host, pid, version, uptime, checks and counts), each
/// sequencer host and the agents it runs (from the leases hubd holds), each asleep agent that
/// is stuck (`stuck: <why>; <what to do>`, as `l3m tree` says), and each office's link (when a
/// postman runs).
///
/// Exit 0 when every service that answered is well, 1 when one reports a failing check, 5
/// when hubd does not answer (start it with `l3m up`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print JSON: `{hub, hubd, processes: [health], hosts: [{holder, agents}], stuck: {agent:
    /// "why; what to do"}, postman}`.
    #[arg(long)]
    pub json: bool,
}

/// One sequencer host, as the leases name it.
#[derive(Debug, Serialize)]
struct Host {
    /// Its holder text (`host:pid` of the sequencer process).
    holder: String,
    /// The agents it runs.
    agents: Vec<String>,
}

/// Everything `status` shows.
#[derive(Debug, Serialize)]
struct Status {
    hub: String,
    hubd: Health,
    /// Every other process that answered, by service.
    processes: Vec<Health>,
    hosts: Vec<Host>,
    /// Why each stuck agent is stuck and what would unstick it, by name.
    stuck: BTreeMap<String, String>,
    postman: Option<PostmanStatus>,
}

/// Groups the running agents by the sequencer that holds their lease.
fn hosts(agents: &[AgentState]) -> Vec<Host> {
    let mut by_holder: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for agent in agents {
        if let Some(holder) = &agent.holder {
            by_holder
                .entry(holder)
                .or_default()
                .push(agent.name.clone());
        }
    }
    by_holder
        .into_iter()
        .map(|(holder, agents)| Host {
            holder: holder.to_owned(),
            agents,
        })
        .collect()
}

/// `1h02m`, `3m05s`, `12s`.
fn uptime(ms: u64) -> String {
    let s = ms / 1000;
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

/// Runs `l3m status`.
pub async fn cmd_status(args: Args, cx: Context) -> Result<(), CliError> {
    let session = cx.connect().await?;
    let client = &session.client;
    let hubd = match health::ask(
        client.bus().as_ref(),
        client.subjects(),
        Service::Hubd,
        ANSWER_WITHIN,
    )
    .await
    {
        Ok(Ok(health)) => health,
        Ok(Err(refused)) => {
            return Err(CliError::Runtime(format!(
                "hubd refused to say how it is: {}",
                refused.message
            )));
        }
        Err(e) => {
            return Err(CliError::StackDown {
                why: format!("hubd did not answer its health request: {e}"),
            });
        }
    };
    let asked = GATHERED.map(|service| {
        health::gather(
            client.bus().as_ref(),
            client.subjects(),
            service,
            GATHER_WITHIN,
        )
    });
    let mut processes = Vec::new();
    for (service, answers) in GATHERED
        .iter()
        .zip(futures_util::future::join_all(asked).await)
    {
        match answers {
            Ok(answers) => processes.extend(answers),
            // A service this user may not ask (an older site's permissions) is left out.
            Err(e) => tracing::debug!(%service, error = %e, "no health answers"),
        }
    }
    // One request per page, with what each asleep agent's Log tail says (no Log read here).
    let tree = client.list_tree(crate::render::tree::TAIL).await?;
    let asleep: Vec<&str> = tree
        .agents
        .iter()
        .filter(|a| a.life == l3m_wire::hubd::tree::AgentLife::Asleep)
        .map(|a| a.name.as_str())
        .collect();
    let stuck = super::tree::why_stuck_in(&tree, &asleep, &session.hub.document);
    let postman = super::office::link_status(client, false).await?;
    let status = Status {
        hub: session.hub.name.clone(),
        hosts: hosts(&tree.agents),
        stuck,
        hubd,
        processes,
        postman,
    };
    let failures = failing(&status);
    if args.json {
        output::json(&status)?;
    } else {
        print(&status);
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(CliError::Runtime(format!(
            "failing checks: {}; see those processes' logs",
            failures.join(", ")
        )))
    }
}

/// Each failing check of every process that answered, as `service@host:pid check`.
fn failing(status: &Status) -> Vec<String> {
    std::iter::once(&status.hubd)
        .chain(&status.processes)
        .flat_map(|h| {
            h.checks
                .iter()
                .filter(|c| !c.ok)
                .map(move |c| format!("{}@{}:{} {}", h.service, h.host, h.pid, c.name))
        })
        .collect()
}

fn print(status: &Status) {
    let h = &status.hubd;
    outln!("hub {}", status.hub);
    outln!(
        "  hubd       {} on {} pid {}, version {}, up {}",
        if h.ok() { "ok" } else { "UNWELL" },
        Foreign(&h.host),
        h.pid,
        Foreign(&h.version),
        uptime(h.now_ms.saturating_sub(h.started_ms))
    );
    for check in &h.checks {
        let mark = if check.ok { "ok" } else { "FAILED" };
        outln!(
            "             {:<8} {mark}: {}",
            Foreign(&check.name),
            Foreign(&check.detail)
        );
    }
    let gauges: Vec<String> = h.gauges.iter().map(|(k, v)| format!("{k} {v}")).collect();
    outln!("             {}", gauges.join(", "));
    for p in &status.processes {
        outln!(
            "  {:<10} {} on {} pid {}, up {}",
            Foreign(&p.service),
            if p.ok() { "ok" } else { "UNWELL" },
            Foreign(&p.host),
            p.pid,
            uptime(p.now_ms.saturating_sub(p.started_ms))
        );
        for check in p.checks.iter().filter(|c| !c.ok) {
            outln!(
                "             {:<8} FAILED: {}",
                Foreign(&check.name),
                Foreign(&check.detail)
            );
        }
        let gauges: Vec<String> = p.gauges.iter().map(|(k, v)| format!("{k} {v}")).collect();
        outln!("             {}", gauges.join(", "));
    }
    if status.hosts.is_empty() {
        outln!("  sequencers no agent is running (`l3m up` starts the supervisor)");
    }
    for host in &status.hosts {
        outln!(
            "  sequencer  {} runs {}",
            Foreign(&host.holder),
            Foreign(&host.agents.join(", "))
        );
    }
    for (agent, why) in &status.stuck {
        outln!("  stuck      {}: {}", Foreign(agent), Foreign(why));
    }
    match &status.postman {
        None => outln!("  postman    not answering (none runs, or the hub has no offices)"),
        Some(p) => {
            outln!("  postman    ok, this hub is `{}`", p.me);
            for office in &p.offices {
                outln!(
                    "             {:<10} {}",
                    Foreign(&office.name),
                    super::office::describe(office)
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use l3m_wire::hubd::tree::AgentLife;

    fn agent(name: &str, holder: Option<&str>) -> AgentState {
        AgentState {
            name: name.into(),
            parent: "human:alice".into(),
            life: if holder.is_some() {
                AgentLife::Running
            } else {
                AgentLife::Asleep
            },
            holder: holder.map(str::to_owned),
            driven: false,
        }
    }

    #[test]
    fn running_agents_are_grouped_by_their_host_and_asleep_ones_left_out() {
        let agents = [
            agent("a", Some("host-b:7")),
            agent("b", None),
            agent("c", Some("host-c:9")),
            agent("d", Some("host-b:7")),
        ];
        let hosts = hosts(&agents);
        assert_eq!(hosts.len(), 2);
        assert_eq!(hosts[0].holder, "host-b:7");
        assert_eq!(hosts[0].agents, ["a", "d"]);
        assert_eq!(hosts[1].agents, ["c"]);
    }

    #[test]
    fn a_failing_check_of_any_process_is_named_with_where_it_runs() {
        let well = |service| Health::of(service, 0, Vec::new(), BTreeMap::new());
        let mut host = well(Service::Host);
        host.checks.push(l3m_wire::health::Check {
            name: "waking".into(),
            ok: false,
            detail: "no such binary".into(),
        });
        let status = Status {
            hub: "main".into(),
            hubd: well(Service::Hubd),
            processes: vec![well(Service::Postman), host.clone()],
            hosts: Vec::new(),
            stuck: BTreeMap::new(),
            postman: None,
        };
        assert_eq!(
            failing(&status),
            [format!("host@{}:{} waking", host.host, host.pid)]
        );
    }

    #[test]
    fn uptime_reads_at_a_glance() {
        assert_eq!(uptime(12_400), "12s");
        assert_eq!(uptime(185_000), "3m05s");
        assert_eq!(uptime(3_725_000), "1h02m");
    }
}
