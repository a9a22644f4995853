//! The demo's reviewed shell call: an agent granted `wild = ["shell"]` proposes a shell command,
//! a reviewer of another model family deliberates (unclear at round 1, safe at round 2, after
//! a better justification), and the approved call runs in the bubblewrap sandbox with its
//! result journaled.
//!
//! The proposer is the demo's scripted model (family `scripted`); the reviewer is the real
//! `reviewer` library asking an OpenAI-compatible model, which here is a local server on
//! loopback answering scripted verdicts, so the families differ as `[review]` requires. With
//! the human's own model configured, or without bubblewrap, this part is skipped and says why:
//! a canned reviewer must never judge what a real model proposes.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::post;
use l3m_core::grant::{Grant, WildClass};
use l3m_core::log::{Record, RecordBody, Verdict};
use l3m_core::review::{ReviewConfig, split_justification};
use l3m_wire::bus::Bus;
use l3m_wire::client::HubClient;
use l3m_wire::subjects::{HubId, Subjects};
use tokio_util::sync::CancellationToken;

use super::credentials::Seen;
use super::{assign, name, runtime, until_turn_end};
use crate::error::CliError;

/// The agent whose shell call is reviewed.
pub const AGENT: &str = "tidy";

/// The grant it is spawned with: its workspace, and the sandboxed shell.
const GRANT: &str = "files = [\"workspace\"]\nwild = [\"shell\"]";

/// What the reviewer's model answers, round by round.
const VERDICTS: [&str; 2] = [
    r#"{"verdict": "unclear", "reason": "why does the task need a new file in workspace/?"}"#,
    r#"{"verdict": "safe"}"#,
];

/// What the shell call writes, in the agent's workspace.
const MADE: &str = "workspace/lines.txt";

/// Adds the sandboxed shell to the demo root's bound, so `tidy` may be granted it.
pub fn widen(grant: &mut Grant) -> Result<(), CliError> {
    grant
        .wild
        .insert(WildClass::parse("shell").map_err(runtime)?);
    Ok(())
}

/// The demo's reviewer, serving on the hub's bus, or why this part is skipped.
pub enum Reviewing {
    /// The local model server and the reviewer run until `stop`.
    Running {
        /// Stops both.
        stop: CancellationToken,
    },
    /// This part is not shown; the reason is printed.
    Skipped(String),
}

impl Reviewing {
    /// Starts the scripted reviewer on `bus` and gives `config` its `[review]` table; with the
    /// human's own model (`scripted` false) or without bubblewrap it starts nothing.
    pub async fn start(
        bus: Arc<dyn Bus>,
        hub: &HubId,
        config: &mut sequencer::Config,
        scripted: bool,
    ) -> Result<Reviewing, CliError> {
        if !scripted {
            return Ok(Reviewing::Skipped(
                "the reviewed shell call is shown only with the scripted model: its reviewer \
                 answers from a script, and must not judge what your own model proposes"
                    .into(),
            ));
        }
        let bwrap = crate::stack::binaries::install_hint("bwrap");
        if let Err(e) = crate::stack::binaries::find("bwrap", bwrap) {
            return Ok(Reviewing::Skipped(format!(
                "the reviewed shell call needs bubblewrap for its sandbox: {e}"
            )));
        }
        let stop = CancellationToken::new();
        let base_url = serve_verdicts(stop.clone()).await?;
        let model: sequencer::model::ModelConfig = toml::from_str(&format!(
            "dialect = \"openai\"\nmodel = \"demo-reviewer\"\nbase_url = \"{base_url}\"\nmax_retries = 0"
        ))
        .map_err(runtime)?;
        let provider = sequencer::model::build(&model, &|_| None).map_err(runtime)?;
        let reviewer = reviewer::Reviewer::new(provider, "demo-reviewer".into(), 512, false)
            .map_err(runtime)?;
        let subjects = Subjects::new(hub.clone());
        let token = stop.clone();
        tokio::spawn(async move {
            if let Err(error) =
                reviewer::serve(bus.as_ref(), &subjects, Arc::new(reviewer), token).await
            {
                tracing::warn!(%error, "the demo's reviewer stopped");
            }
        });
        config.review = Some(ReviewConfig {
            model: "demo-reviewer".into(),
            rounds: 2,
            same_family: false,
            timeout_secs: 30,
        });
        Ok(Reviewing::Running { stop })
    }

