//! Rewind through the sequencer undoes tame git actions with the files: an agent writes,
//! commits, edits and commits; rewinding to each point leaves files, index and branch as they
//! were there, the dry run forecasts exactly that, a branch a human moved refuses the rewind with
//! nothing changed, and a push is reported as not undone.

#![allow(clippy::unwrap_used)] // helpers drive a real hub; a step that cannot run is a failed test

mod common;

use common::*;
use l3m_core::effects::EffectClass;
use l3m_core::log::{EffectNote, RecordBody};
use std::time::Duration;

use l3m_wire::control::{self, ControlReply, ControlRequest, Forecast, Target};
use sequencer::control::forecast;
use sequencer::{Exit, SequencerError, run_agent};
use tokio_util::sync::CancellationToken;

const GIT_GRANT: &str = r#"
files = ["workspace"]
git-read = ["refs/heads/l3m/"]
git-write = ["refs/heads/l3m/"]
"#;

/// The first two turns of every script here: write `todo.md`, commit it.
fn write_and_commit() -> String {
    write_todo("write", "one") + &commit("commit", "add todo")
}

/// Then edit and commit again.
fn edit_commit() -> String {
    write_todo("edit", "two") + &commit("commit again", "edit todo") + DONE
}

/// What a rewind must put back in the workspace.
#[derive(Debug, PartialEq, Eq)]
struct Workspace {
    todo: Option<Vec<u8>>,
    branch: String,
    status: String,
}

fn workspace(hub: &TestHub) -> Workspace {
    let ws = hub.acr("demo").join("workspace");
    Workspace {
        todo: read(&ws.join("todo.md")),
        branch: git(&ws, &["rev-parse", "HEAD"]).trim().to_owned(),
        status: git(&ws, &["status", "--porcelain"]),
    }
}

/// Runs the agent through its script to its turn end; returns the Log.
async fn run_script(hub: &TestHub, script: &str) -> Vec<l3m_core::log::Record> {
    hub.letter("demo", "go").await;
    let shutdown = CancellationToken::new();
    let provider = counting(script, Duration::ZERO);
    let run = hub.run("demo", config(""), factory_of(provider)).await;
    let task = tokio::spawn(run_agent(run, shutdown.clone()));
    wait_log(hub, "demo", 30, |l| {
        matches!(l.last().map(|r| &r.body), Some(RecordBody::TurnEnd))
    })
    .await;
    shutdown.cancel();
    assert_eq!(task.await.unwrap().unwrap(), Exit::Shutdown);
    hub.log("demo").await
}

async fn dry_run(hub: &TestHub, to: u64) -> Result<Forecast, SequencerError> {
    let client = hub.sequencer_client("demo").await;
    let grant = client.read_grant(&agent("demo")).await.unwrap();
    forecast(&client, &hub.forest(), &agent("demo"), &grant, to).await
}

async fn rewind(hub: &TestHub, to: u64) -> Result<(), SequencerError> {
    let client = hub.sequencer_client("demo").await;
    sequencer::rewind_offline(&client, &hub.forest(), &agent("demo"), to, "test").await
}

