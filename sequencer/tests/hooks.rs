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
    demo.spawn(l3m_core::grant::SpawnRequest {
        child: agent("demo/helper"),
        grant: l3m_core::grant::Grant::default(),
        loan: Default::default(),
        driven: false,
        persona: None,
        fork: None,
    })
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
