//! `l3m stats`'s economy table: tokens by kind, cache hits, compactions and narration per agent
//! and per subtree, as core folds them ([`l3m_core::stats::economy`]).

use std::collections::BTreeMap;

pub use l3m_core::stats::economy::{EconomyStats, fold, subtrees};

use super::escape::Foreign;

/// The economy of several agents, and of their subtrees, as a table.
pub fn table(agents: &BTreeMap<String, EconomyStats>) -> String {
    let mut out = format!(
        "\n{:<28} {:>10} {:>10} {:>10} {:>11} {:>9} {:>11} {:>9}\n",
        "economy",
        "input",
        "output",
        "cache-read",
        "cache-write",
        "cache-hit",
        "compactions",
        "narration"
    );
    let subtrees = subtrees(agents);
    let rows = agents
        .iter()
        .map(|(name, s)| (name.clone(), s))
        .chain(subtrees.iter().map(|(name, s)| (format!("{name}/**"), s)));
    for (name, s) in rows {
        let name = Foreign(&name);
        let share = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{:.1}%", v * 100.0));
        out.push_str(&format!(
            "{name:<28} {:>10} {:>10} {:>10} {:>11} {:>9} {:>11} {:>9}\n",
            s.input_tokens,
            s.output_tokens,
            s.cache_read_tokens,
            s.cache_write_tokens,
            share(s.cache_hit_share()),
            s.compactions,
            share(s.narration_share()),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_agent_and_each_subtree_has_a_row() {
        let one = EconomyStats {
            input_tokens: 10,
            cache_read_tokens: 30,
            ..EconomyStats::default()
        };
        let agents = BTreeMap::from([
            ("a".to_owned(), one.clone()),
            ("a/b".to_owned(), one.clone()),
            ("c".to_owned(), one),
        ]);
        let text = table(&agents);
        assert!(text.contains("a/**"), "{text}");
        assert!(!text.contains("c/**"), "{text}");
        assert!(text.contains("75.0%"), "{text}");
    }
}