fn last_notice(log: &[l3m_core::log::Record]) -> String {
    log.iter()
        .rev()
        .find_map(|r| match &r.body {
            RecordBody::Event { text, .. } if text.starts_with("rewind to") => Some(text.clone()),
            _ => None,
        })
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_to_each_point_restores_files_index_and_branch() {
    let hub = TestHub::start_bound(GIT_GRANT).await;
    hub.spawn_with("demo", 20, GIT_GRANT).await;
    let start = workspace(&hub);
    let log = run_script(&hub, &(write_and_commit() + &edit_commit())).await;
    let results: Vec<u64> = log
        .iter()
        .filter(|r| matches!(r.body, RecordBody::ToolResult { .. }))
        .map(|r| r.seq)
        .collect();
    assert_eq!(results.len(), 4, "{:?}", kinds(&log));
    let first_start = log
        .iter()
        .find(|r| matches!(r.body, RecordBody::ToolStarted { .. }))
        .unwrap()
        .seq;
    let ws = hub.acr("demo").join("workspace");
    let commits: Vec<String> = git(&ws, &["log", "--format=%H", "-3"])
        .lines()
        .map(str::to_owned)
        .collect();
    let (c2, c1, c0) = (&commits[0], &commits[1], &start.branch);
    assert_eq!(
        &commits[2], c0,
        "two commits on top of where the work began"
    );

    // The dry run forecasts the whole way back, changing nothing.
    let before = workspace(&hub);
    let all = dry_run(&hub, first_start - 1).await.unwrap();
    assert_eq!(
        (all.edits, all.paths.as_slice()),
        (2, &["workspace/todo.md".to_owned()][..])
    );
    assert_eq!(all.branches.len(), 1);
    assert_eq!(all.branches[0].to.as_ref(), Some(c0));
    assert!(all.not_undone.is_empty(), "{all:?}");
    assert_eq!(workspace(&hub), before);

    // Rewind to each point, newest first: files, index and branch as they were there.
    let expect = |todo: Option<&str>, branch: &String, status: &str| Workspace {
        todo: todo.map(|t| t.as_bytes().to_vec()),
        branch: branch.clone(),
        status: status.to_owned(),
    };
    let points = [
        (results[3], expect(Some("two"), c2, "")),
        (results[2], expect(Some("two"), c1, " M todo.md\n")),
        (results[1], expect(Some("one"), c1, "")),
        (results[0], expect(Some("one"), c0, "?? todo.md\n")),
        (first_start - 1, expect(None, c0, "")),
    ];
    for (to, want) in &points {
        let planned = dry_run(&hub, *to).await.unwrap();
        rewind(&hub, *to).await.unwrap();
        assert_eq!(&workspace(&hub), want, "rewound to {to}");
        let hub_branch = git(
            &hub.root().join("hub.git"),
            &["rev-parse", "refs/heads/l3m/demo/_/work"],
        );
        assert_eq!(
            hub_branch.trim(),
            want.branch,
            "the hub's branch follows the clone's"
        );
        let notice = last_notice(&hub.log("demo").await);
        assert_eq!(
            notice,
            planned.narrate(true),
            "the dry run forecast the rewind"
        );
        git(
            &hub.root().join("hub.git"),
            &["fsck", "--strict", "--no-dangling"],
        );
    }
    assert_eq!(
        all.narrate(false),
        format!(
            "rewind to {}: would restore 2 file edits of workspace/todo.md; \
             would move back 1 branch: refs/heads/l3m/demo/_/work to {}",
            first_start - 1,
            &c0[..12]
        )
    );

    // A human commits on the branch: a rewind across the agent's commits now refuses, changing
    // nothing, and says how to proceed.
    std::fs::write(ws.join("human.txt"), "mine\n").unwrap();
    git(&ws, &["add", "human.txt"]);
    git(
        &ws,
        &[
            "-c",
            "user.name=h",
            "-c",
            "user.email=h@x",
            "commit",
            "-q",
            "-m",
            "human",
        ],
    );
    let moved = workspace(&hub);
    let seqs = hub.log("demo").await.len();
    let err = rewind(&hub, results[0]).await.unwrap_err();
    assert!(matches!(err, SequencerError::Restore(_)), "{err}");
    assert!(
        err.to_string()
            .contains("git update-ref refs/heads/l3m/demo/_/work"),
        "{err}"
    );
    assert_eq!(workspace(&hub), moved);
    assert_eq!(hub.log("demo").await.len(), seqs, "nothing was journaled");

    // The running sequencer refuses the same rewind the same way, before journaling it.
    let shutdown = CancellationToken::new();
    let provider = counting("[[turn]]\ntext = \"idle\"\n", Duration::ZERO);
    let run = hub.run("demo", config(""), factory_of(provider)).await;
    let task = tokio::spawn(run_agent(run, shutdown.clone()));
    let human = hub.human().await;
    let request = ControlRequest::Rewind {
        to: results[0],
        reason: "test".into(),
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let reply = loop {
        match control::call(
            &human,
            Target::Sequencer,
            &agent("demo"),
            &request,
            Duration::from_secs(20),
        )
        .await
        {
            Ok(reply) => break reply,
            // Until the sequencer serves its control subjects, no one answers.
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert!(
        matches!(&reply, ControlReply::Refused { reason } if reason.contains("git update-ref")),
        "{reply:?}"
    );
    assert_eq!(workspace(&hub), moved);
    let after = hub.log("demo").await;
    assert!(
        !after[seqs..]
            .iter()
            .any(|r| matches!(r.body, RecordBody::Rewind { .. })),
        "no rewind was journaled: {:?}",
        kinds(&after[seqs..])
    );
    shutdown.cancel();
    assert_eq!(task.await.unwrap().unwrap(), Exit::Shutdown);
}

/// Then push.
const PUSH: &str = r#"
[[turn]]
text = "push"
[[turn.tool_use]]
name = "git_push"
input = { remote = "origin", branch = "refs/heads/l3m/demo/_/work" }
[[turn]]
text = "done"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewind_across_a_push_restores_the_branch_and_reports_the_push() {
    let granted = format!("{GIT_GRANT}[git-push]\norigin = [\"refs/heads/l3m/\"]\n");
    let hub = TestHub::start_bound(&granted).await;
    let remote = hub.root().join("remote.git");
    git(&hub.root(), &["init", "-q", "--bare", "remote.git"]);
    let human = hub.human().await;
    let settings = human.read_settings().await.unwrap();
    let text = format!(
        "{}[remotes]\norigin = \"file://{}\"\n",
        settings.text,
        remote.display()
    );
    human.update_settings(&text, &settings.tip).await.unwrap();
    hub.spawn_with("demo", 20, &granted).await;
    let start = workspace(&hub);
    let log = run_script(&hub, &(write_and_commit() + PUSH)).await;
    let work = "refs/heads/l3m/demo/_/work";
    let pushed = git(&remote, &["rev-parse", work]);
    assert_ne!(pushed.trim(), start.branch, "the commit was pushed");
    let first_start = log
        .iter()
        .find(|r| matches!(r.body, RecordBody::ToolStarted { .. }))
        .unwrap()
        .seq;

    let planned = dry_run(&hub, first_start - 1).await.unwrap();
    assert_eq!(
        planned.not_undone,
        [EffectNote {
            class: EffectClass::GitPush,
            target: format!("{work} to origin"),
            undo: None,
        }]
    );
    rewind(&hub, first_start - 1).await.unwrap();
    assert_eq!(
        workspace(&hub),
        start,
        "the local branch and files are back"
    );
    assert_eq!(
        git(&remote, &["rev-parse", work]),
        pushed,
        "the push is not undone"
    );
    let notice = last_notice(&hub.log("demo").await);
    assert!(
        notice.ends_with(&format!(
            "not undone (it left this host or cannot be taken back): git-push {work} to origin"
        )),
        "{notice}"
    );
}

/// An undo id in the Log that is not an undo chain id stops the forecast, naming it: a rewind never
/// skips an edit it was told to restore.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_undo_id_in_the_log_stops_the_rewind_naming_it() {
    let hub = TestHub::start_bound(GIT_GRANT).await;
    hub.spawn_with("demo", 20, GIT_GRANT).await;
    let client = hub.sequencer_client("demo").await;
    let start = l3m_core::log::Record {
        seq: 0,
        at_ms: 0,
        body: RecordBody::TurnEnd,
    };
    let result = l3m_core::log::Record {
        seq: 1,
        at_ms: 0,
        body: RecordBody::ToolResult {
            id: l3m_core::log::ToolUseId::new("t1").unwrap(),
            output: "wrote".into(),
            is_error: false,
            effects: vec![EffectNote {
                class: EffectClass::FsWrite,
                target: "workspace/x".into(),
                undo: Some("not-an-id".into()),
            }],
            refusal: None,
        },
    };
    client
        .append_log(&agent("demo"), None, &[start, result])
        .await
        .unwrap();
    let err = dry_run(&hub, 0).await;
    assert!(
        matches!(&err, Err(e) if e.to_string().contains("\"not-an-id\"")),
        "{err:?}"
    );
    // Rewinding to the record itself has nothing after it to undo, and is not refused.
    assert_eq!(dry_run(&hub, 1).await.unwrap().edits, 0);
}

/// The undo chain lives on the hub, not in the ACR: after the ACR and its clone are deleted and
/// fetched again from the hub, a rewind still restores the files and moves the branch back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewind_after_the_acr_was_deleted_and_rebuilt_restores_files_and_branch() {
    let hub = TestHub::start_bound(GIT_GRANT).await;
    hub.spawn_with("demo", 20, GIT_GRANT).await;
    let start = workspace(&hub);
    let script = write_and_commit() + &write_todo("edit", "two") + DONE;
    let log = run_script(&hub, &script).await;
    let first_start = log
        .iter()
        .find(|r| matches!(r.body, RecordBody::ToolStarted { .. }))
        .unwrap()
        .seq;

    // Delete the whole ACR and its clone, then fetch it again from the hub, as a new host would.
    let acr = hub.acr("demo");
    let hub_git = hub.root().join("hub.git");
    std::fs::remove_dir_all(&acr).unwrap();
    std::fs::remove_dir_all(hub.forest().join("demo/self.git")).unwrap();
    hub.ready_acr("demo").await;
    assert_eq!(read(&acr.join("workspace/todo.md")), Some(b"one".to_vec()));

    rewind(&hub, first_start - 1).await.unwrap();
    assert_eq!(
        workspace(&hub),
        start,
        "file gone, branch back where the work began"
    );
    git(&hub_git, &["fsck", "--strict", "--no-dangling"]);
}
