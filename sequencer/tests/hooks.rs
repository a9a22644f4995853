//! An agent's hook decides its events at boot, in the evaluator process: a letter it dismisses
//! never reaches the model, one it shows does, a proposal the event does not admit and a hook
//! that fails fall back to the default with the rule narrated, and every decision is in the
//! Log — which a replay reads without the hook: deleting `agent/hooks.star` and booting again
//! decides nothing anew: the decisions are the Log's, and the dismissed letter stays unseen.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use l3m_core::log::{Disposition, EventId, EventSource, Record, RecordBody};

const HOOK: &str = r#"
def on_event(event):
    if event["kind"] != "letter":
        return "show"
    if "newsletter" in event["text"]:
        return "dismiss"
    if "answer me" in event["text"]:
        return {"kind": "reply", "text": "on it"}
    if "crash" in event["text"]:
        return 1 // 0
    if "pass it on" in event["text"]:
        return {"kind": "forward", "to": "demo/helper"}
    return "show"
"#;

const SCRIPT: &str = r#"
[[turn]]
text = "read"
[[turn]]
text = "read again"
[[turn]]
text = "and again"
"#;

/// Each letter's text and the disposition journaled for it, in Log order.
fn letter_decisions(log: &[Record]) -> Vec<(String, Disposition)> {
    let letters: Vec<(EventId, String)> = log
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::Event {
                id,
                source: EventSource::Letter { .. },
                text,
            } => Some((id.clone(), text.clone())),
            _ => None,
        })
        .collect();
    letters
        .into_iter()
        .map(|(id, text)| {
            let decided = log.iter().find_map(|r| match &r.body {
                RecordBody::HookDecision { event, disposition } if *event == id => {
                    Some(disposition.clone())
                }
                _ => None,
            });
            (
                text,
                decided.unwrap_or_else(|| panic!("{id} was never decided")),
            )
        })
        .collect()
}

