//! `l3m stats`'s table of each agent's calls, tokens and tools, as core folds them
//! ([`l3m_core::stats::fold`]).

use std::collections::BTreeMap;

pub use l3m_core::stats::{AgentStats, ToolStats, fold};

use super::escape::Foreign;

/// The stats of several agents as a table.
pub fn table(agents: &BTreeMap<String, AgentStats>) -> String {
    let mut out = format!(
        "{:<28} {:>6} {:>6} {:>10} {:>10}\n",
        "agent", "calls", "failed", "tokens-in", "tokens-out"
    );
    for (name, s) in agents {
        let name = Foreign(name);
        out.push_str(&format!(
            "{name:<28} {:>6} {:>6} {:>10} {:>10}\n",
            s.model_calls, s.failed_calls, s.tokens_in, s.tokens_out
        ));
    }
    let any_tools = agents.values().any(|s| !s.tools.is_empty());
    if any_tools {
        out.push_str(&format!(
            "\n{:<28} {:<16} {:>5} {:>6} {:>9} {:>8}  {}\n",
            "agent", "tool", "uses", "errors", "mean-ms", "max-ms", "refused-by"
        ));
        for (name, s) in agents {
            let name = Foreign(name);
            for (tool, t) in &s.tools {
                let tool = Foreign(tool);
                let mean = t.mean_ms().map_or("-".to_owned(), |m| m.to_string());
                let refused: Vec<String> = t
                    .refused
                    .iter()
                    .map(|(boundary, n)| format!("{}×{n}", Foreign(boundary)))
                    .collect();
                out.push_str(&format!(
                    "{name:<28} {tool:<16} {:>5} {:>6} {:>9} {:>8}  {}\n",
                    t.uses,
                    t.errors,
                    mean,
                    t.max_ms,
                    refused.join(" ")
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_listed_by_boundary_beside_each_tool() {
        let tool = ToolStats {
            uses: 4,
            errors: 4,
            refused: BTreeMap::from([("host".into(), 2), ("hub".into(), 1)]),
            ..ToolStats::default()
        };
        let stats = AgentStats {
            tools: BTreeMap::from([("(unknown)".into(), tool)]),
            ..AgentStats::default()
        };
        assert!(table(&BTreeMap::from([("a".into(), stats)])).contains("host×2 hub×1"));
    }
}