    /// Stops the reviewer and its model server.
    pub fn stop(&self) {
        if let Reviewing::Running { stop } = self {
            stop.cancel();
        }
    }
}

/// Serves the scripted verdicts on loopback as an OpenAI-compatible chat server (streamed, as
/// the dialect asks); returns its base URL.
async fn serve_verdicts(stop: CancellationToken) -> Result<String, CliError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| runtime(format!("the demo's reviewer model cannot listen: {e}")))?;
    let addr = listener.local_addr().map_err(runtime)?;
    let queue = Arc::new(Mutex::new(VecDeque::from(VERDICTS)));
    let app = Router::new()
        .route("/v1/chat/completions", post(answer))
        .with_state(queue);
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
        if let Err(error) = served {
            tracing::warn!(%error, "the demo's reviewer model stopped");
        }
    });
    Ok(format!("http://{addr}"))
}

/// One streamed chat completion carrying the next scripted verdict (an empty text once they
/// run out, which the reviewer refuses as garbage: never a default approval).
async fn answer(State(queue): State<Arc<Mutex<VecDeque<&'static str>>>>) -> impl IntoResponse {
    let text = queue
        .lock()
        .map(|mut q| q.pop_front().unwrap_or_default())
        .unwrap_or_default();
    let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
        let body = serde_json::json!({
            "id": "demo", "object": "chat.completion.chunk", "created": 0, "model": "demo-reviewer",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
        });
        format!("data: {body}\n\n")
    };
    let body = [
        chunk(
            serde_json::json!({"role": "assistant", "content": text}),
            serde_json::Value::Null,
        ),
        chunk(serde_json::json!({}), serde_json::json!("stop")),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    ([(header::CONTENT_TYPE, "text/event-stream")], body)
}

/// Spawns `tidy` with its task, waits until its turn ends, and checks what the Log shows: two
/// review rounds (unclear, then safe), the call run in the sandbox and its result journaled.
pub async fn step(
    me: &HubClient,
    reviewing: &Reviewing,
    root: &std::path::Path,
    within: Duration,
) -> Result<Seen, CliError> {
    if let Reviewing::Skipped(why) = reviewing {
        return Ok(Seen {
            checks: Vec::new(),
            text: format!("\nreviewed shell call: skipped, {why}\n"),
        });
    }
    let tidy = name(AGENT)?;
    assign(
        me,
        &tidy,
        GRANT,
        async || Ok(()),
        "Write workspace/lines.txt with three lines and tell me how many lines it has.",
    )
    .await?;
    let log = until_turn_end(me, &tidy, "reviewed shell call", within).await?;
    let made = std::fs::read_to_string(root.join(l3m_core::refs::paths::acr(&tidy)).join(MADE))
        .unwrap_or_default();
    Ok(judge(&log, &made))
}