fn notices(log: &[Record]) -> Vec<String> {
    log.iter()
        .filter_map(|r| match &r.body {
            RecordBody::Event {
                source: EventSource::Notice,
                text,
                ..
            } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// A hub with agent `demo` whose persona holds `hook` as `agent/hooks.star`, `letters` in
/// its inbox, and the configuration that finds the evaluator.
async fn hooked(hook: &str, letters: &[&str]) -> (TestHub, sequencer::Config) {
    let hub = TestHub::start_bound("files = [\"workspace\", \"agent\"]\nspawn = \"persist\"").await;
    hub.spawn_with("demo", 10, "files = [\"workspace\", \"agent\"]")
        .await;
    std::fs::write(hub.acr("demo").join("agent/hooks.star"), hook).unwrap();
    for body in letters {
        hub.letter("demo", body).await;
    }
    let config = config(&format!(
        "idle_exit_secs = 2\nprogram_evaluator = {:?}",
        evaluator().display().to_string()
    ));
    (hub, config)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_dismisses_one_letter_shows_another_and_replay_needs_no_hook() {
    let (hub, config) = hooked(
        HOOK,
        &[
            "the weekly newsletter",
            "hello, please look at the build",
            "answer me",
            "crash",
            "pass it on",
        ],
    )
    .await;
    let acr = hub.acr("demo");
    let log = hub.run_idle("demo", config.clone(), SCRIPT).await;
    check_log(&log);
    let decided = letter_decisions(&log);
    assert_eq!(
        decided,
        [
            ("the weekly newsletter".to_owned(), Disposition::Dismiss),
            (
                "hello, please look at the build".to_owned(),
                Disposition::Show
            ),
            // The sender is a human the agent's mail token does not reach: the reply is
            // refused and the letter shown.
            ("answer me".to_owned(), Disposition::Show),
            ("crash".to_owned(), Disposition::Show),
            // Admitted by the event (the helper's name is in the agent's subtree) and
            // journaled; carrying it out fails, since no such agent lives, and says so.
            (
                "pass it on".to_owned(),
                Disposition::Forward {
                    to: l3m_core::names::Entity::Agent(agent("demo/helper"))
                }
            ),
        ]
    );
    let told = notices(&log);
    assert!(
        told.iter()
            .any(|t| t.contains("reply") && t.contains("rule not-reached")),
        "{told:#?}"
    );
    assert!(
        told.iter()
            .any(|t| t.contains("your hook failed") && t.contains("rule runtime")),
        "{told:#?}"
    );
    let noted = log.iter().any(|r| {
        matches!(&r.body, RecordBody::Event { text, .. }
            if text.contains("journaled but not carried out") && text.contains("demo/helper"))
    });
    assert!(noted, "{:#?}", kinds(&log));
    let seen = serde_json::to_string(&l3m_core::view::view(&log)).unwrap();
    assert!(seen.contains("please look at the build"), "{seen}");
    assert!(
        !seen.contains("newsletter"),
        "the dismissed letter reached the model: {seen}"
    );

    // Replay: the hook is gone, the Log is read, nothing is decided again.
    std::fs::remove_file(acr.join("agent/hooks.star")).unwrap();
    let decisions_before = kinds(&log)
        .iter()
        .filter(|k| **k == "hook-decision")
        .count();
    let replayed = hub.run_idle("demo", config, SCRIPT).await;
    check_log(&replayed);
    assert_eq!(letter_decisions(&replayed), decided);
    assert_eq!(
        kinds(&replayed)
            .iter()
            .filter(|k| **k == "hook-decision")
            .count(),
        decisions_before,
        "a replay decided events again"
    );
    let replayed_view = serde_json::to_string(&l3m_core::view::view(&replayed)).unwrap();
    assert!(!replayed_view.contains("newsletter"), "{replayed_view}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_that_tries_an_effect_is_absent_and_the_agent_is_told_where() {
    let hook =
        "def on_event(event):\n    mail_send(\"demo\", event[\"text\"])\n    return \"dismiss\"\n";
    let (hub, config) = hooked(hook, &["hello"]).await;
    let log = hub.run_idle("demo", config, SCRIPT).await;
    assert_eq!(
        letter_decisions(&log),
        [("hello".to_owned(), Disposition::Show)]
    );
    let told = notices(&log);
    assert!(
        told.iter()
            .any(|t| t.contains("agent/hooks.star:2") && t.contains("no-effect")),
        "{told:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_past_its_deadline_is_killed_and_its_events_get_the_default() {
    // `pass` runs no counted statement: only the deadline (or the CPU limit) stops this.
    let hook = "def on_event(event):\n    for a in range(1000000000):\n        for b in range(1000000000):\n            pass\n    return \"dismiss\"\n";
    let (hub, config) = hooked(hook, &["hello"]).await;
    let log = hub.run_idle("demo", config, SCRIPT).await;
    check_log(&log);
    assert_eq!(
        letter_decisions(&log),
        [("hello".to_owned(), Disposition::Show)]
    );
    let told = notices(&log);
    assert!(
        told.iter()
            .any(|t| t.contains("your hook failed") && t.contains("rule deadline")),
        "{told:#?}"
    );
}

/// A hook's reply and forward are carried out under the agent's own session once the decision
/// is journaled: the reply reaches the sender marked as a reply to its letter (so the sender's
/// own hook may never answer it automatically), the forward carries the letter's text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hooks_reply_and_forward_are_carried_out_and_a_reply_is_marked_as_one() {
    let bound = "files = [\"workspace\", \"agent\"]\nspawn = \"persist\"";
    let hub = TestHub::start_bound(bound).await;
    hub.spawn_with("demo", 10, bound).await;
    std::fs::write(hub.acr("demo").join("agent/hooks.star"), HOOK).unwrap();
    let demo = hub.sequencer_client("demo").await;
    demo.spawn(l3m_core::grant::SpawnRequest::new(
        agent("demo/helper"),
        l3m_core::grant::Grant::default(),
    ))
    .await
    .unwrap();
    let helper = hub.sequencer_client("demo/helper").await;
    let to_demo = l3m_core::mail::Address::for_agent(agent("demo")).render();
    let asked = helper
        .send_letter(&to_demo, None, "answer me")
        .await
        .unwrap();
    hub.letter("demo", "pass it on: the build is green").await;
    let config = config(&format!(
        "idle_exit_secs = 2\nprogram_evaluator = {:?}",
        evaluator().display().to_string()
    ));
    let log = hub.run_idle("demo", config, SCRIPT).await;
    check_log(&log);
    let inbox = hub
        .human()
        .await
        .read_inbox(&agent("demo/helper"), 0)
        .await
        .unwrap();
    let letters: Vec<l3m_core::mail::Letter> = inbox
        .entries
        .into_iter()
        .filter_map(|e| match e {
            l3m_core::mail::InboxEntry::Letter(l) => Some(*l),
            _ => None,
        })
        .collect();
    let reply = letters.iter().find(|l| l.body == "on it").unwrap();
    assert_eq!(
        reply.in_reply_to.as_ref().map(|id| id.as_str()),
        Some(asked.letter.as_str())
    );
    assert!(
        reply.from.render().contains("demo"),
        "{}",
        reply.from.render()
    );
    let forwarded = letters
        .iter()
        .find(|l| l.subject.as_deref() == Some("forwarded"))
        .unwrap();
    assert!(
        forwarded.body.contains("the build is green"),
        "{}",
        forwarded.body
    );
    assert!(forwarded.in_reply_to.is_none());
    // The reply is a reply: the helper's own hook could not answer it automatically.
    let source = EventSource::Letter {
        letter_id: reply.id.to_string(),
        from: l3m_core::names::Entity::Agent(agent("demo")),
        in_reply_to: reply.in_reply_to.as_ref().map(ToString::to_string),
    };
    let mail = l3m_core::grant::default_mail(&agent("demo/helper"));
    let cx = l3m_core::hooks::HookContext {
        agent: &agent("demo/helper"),
        mail: &mail,
        programs: &Default::default(),
        carries: l3m_core::hooks::CARRIED,
    };
    let again = Disposition::Reply {
        text: "thanks".into(),
    };
    assert_eq!(
        l3m_core::hooks::admit(&cx, &source, &again)
            .unwrap_err()
            .rule(),
        "reply-to-reply"
    );
}

/// A hook that defers letters asking to be filed to the program `note`, a letter asking to be
/// sent nowhere to a program the agent does not have, and tries to defer `note`'s completion
/// again.
const DEFERRING: &str = r#"
def on_event(event):
    if event["kind"] == "program-done":
        return {"kind": "defer", "program": event["program"]}
    if event["kind"] != "letter":
        return "show"
    if "slowly" in event["text"]:
        return {"kind": "defer", "program": "slow"}
    if "file this" in event["text"]:
        return {"kind": "defer", "program": "note"}
    if "nowhere" in event["text"]:
        return {"kind": "defer", "program": "absent"}
    return "show"
"#;

/// Files the event's text as `workspace/note-<n>.txt`, `n` the notes already there: a second
/// run would leave a second note.
const NOTE: &str = r#"FOOTPRINT = ["fs-read", "fs-write"]
DESCRIPTION = "File an event's text as a note in the workspace."
INPUT = {"type": "object", "properties": {"event": {"type": "object"}}, "required": ["event"]}

def main(input):
    n = len([e for e in fs_list("workspace") if e["name"].startswith("note-")])
    fs_write("workspace/note-" + str(n) + ".txt", input["event"]["text"])
    return {"filed": "note-" + str(n) + ".txt"}
"#;

/// `NOTE`, then a loop only its deadline stops: killed, it leaves its note and no result.
fn slow() -> String {
    NOTE.replace(
        "    return {\"filed\"",
        "    for a in range(1000000000):\n        for b in range(1000000000):\n            pass\n    return {\"filed\"",
    )
}

/// The notes the deferred programs filed in `demo`'s workspace, by name.
fn notes(hub: &TestHub) -> Vec<(String, String)> {
    let ws = hub.acr("demo").join("workspace");
    let mut found: Vec<(String, String)> = std::fs::read_dir(&ws)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("note-"))
        .map(|n| {
            let text = std::fs::read_to_string(ws.join(&n)).unwrap();
            (n, text)
        })
        .collect();
    found.sort();
    found
}

/// What the Log says of each defer: the decision's seq, the harness's `tool-call` and
/// `tool-result` for it (name; output and whether it failed, with the undo ids it names), the
/// completion event's text and the disposition journaled for that event.
#[derive(Debug)]
struct Deferred {
    decision: u64,
    called: Option<String>,
    result: Option<(String, bool, Vec<String>)>,
    done: Option<String>,
    done_decided: Option<Disposition>,
}

fn defers(log: &[Record]) -> Vec<Deferred> {
    log.iter()
        .filter(|r| {
            matches!(
                &r.body,
                RecordBody::HookDecision {
                    disposition: Disposition::Defer { .. },
                    ..
                }
            )
        })
        .map(|r| {
            let run = format!("l3m-defer-{}", r.seq);
            let done = format!("program-done-{}", r.seq);
            Deferred {
                decision: r.seq,
                called: log.iter().find_map(|r| match &r.body {
                    RecordBody::ToolCall { id, name, .. } if id.as_str() == run => {
                        Some(name.clone())
                    }
                    _ => None,
                }),
                result: log.iter().find_map(|r| match &r.body {
                    RecordBody::ToolResult {
                        id,
                        output,
                        is_error,
                        effects,
                        ..
                    } if id.as_str() == run => Some((
                        output.clone(),
                        *is_error,
                        effects.iter().filter_map(|e| e.undo.clone()).collect(),
                    )),
                    _ => None,
                }),
                done: log.iter().find_map(|r| match &r.body {
                    RecordBody::Event {
                        id,
                        source: EventSource::ProgramDone { .. },
                        text,
                    } if id.as_str() == done => Some(text.clone()),
                    _ => None,
                }),
                done_decided: log.iter().find_map(|r| match &r.body {
                    RecordBody::HookDecision { event, disposition } if event.as_str() == done => {
                        Some(disposition.clone())
                    }
                    _ => None,
                }),
            }
        })
        .collect()
}

/// A hook defers a letter to the agent's program, which files a note (a tame edit): the Log
/// holds the decision, the harness's call of `program_note` with its result naming the undo
/// entry, and the `program-done` event, which the hook then decides (its try to defer it again
/// is refused, `defer-again`, and the default, close, journaled). A defer to a program the
/// agent lacks is refused (`unknown-program`) and the letter shown. Replay, with the hook and
/// the program deleted, decides and runs nothing again; a rewind to before the decision
/// removes the note.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_program_runs_once_its_edit_is_undone_by_a_rewind_and_replay_reruns_nothing() {
    let (hub, config) = hooked(DEFERRING, &["file this: buy milk", "send it nowhere"]).await;
    let acr = hub.acr("demo");
    std::fs::create_dir_all(acr.join("agent/programs")).unwrap();
    std::fs::write(acr.join("agent/programs/note.star"), NOTE).unwrap();
    let log = hub.run_idle("demo", config.clone(), SCRIPT).await;
    check_log(&log);
    assert_eq!(
        letter_decisions(&log),
        [
            (
                "file this: buy milk".to_owned(),
                Disposition::Defer {
                    program: "note".into()
                }
            ),
            ("send it nowhere".to_owned(), Disposition::Show),
        ]
    );
    assert_eq!(
        notes(&hub),
        [("note-0.txt".to_owned(), "file this: buy milk".to_owned())]
    );
    let deferred = defers(&log);
    assert_eq!(deferred.len(), 1, "{deferred:#?}");
    let d = &deferred[0];
    assert_eq!(d.called.as_deref(), Some("program_note"), "{d:#?}");
    let (output, failed, undo) = d.result.clone().unwrap();
    assert!(!failed && output.contains("note-0.txt"), "{d:#?}");
    assert_eq!(undo.len(), 1, "the note's undo entry is named: {d:#?}");
    assert!(d.done.as_deref().unwrap().starts_with("ok: "), "{d:#?}");
    assert_eq!(d.done_decided, Some(Disposition::Close), "{d:#?}");
    let told = notices(&log);
    assert!(
        told.iter()
            .any(|t| t.contains("program-done") && t.contains("rule defer-again")),
        "{told:#?}"
    );
    assert!(
        told.iter().any(|t| t.contains("rule unknown-program")),
        "{told:#?}"
    );
    let seen = serde_json::to_string(&l3m_core::view::view(&log)).unwrap();
    assert!(
        !seen.contains("buy milk"),
        "the deferred letter was shown: {seen}"
    );

    // Replay: hook and program gone, the Log is read; nothing is decided or run again.
    std::fs::remove_file(acr.join("agent/hooks.star")).unwrap();
    std::fs::remove_file(acr.join("agent/programs/note.star")).unwrap();
    let replayed = hub.run_idle("demo", config, SCRIPT).await;
    check_log(&replayed);
    assert_eq!(letter_decisions(&replayed), letter_decisions(&log));
    let count = |l: &[Record], kind: &str| kinds(l).iter().filter(|k| **k == kind).count();
    for kind in ["hook-decision", "tool-call", "tool-result", "event"] {
        assert_eq!(count(&replayed, kind), count(&log, kind), "{kind} records");
    }
    assert_eq!(notes(&hub).len(), 1);

    // Undo attribution: a rewind to just before the decision removes the note.
    let client = hub.sequencer_client("demo").await;
    sequencer::rewind_offline(
        &client,
        &hub.forest(),
        &agent("demo"),
        d.decision - 1,
        "test",
    )
    .await
    .unwrap();
    assert_eq!(notes(&hub), []);
}

/// A sequencer SIGKILLed after the deferred program made its edit and before its completion
/// was journaled: the next boot journals the completion as failed and never runs the program
/// again (one note, not two), and the hook decides that completion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_defer_a_killed_sequencer_left_open_is_closed_at_boot_and_never_run_twice() {
    let (hub, config) = hooked(DEFERRING, &["file this slowly"]).await;
    let acr = hub.acr("demo");
    std::fs::create_dir_all(acr.join("agent/programs")).unwrap();
    std::fs::write(acr.join("agent/programs/slow.star"), slow()).unwrap();
    let dir = hub.dir.path();
    std::fs::write(dir.join("script.toml"), SCRIPT).unwrap();
    let file = dir.join("l3m.toml");
    std::fs::write(
        &file,
        format!(
            "default_model = \"s\"\n[models.s]\ndialect = \"scripted\"\nmodel = \"s\"\n\
             script = \"script.toml\"\n[sequencer]\nlease_ttl_secs = 0.5\nidle_exit_secs = 2\n\
             program_deadline_secs = 30\nprogram_evaluator = {:?}\n",
            evaluator().display().to_string()
        ),
    )
    .unwrap();
    let mut child = launch_sequencer(&hub, &file, "demo");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while notes(&hub).is_empty() {
        assert!(std::time::Instant::now() < deadline, "the note never came");
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "the sequencer ended ({status}): {:?}",
                kinds(&hub.log("demo").await)
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = hub.log("demo").await;
    let open = defers(&killed);
    assert_eq!(open.len(), 1, "{:?}", kinds(&killed));
    assert!(
        open[0].result.is_none() && open[0].done.is_none(),
        "{open:#?}"
    );

    // The killed run's lease lapses; the next boot closes the defer.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let log = hub.run_idle("demo", config, SCRIPT).await;
    check_log(&log);
    let closed = defers(&log);
    assert_eq!(closed.len(), 1, "{closed:#?}");
    let d = &closed[0];
    let (output, failed, undo) = d.result.clone().unwrap();
    assert!(failed && output.contains("not run again"), "{d:#?}");
    assert!(undo.is_empty(), "{d:#?}");
    assert!(d.done.as_deref().unwrap().starts_with("failed: "), "{d:#?}");
    assert_eq!(d.done_decided, Some(Disposition::Close), "{d:#?}");
    assert_eq!(
        notes(&hub),
        [("note-0.txt".to_owned(), "file this slowly".to_owned())],
        "the program ran again"
    );
}
