//! The agent hierarchy, drawn with box characters, from hubd's flat list.

use l3m_wire::hubd::tree::{AgentLife, AgentState};

/// A life as one word.
pub fn life(life: AgentLife) -> &'static str {
    match life {
        AgentLife::Running => "running",
        AgentLife::Asleep => "asleep",
        AgentLife::Retired => "retired",
        AgentLife::Collected => "collected",
    }
}

/// One agent's label: its last segment, its life, and who holds it when running.
fn label(agent: &AgentState) -> String {
    let leaf = agent.name.rsplit('/').next().unwrap_or(&agent.name);
    match &agent.holder {
        Some(holder) => format!("{leaf}  {} ({holder})", life(agent.life)),
        None => format!("{leaf}  {}", life(agent.life)),
    }
}

/// Draws the tree: every agent whose parent is not itself listed as an agent is a root (under
/// its human); children follow their parent in name order.
pub fn draw(agents: &[AgentState]) -> String {
    let is_agent = |name: &str| agents.iter().any(|a| a.name == name);
    let mut out = String::new();
    let roots: Vec<&AgentState> = agents.iter().filter(|a| !is_agent(&a.parent)).collect();
    let mut humans: Vec<&str> = roots.iter().map(|a| a.parent.as_str()).collect();
    humans.dedup();
    for human in humans {
        out.push_str(&format!("{human}\n"));
        let mine: Vec<&AgentState> = roots
            .iter()
            .copied()
            .filter(|a| a.parent == human)
            .collect();
        draw_level(agents, &mine, "", &mut out);
    }
    out
}

fn draw_level(all: &[AgentState], level: &[&AgentState], prefix: &str, out: &mut String) {
    for (i, agent) in level.iter().enumerate() {
        let last = i + 1 == level.len();
        out.push_str(&format!(
            "{prefix}{}{}\n",
            if last { "└── " } else { "├── " },
            label(agent)
        ));
        let children: Vec<&AgentState> = all.iter().filter(|a| a.parent == agent.name).collect();
        let deeper = format!("{prefix}{}", if last { "    " } else { "│   " });
        draw_level(all, &children, &deeper, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(name: &str, parent: &str, life: AgentLife) -> AgentState {
        AgentState {
            name: name.into(),
            parent: parent.into(),
            life,
            holder: None,
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
            draw(&agents),
            "human:alice\n├── demo  asleep\n│   ├── a  retired\n│   └── b  asleep\n└── other  asleep\n"
        );
    }
}
