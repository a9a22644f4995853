//! `[models.<label>]` tables: what builds, what is refused and why, and the fallback chain the
//! sequencer picks a model from per attempt.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns are test code too

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use common::{
    Answer, RecordingPause, Server, anthropic_stream, openai_stream, sample_request, tuning,
};
use l3m_models::{ModelChain, ModelConfig, ModelError, build, build_tuned};

fn table(text: &str) -> ModelConfig {
    toml::from_str(text).unwrap()
}

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

#[tokio::test]
async fn a_table_builds_a_provider_that_reads_its_key_through_the_lookup() {
    let server = Server::start(vec![
        Answer::sse(anthropic_stream(&["a"], None)),
        Answer::sse(openai_stream(&["b"], None)),
    ])
    .await;
    let lookup = env(&[("MY_KEY", "sk-from-map")]);
    let config = table(&format!(
        "dialect = \"anthropic\"\nmodel = \"claude-test\"\nbase_url = \"{}\"\napi_key_env = \"MY_KEY\"\ntimeout_secs = 30\n",
        server.base_url
    ));
    let provider = build_tuned(
        &config,
        &lookup,
        tuning(Arc::new(RecordingPause::default())),
    )
    .unwrap();
    assert_eq!(provider.name(), "anthropic");
    provider
        .complete(&sample_request("claude-test"))
        .await
        .unwrap();

    let config = table(&format!(
        "dialect = \"openai\"\nmodel = \"local\"\nbase_url = \"{}/v1/\"\n",
        server.base_url
    ));
    let provider = build(&config, &env(&[("OPENAI_API_KEY", "sk-must-not-leak")])).unwrap();
    assert_eq!(provider.name(), "openai");
    provider.complete(&sample_request("local")).await.unwrap();

    let received = server.received();
    assert_eq!(received[0].header("x-api-key"), Some("sk-from-map"));
    assert_eq!(received[1].path, "/v1/chat/completions");
    assert_eq!(
        received[1].header("authorization"),
        None,
        "a local server named by base_url alone gets no key"
    );
}

#[test]
fn bad_tables_are_refused_naming_what_is_wrong() {
    let no_env = |_: &str| None;
    let cases = [
        (
            "dialect = \"anthropic\"\nmodel = \"m\"\n",
            "ANTHROPIC_API_KEY",
        ),
        (
            "dialect = \"anthropic\"\nmodel = \"m\"\napi_key_env = \"OTHER\"\n",
            "OTHER",
        ),
        ("dialect = \"openai\"\nmodel = \"m\"\n", "OPENAI_API_KEY"),
        (
            "dialect = \"openai\"\nmodel = \"m\"\nbase_url = \"not a url\"\n",
            "not a URL",
        ),
        (
            "dialect = \"openai\"\nmodel = \"\"\nbase_url = \"http://h\"\n",
            "model is empty",
        ),
        (
            "dialect = \"openai\"\nmodel = \"m\"\nbase_url = \"http://h\"\ntimeout_secs = 0\n",
            "timeout_secs is 0",
        ),
        (
            "dialect = \"openai\"\nmodel = \"m\"\nbase_url = \"http://h\"\nscript = \"s.toml\"\n",
            "only for the scripted",
        ),
        (
            "dialect = \"scripted\"\nmodel = \"m\"\nscript = \"s.toml\"\nbase_url = \"http://h\"\n",
            "mean nothing",
        ),
    ];
    for (text, mentions) in cases {
        let error = build(&table(text), &no_env).unwrap_err();
        assert!(
            matches!(error, ModelError::Config { .. }),
            "{text}: {error:?}"
        );
        assert!(error.to_string().contains(mentions), "{text}: {error}");
    }
    let unknown =
        toml::from_str::<ModelConfig>("dialect = \"openai\"\nmodel = \"m\"\nbase_ur = \"x\"\n")
            .unwrap_err();
    assert!(unknown.to_string().contains("base_ur"));
    let bad_dialect =
        toml::from_str::<ModelConfig>("dialect = \"gemini\"\nmodel = \"m\"\n").unwrap_err();
    assert!(bad_dialect.to_string().contains("gemini"));
}

