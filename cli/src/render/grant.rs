//! A grant axis by axis, and a budget account, for `l3m grant show`.

use l3m_core::budget::{Account, Fuel};
use l3m_core::grant::Grant;

use super::escape::Foreign;

/// Each axis's name and what it confers, in the grant's own order (`(none)` for nothing).
pub fn axes(grant: &Grant) -> Vec<(String, String)> {
    let value = serde_json::to_value(grant).unwrap_or(serde_json::Value::Null);
    let Some(map) = value.as_object() else {
        return Vec::new();
    };
    let order = [
        "files",
        "git-read",
        "git-write",
        "git-push",
        "net",
        "mail",
        "spawn",
        "airmail",
        "postman",
        "wild",
        "build",
        "run",
        "review",
        "lifetime",
    ];
    order
        .iter()
        .filter_map(|axis| Some((axis.to_string(), describe(map.get(*axis)?))))
        .collect()
}

fn describe(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Array(items) if items.is_empty() => "(none)".into(),
        Value::Array(items) => items.iter().map(describe).collect::<Vec<_>>().join(", "),
        Value::Object(map) if map.is_empty() => "(none)".into(),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| format!("{k}: {}", describe(v)))
            .collect::<Vec<_>>()
            .join("; "),
        Value::Bool(true) => "yes".into(),
        Value::Bool(false) => "no".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What an agent has left: hubd's account (which does not see the agent's own spend) less what
/// its Log spent — the same sum its sequencer budgets by.
pub fn left(account: &Account, spent: Fuel) -> Fuel {
    let left = account.left();
    Fuel {
        model_calls: left.model_calls.saturating_sub(spent.model_calls),
        bytes: left.bytes.saturating_sub(spent.bytes),
        wakes: left.wakes,
    }
}

/// The account as `(row, model-calls, bytes, wakes)` rows, with `spent` as the agent's Log
/// folds it.
pub fn account_rows(account: &Account, spent: Fuel) -> Vec<(&'static str, [u64; 3])> {
    let row = |f: Fuel| [f.model_calls, f.bytes, f.wakes];
    vec![
        ("loan", row(account.loan())),
        ("spent", row(spent)),
        ("lent out", row(account.lent_out())),
        ("left", row(left(account, spent))),
    ]
}

/// The grant and account as text.
pub fn render(agent: &str, grant: &Grant, account: &Account, spent: Fuel) -> String {
    let mut out = format!("grant of {}\n", Foreign(agent));
    for (axis, what) in axes(grant) {
        out.push_str(&format!("  {axis:<10} {}\n", Foreign(&what)));
    }
    out.push_str(&format!(
        "account\n  {:<10} {:>11} {:>12} {:>6}\n",
        "", "model-calls", "bytes", "wakes"
    ));
    for (name, [calls, bytes, wakes]) in account_rows(account, spent) {
        out.push_str(&format!(
            "  {name:<10} {calls:>11} {bytes:>12} {wakes:>6}\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_axis_is_listed_and_empty_ones_say_so() {
        let grant: Grant = toml::from_str("files = [\"workspace\"]\nspawn = \"drive\"\n").unwrap();
        let axes = axes(&grant);
        assert_eq!(axes.len(), 14, "{axes:?}");
        assert_eq!(axes[0], ("files".into(), "workspace".into()));
        assert!(axes.contains(&("spawn".into(), "drive".into())));
        assert!(axes.contains(&("net".into(), "(none)".into())));
        assert!(axes.contains(&("build".into(), "no".into())));
    }
}
