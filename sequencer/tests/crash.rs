//! Kill -9 at random points: the `sequencer` binary runs a long scripted session and is killed
//! with SIGKILL again and again, restarted each time, until the session finishes.
//!
//! Kill points: `L3M_CRASH_POINTS` in total across sessions (default 24, so the test stays near
//! a minute in CI; run with `L3M_CRASH_POINTS=200` for the full check). `L3M_CRASH_SEED`
//! fixes the random delays.
//!
//! What "the same final view" means here: interrupts leave their traces in the view (a closed
//! tool use shows an "interrupted" result, a restart shows a harness notice, budget narration
//! repeats), so the views are not equal text for text. What is equal is the conversation the
//! *model* produced: the sequence of assistant messages in the final view — each one's text and
//! its tool uses' names and inputs — is exactly the uninterrupted run's. (Tool-use ids differ,
//! because they derive from call ids, which derive from seqs.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::*;
use l3m_core::log::Record;
use l3m_core::view::{Message, view};

const TURNS: usize = 24;

fn script() -> String {
    let mut s = String::new();
    for i in 0..TURNS {
        s.push_str(&format!("[[turn]]\ntext = \"step {i}\"\ndelay_ms = 30\n"));
        if i % 2 == 0 {
            s.push_str(&format!(
                "[[turn.tool_use]]\nname = \"write_file\"\ninput = {{ path = \"workspace/f{i}.txt\", content = \"{i}\" }}\n"
            ));
        }
        s.push_str("[[turn.tool_use]]\nname = \"now\"\n");
    }
    s.push_str("[[turn]]\ntext = \"end\"\ndelay_ms = 30\n");
    s
}

/// xorshift64*, seeded per run: enough to scatter kill points.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// The model's side of the final view: each assistant message's text and tool names/inputs.
fn model_side(records: &[Record]) -> Vec<(String, Vec<(String, serde_json::Value)>)> {
    view(records)
        .messages
        .into_iter()
        .filter_map(|m| match m {
            Message::Assistant { text, tool_uses } => Some((
                text,
                tool_uses.into_iter().map(|u| (u.name, u.input)).collect(),
            )),
            Message::User { .. } => None,
        })
        .collect()
}

fn finished(log: &[Record]) -> bool {
    assistant_texts(log).last().map(String::as_str) == Some("end")
        && matches!(
            log.last().map(|r| &r.body),
            Some(l3m_core::log::RecordBody::TurnEnd)
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_random_points_never_breaks_the_log() {
    let points: u64 = l3m_wire::test_support::env_number("L3M_CRASH_POINTS", 24);
    let seed = std::env::var("L3M_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("crash test: {points} kill points, seed {seed}");
    let mut rng = Rng(seed);
    let hub = TestHub::start().await;
    let dir = hub.dir.path();
    std::fs::write(dir.join("script.toml"), script()).unwrap();
    let config = dir.join("l3m.toml");
    std::fs::write(
        &config,
        "default_model = \"s\"\n[models.s]\ndialect = \"scripted\"\nmodel = \"s\"\nscript = \"script.toml\"\n\
         [sequencer]\nlease_ttl_secs = 0.5\nidle_exit_secs = 1\nretry_backoff_ms = 1\n",
    )
    .unwrap();

    // The uninterrupted run.
    hub.spawn("reference", 1000).await;
    hub.letter("reference", "go").await;
    let status = launch_sequencer(&hub, &config, "reference").wait().unwrap();
    assert!(status.success(), "{status}");
    let reference = hub.log("reference").await;
    check_log(&reference);
    assert!(finished(&reference), "{:?}", kinds(&reference));
    let expected = model_side(&reference);
    assert_eq!(expected.len(), TURNS + 1);

    let mut kills = 0u64;
    let mut session = 0;
    let started = Instant::now();
    while kills < points {
        session += 1;
        let name = format!("crash{session}");
        hub.spawn(&name, 1000).await;
        hub.letter(&name, "go").await;
        let mut runs = 0;
        loop {
            if finished(&hub.log(&name).await) {
                break;
            }
            runs += 1;
            assert!(runs < 2000, "session {name} never finished");
            let mut child = launch_sequencer(&hub, &config, &name);
            let delay = Duration::from_millis(rng.next() % 250);
            tokio::time::sleep(delay).await;
            match child.try_wait().unwrap() {
                Some(status) if status.code() == Some(3) => {
                    // The killed run's lease has not lapsed yet; try again shortly.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                Some(status) => assert!(status.success(), "{name}: {status}"),
                None => {
                    child.kill().unwrap();
                    child.wait().unwrap();
                    kills += 1;
                }
            }
        }
        let log = hub.log(&name).await;
        check_log(&log);
        assert_eq!(
            model_side(&log),
            expected,
            "{name}: the model's side of the view differs from the uninterrupted run"
        );
        let restarts = log
            .iter()
            .filter(|r| matches!(&r.body, l3m_core::log::RecordBody::Interrupted { .. }))
            .count();
        eprintln!(
            "{name}: finished after {runs} runs, {} records, {restarts} interrupts closed at boot",
            log.len()
        );
    }
    eprintln!(
        "crash test: {kills} SIGKILLs over {session} sessions in {:?}",
        started.elapsed()
    );
}