fn models(text: &str) -> BTreeMap<String, ModelConfig> {
    #[derive(serde::Deserialize)]
    struct File {
        models: BTreeMap<String, ModelConfig>,
    }
    toml::from_str::<File>(text).unwrap().models
}

const TABLES: &str = r#"
[models.main]
dialect = "anthropic"
model = "claude-test"
base_url = "http://127.0.0.1:9"
notes = "main notes"
fallback = "backup"

[models.backup]
dialect = "openai"
model = "gpt-test"
base_url = "http://127.0.0.1:9"
notes = "backup notes"
max_tokens = 512
"#;

#[test]
fn attempt_one_uses_the_primary_and_later_attempts_the_fallback_with_its_own_notes() {
    let lookup = env(&[("ANTHROPIC_API_KEY", "k")]);
    let chain = ModelChain::from_config(&models(TABLES), "main", |_, c| build(c, &lookup)).unwrap();
    let labels: Vec<&str> = chain.entries().iter().map(|e| e.label.as_str()).collect();
    assert_eq!(labels, ["main", "backup"]);
    let (provider, model, notes) = chain.for_attempt(1);
    assert_eq!(
        (provider.name(), model, notes),
        ("anthropic", "claude-test", Some("main notes"))
    );
    for attempt in [2, 3, 100] {
        let (provider, model, notes) = chain.for_attempt(attempt);
        assert_eq!(
            (provider.name(), model, notes),
            ("openai", "gpt-test", Some("backup notes"))
        );
    }
    assert_eq!(chain.entry_for_attempt(2).max_tokens, 512);
    assert_eq!(chain.entry_for_attempt(1).max_tokens, 8192);

    let alone =
        ModelChain::from_config(&models(TABLES), "backup", |_, c| build(c, &lookup)).unwrap();
    assert_eq!(
        alone.for_attempt(5).1,
        "gpt-test",
        "with no fallback every attempt uses the primary"
    );
}

#[test]
fn a_chain_with_an_unknown_label_a_cycle_or_a_bad_table_is_refused() {
    let lookup = env(&[("ANTHROPIC_API_KEY", "k")]);
    let make = |text: &str, primary: &str| {
        ModelChain::from_config(&models(text), primary, |_, c| build(c, &lookup))
            .unwrap_err()
            .to_string()
    };
    assert!(make(TABLES, "nope").contains("no [models.nope] table"));
    let cycle = TABLES.replace("max_tokens = 512", "fallback = \"main\"");
    assert!(make(&cycle, "main").contains("returns to \"main\""));
    let no_key = TABLES.replace(
        "base_url = \"http://127.0.0.1:9\"\nnotes = \"backup",
        "notes = \"backup",
    );
    let error = make(&no_key, "main");
    assert!(
        error.contains("[models.backup]") && error.contains("OPENAI_API_KEY"),
        "{error}"
    );
}

#[test]
fn relative_script_paths_resolve_against_the_config_directory() {
    let mut config = table("dialect = \"scripted\"\nmodel = \"m\"\nscript = \"demo/s.toml\"\n");
    config.resolve_paths(std::path::Path::new("/etc/l3m"));
    assert_eq!(
        config.script.as_deref(),
        Some(std::path::Path::new("/etc/l3m/demo/s.toml"))
    );
}

#[test]
fn a_tables_deadlines_and_retry_budget_override_the_base_tuning() {
    use std::time::Duration;
    let config = table(
        "dialect = \"openai\"\nmodel = \"m\"\ntimeout_secs = 7\nidle_timeout_secs = 3\nmax_retries = 1\n",
    );
    let base = tuning(Arc::new(RecordingPause::default()));
    let tuned = config.tuning(base.clone()).unwrap();
    assert_eq!(
        (tuned.timeout, tuned.idle_timeout, tuned.max_retries),
        (Duration::from_secs(7), Duration::from_secs(3), 1)
    );
    assert_eq!(
        tuned.backoff, base.backoff,
        "what the table does not say stays"
    );
    let silent = table("dialect = \"openai\"\nmodel = \"m\"\n")
        .tuning(base.clone())
        .unwrap();
    assert_eq!(
        (silent.timeout, silent.idle_timeout, silent.max_retries),
        (base.timeout, base.idle_timeout, base.max_retries)
    );
}