/// The checks and the report of `tidy`'s Log, with `made` the file its command wrote.
fn judge(log: &[Record], made: &str) -> Seen {
    let rounds: Vec<(u32, u32, &Verdict, &str)> = log
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::Review {
                round,
                of,
                verdict,
                by,
                ..
            } => Some((*round, *of, verdict, by.as_str())),
            _ => None,
        })
        .collect();
    let deliberated = matches!(
        rounds.as_slice(),
        [(1, 2, Verdict::Unclear { .. }, _), (2, 2, Verdict::Safe, _)]
    );
    let ran = log.iter().find_map(|r| match &r.body {
        RecordBody::ToolResult {
            output,
            is_error: false,
            ..
        } if output.starts_with("exit 0") => Some(output.as_str()),
        _ => None,
    });
    let mut text = format!(
        "\nreviewed shell call: {AGENT} (granted wild = [\"shell\"], a scripted model) proposed a \
         shell command; a reviewer of another family (an OpenAI-compatible model on a local \
         scripted server) deliberated:\n"
    );
    for record in log {
        let RecordBody::Review {
            call,
            round,
            of,
            verdict,
            by,
            ..
        } = &record.body
        else {
            continue;
        };
        let proposed = log.iter().find_map(|r| match &r.body {
            RecordBody::AssistantReply { tool_uses, .. } => {
                tool_uses.iter().find(|u| u.id == *call)
            }
            _ => None,
        });
        let justification = proposed
            .and_then(|u| split_justification(&u.input).ok())
            .map_or_else(String::new, |(text, _)| text);
        text.push_str(&format!(
            "  round {round} of {of}: {AGENT} justified it: {justification:?}\n    {by} answered: {}\n",
            verdict_text(verdict)
        ));
    }
    text.push_str(&format!(
        "  the command's result, as journaled: {}\n",
        ran.map_or("(it did not run)".to_owned(), |out| out
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect::<Vec<_>>()
            .join(" | "))
    ));
    Seen {
        checks: vec![
            (
                "the shell call was deliberated: unclear at round 1, safe at round 2",
                deliberated,
            ),
            (
                "the approved shell call ran in the sandbox and its result was journaled",
                ran.is_some_and(|out| out.contains("3 lines.txt")) && made == "one\ntwo\nthree\n",
            ),
        ],
        text,
    }
}

/// A verdict as a person would say it.
fn verdict_text(verdict: &Verdict) -> String {
    match verdict {
        Verdict::Safe => "safe; the call ran in the sandbox".to_owned(),
        Verdict::Unsafe {
            reason,
            alternative,
        } => match alternative {
            Some(alternative) => format!("unsafe: {reason}; instead: {alternative}"),
            None => format!("unsafe: {reason}"),
        },
        Verdict::Unclear { reason } => format!(
            "unclear: {}",
            reason.as_deref().unwrap_or("no reason given")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use l3m_core::log::ToolUseId;
    use l3m_core::review::ReviewSpent;

    fn record(seq: u64, body: RecordBody) -> Record {
        Record {
            seq,
            at_ms: 0,
            body,
        }
    }

    fn review(seq: u64, round: u32, verdict: Verdict) -> Record {
        record(
            seq,
            RecordBody::Review {
                call: ToolUseId::new(format!("u{round}")).unwrap(),
                round,
                of: 2,
                verdict,
                by: "reviewer".into(),
                spent: ReviewSpent::default(),
            },
        )
    }

    fn result(seq: u64, output: &str) -> Record {
        record(
            seq,
            RecordBody::ToolResult {
                id: ToolUseId::new("u2").unwrap(),
                output: output.into(),
                is_error: false,
                effects: vec![],
                refusal: None,
            },
        )
    }

    #[test]
    fn the_checks_hold_only_for_a_deliberated_call_that_ran() {
        let unclear = Verdict::Unclear {
            reason: Some("why?".into()),
        };
        let good = vec![
            review(0, 1, unclear.clone()),
            review(1, 2, Verdict::Safe),
            result(2, "exit 0\n3 lines.txt\n"),
        ];
        let seen = judge(&good, "one\ntwo\nthree\n");
        assert!(seen.checks.iter().all(|(_, ok)| *ok), "{:?}", seen.checks);
        assert!(seen.text.contains("3 lines.txt"), "{}", seen.text);
        // Approved at once: not the deliberation the demo shows.
        let once = vec![
            review(0, 1, Verdict::Safe),
            result(1, "exit 0\n3 lines.txt\n"),
        ];
        assert!(!judge(&once, "one\ntwo\nthree\n").checks[0].1);
        // Deliberated, but the command never ran (or wrote something else).
        let unrun = vec![review(0, 1, unclear), review(1, 2, Verdict::Safe)];
        assert!(!judge(&unrun, "").checks[1].1);
        assert!(!judge(&good, "one\n").checks[1].1);
    }
}
