//! The agent hierarchy, drawn with box characters, from hubd's flat list.

use std::collections::BTreeMap;

use l3m_core::log::Record;
use l3m_wire::hubd::tree::{AgentLife, AgentState};

use super::escape::Foreign;

/// How many of an agent's last records [`stuck`] reads.
pub const TAIL: u64 = 32;

/// A life as one word.
pub fn life(life: AgentLife) -> &'static str {
    match life {
        AgentLife::Running => "running",
        AgentLife::Asleep => "asleep",
        AgentLife::Retired => "retired",
        AgentLife::Collected => "collected",
    }
}

/// Why `agent` is not working and what would unstick it, read from the tail of its Log by
/// [`l3m_core::stuck`]: `<why>; <what to do>`. `None` when its last turn ended normally.
pub fn stuck(agent: &str, tail: &[Record]) -> Option<String> {
    let stuck = l3m_core::stuck::stuck(tail)?;
    Some(format!("{}; {}", stuck.why(), stuck.remedy(agent)))
}

/// One agent's label: its last segment, its life, who holds it when running, or, in place of
/// `asleep`, `stuck: <why>; <what to do>` when it is stuck.
fn label(agent: &AgentState, why: Option<&String>) -> String {
    let leaf = agent.name.rsplit('/').next().unwrap_or(&agent.name);
    let leaf = Foreign(leaf);
    match (&agent.holder, why) {
        (Some(holder), _) => format!("{leaf}  {} ({})", life(agent.life), Foreign(holder)),
        (None, Some(why)) if agent.life == AgentLife::Asleep => {
            format!("{leaf}  stuck: {}", Foreign(why))
        }
        (None, _) => format!("{leaf}  {}", life(agent.life)),
    }
}

/// Draws the tree: every agent whose parent is not itself listed as an agent is a root (under
/// its human); children follow their parent in name order. `why` says, by agent name, why an
/// agent is stuck.
pub fn draw(agents: &[AgentState], why: &BTreeMap<String, String>) -> String {
    let is_agent = |name: &str| agents.iter().any(|a| a.name == name);
    let mut out = String::new();
    let roots: Vec<&AgentState> = agents.iter().filter(|a| !is_agent(&a.parent)).collect();
    let mut humans: Vec<&str> = roots.iter().map(|a| a.parent.as_str()).collect();
    humans.dedup();
    for human in humans {
        out.push_str(&format!("{}\n", Foreign(human)));
        let mine: Vec<&AgentState> = roots
            .iter()
            .copied()
            .filter(|a| a.parent == human)
            .collect();
        draw_level(agents, why, &mine, "", &mut out);
    }
    out
}

fn draw_level(
    all: &[AgentState],
    why: &BTreeMap<String, String>,
    level: &[&AgentState],
    prefix: &str,
    out: &mut String,
) {
    for (i, agent) in level.iter().enumerate() {
        let last = i + 1 == level.len();
        out.push_str(&format!(
            "{prefix}{}{}\n",
            if last { "└── " } else { "├── " },
            label(agent, why.get(&agent.name))
        ));
        let children: Vec<&AgentState> = all.iter().filter(|a| a.parent == agent.name).collect();
        let deeper = format!("{prefix}{}", if last { "    " } else { "│   " });
        draw_level(all, why, &children, &deeper, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use l3m_core::log::RecordBody;

    fn agent(name: &str, parent: &str, life: AgentLife) -> AgentState {
        AgentState {
            name: name.into(),
            parent: parent.into(),
            life,
            holder: None,
            driven: false,
        }
    }

    #[test]
    fn a_tree_of_three_draws_nested() {
        let agents = vec![
            agent("demo", "human:alice", AgentLife::Asleep),
            agent("demo/a", "demo", AgentLife::Retired),
            agent("demo/b", "demo", AgentLife::Asleep),
            agent("other", "human:alice", AgentLife::Asleep),
        ];
        assert_eq!(
            draw(&agents, &BTreeMap::new()),
            "human:alice\n├── demo  asleep\n│   ├── a  retired\n│   └── b  asleep\n└── other  asleep\n"
        );
        let why = [("other".to_owned(), "out of fuel".to_owned())].into();
        assert!(draw(&agents, &why).ends_with("└── other  stuck: out of fuel\n"));
        let hostile = [("other".to_owned(), "bad\x1b[2J\nfake".to_owned())].into();
        assert!(draw(&agents, &hostile).ends_with("└── other  stuck: bad^[[2J^Jfake\n"));
    }

    fn rec(seq: u64, body: RecordBody) -> Record {
        Record {
            seq,
            at_ms: 0,
            body,
        }
    }

    #[test]
    fn a_failed_last_call_or_spent_fuel_is_why_an_agent_is_stuck() {
        let call = l3m_core::log::CallId::new("c1").unwrap();
        let failed = rec(
            4,
            RecordBody::CallFailed {
                call,
                error: "x".repeat(500),
                retryable: false,
            },
        );
        let why = stuck("demo", &[rec(3, RecordBody::TurnEnd), failed.clone()]).unwrap();
        assert!(
            why.starts_with("its last model call failed (record 4): xxx"),
            "{why}"
        );
        assert!(why.contains("…; ") && why.contains("l3m say demo"), "{why}");
        // The turn-end that closes the failed call does not hide it.
        let closed = stuck("demo", &[failed, rec(5, RecordBody::TurnEnd)]).unwrap();
        assert!(closed.starts_with("its last model call failed (record 4)"));
        let replied = rec(
            6,
            RecordBody::UserLine {
                from: l3m_core::names::Entity::parse("human:alice").unwrap(),
                text: "again".into(),
            },
        );
        assert_eq!(stuck("demo", &[replied]), None);
        let out = rec(
            6,
            RecordBody::OutOfFuel {
                unit: l3m_core::log::FuelUnit::ModelCalls,
            },
        );
        assert!(stuck("demo", &[out]).unwrap().starts_with("out of fuel"));
        assert_eq!(stuck("demo", &[]), None);
    }
}
