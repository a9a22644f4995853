//! One warm evaluator serves a program's calls: the same process answers call after call, no
//! call sees what another left, and a call that does not end cleanly (its deadline, the heap
//! limit, an error) leaves no process behind, so the next call gets a fresh one.

#![allow(clippy::unwrap_used)] // a fixture that cannot be set up is a failed test

mod common;

use std::path::Path;
use std::time::Duration;

use common::Session;
use l3m_programs::limits::SERVED_CALLS;
use l3m_programs::process::exchange;
use l3m_programs::protocol::{FromChild, RunRequest};
use l3m_programs::{Rule, host::ProgramTool};
use l3m_tools::ToolError;
use serde_json::{Value, json};

/// A program that echoes its input, or spins past its deadline, or blows its heap, as asked
/// (the sizes come from the input: a constant one would be folded, and stopped, at load).
const MOODS: &str = r#"
FOOTPRINT = ["fs-read"]
DESCRIPTION = "Echo, spin or bomb, as asked."
INPUT = {"type": "object"}

def main(input):
    if input.get("spin"):
        return max(range(input["spin"]))
    if input.get("bomb"):
        return len("x" * input["bomb"])
    if input.get("fail"):
        fail("asked to fail")
    return {"echo": input.get("say"), "text": fs_read("workspace/a.txt")}
"#;

fn moods(s: &Session) -> ProgramTool {
    std::fs::write(s.hub.ws("a.txt"), "hello").unwrap();
    s.admit("moods", MOODS).unwrap()
}

fn echo(s: &Session, tool: &ProgramTool, say: &str) -> String {
    s.call(tool, json!({"say": say})).unwrap().text
}

/// The rule a failed call names.
fn rule(err: ToolError) -> String {
    match err {
        ToolError::Program { rule, .. } => rule,
        other => panic!("not a program stop: {other}"),
    }
}

/// Whether the processes of `procs` (a [`common::tree`], its root first) are gone: the root killed and
/// reaped, no zombie left; each process below it (inside the sandbox, reaped by the system's
/// init once the sandbox falls) dead within a few seconds.
fn gone(procs: &[u32]) -> bool {
    let dead = |p: &u32| {
        std::fs::read_to_string(format!("/proc/{p}/stat")).map_or(true, |stat| {
            stat.rfind(')')
                .and_then(|at| stat[at + 1..].split_whitespace().next().map(|s| s == "Z"))
                .unwrap_or(false)
        })
    };
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while !procs[1..].iter().all(dead) && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    !Path::new(&format!("/proc/{}", procs[0])).exists() && procs[1..].iter().all(dead)
}

#[test]
fn two_calls_of_one_tool_are_served_by_one_evaluator() {
    let s = Session::new();
    let tool = moods(&s);
    assert_eq!(
        tool.evaluator_pid(),
        None,
        "started lazily, at the first call"
    );
    assert_eq!(echo(&s, &tool, "one"), r#"{"echo":"one","text":"hello"}"#);
    let pid = tool.evaluator_pid().unwrap();
    let procs = common::tree(pid);
    assert!(
        procs.len() > 1,
        "the evaluator runs inside bubblewrap: {procs:?}"
    );
    assert_eq!(echo(&s, &tool, "two"), r#"{"echo":"two","text":"hello"}"#);
    assert_eq!(tool.evaluator_pid(), Some(pid));
    let clone = tool.clone();
    echo(&s, &clone, "three");
    assert_eq!(
        clone.evaluator_pid(),
        Some(pid),
        "clones share the evaluator"
    );
    drop(tool);
    drop(clone);
    assert!(
        gone(&procs),
        "dropping the tool kills and reaps its evaluator"
    );
}

#[test]
fn after_a_call_killed_at_its_deadline_the_next_call_gets_a_fresh_evaluator() {
    let s = Session::new();
    let tool = moods(&s);
    echo(&s, &tool, "before");
    let first = tool.evaluator_pid().unwrap();
    let procs = common::tree(first);
    let err = s.call(&tool, json!({"spin": 2_000_000_000})).unwrap_err();
    assert_eq!(rule(err), Rule::Deadline.name());
    assert_eq!(tool.evaluator_pid(), None);
    assert!(gone(&procs), "the killed evaluator was reaped");
    assert_eq!(
        echo(&s, &tool, "after"),
        r#"{"echo":"after","text":"hello"}"#
    );
    assert_ne!(tool.evaluator_pid(), Some(first));
}

#[test]
fn after_a_call_stopped_by_the_heap_limit_the_next_call_gets_a_fresh_evaluator() {
    let s = Session::new();
    let tool = moods(&s);
    echo(&s, &tool, "before");
    let first = tool.evaluator_pid().unwrap();
    let procs = common::tree(first);
    let err = s.call(&tool, json!({"bomb": 200_000_000})).unwrap_err();
    assert_eq!(rule(err), Rule::Memory.name());
    assert_eq!(tool.evaluator_pid(), None);
    assert!(gone(&procs));
    echo(&s, &tool, "after");
    assert!(tool.evaluator_pid().is_some_and(|p| p != first));
}

#[test]
fn a_call_that_failed_leaves_no_evaluator_and_the_next_one_runs() {
    let s = Session::new();
    let tool = moods(&s);
    echo(&s, &tool, "before");
    let err = s.call(&tool, json!({"fail": true})).unwrap_err();
    assert_eq!(rule(err), Rule::Runtime.name());
    assert_eq!(
        tool.evaluator_pid(),
        None,
        "a failed call's evaluator is retired"
    );
    echo(&s, &tool, "after");
}

#[test]
fn no_call_sees_state_another_left() {
    let s = Session::new();
    let keeps = r#"
FOOTPRINT = []
DESCRIPTION = "Try to remember."
INPUT = {"type": "object"}
SEEN = []
COUNT = {"n": 0}

def main(input):
    if input.get("count"):
        COUNT["n"] += 1
        return COUNT["n"]
    SEEN.append(input["say"])
    return SEEN
"#;
    let tool = s.admit("keeps", keeps).unwrap();
    for input in [
        json!({"say": "a"}),
        json!({"say": "b"}),
        json!({"count": true}),
        json!({"count": true}),
    ] {
        let err = s.call(&tool, input).unwrap_err();
        let ToolError::Program { rule, detail, .. } = err else {
            panic!("not a program stop: {err}");
        };
        assert_eq!(rule, Rule::Runtime.name(), "{detail}");
        assert!(detail.contains("mmutable"), "{detail}");
    }
    // Values made in one call are that call's: a second call builds its own from scratch.
    let fresh = r#"
FOOTPRINT = []
DESCRIPTION = "Build a list."
INPUT = {"type": "object"}
BASE = ["base"]

def main(input):
    out = list(BASE)
    out.append(input["say"])
    return out
"#;
    let tool = s.admit("fresh", fresh).unwrap();
    let a = s.call(&tool, json!({"say": "a"})).unwrap().text;
    let pid = tool.evaluator_pid();
    let b = s.call(&tool, json!({"say": "b"})).unwrap().text;
    assert_eq!(
        (a.as_str(), b.as_str()),
        (r#"["base","a"]"#, r#"["base","b"]"#)
    );
    assert_eq!(tool.evaluator_pid(), pid);
}

#[test]
fn an_evaluator_is_retired_after_its_served_calls() {
    let s = Session::new();
    let tool = moods(&s);
    echo(&s, &tool, "0");
    let first = tool.evaluator_pid().unwrap();
    let procs = common::tree(first);
    for i in 1..SERVED_CALLS - 1 {
        echo(&s, &tool, &i.to_string());
    }
    assert_eq!(tool.evaluator_pid(), Some(first));
    echo(&s, &tool, "last");
    assert_eq!(
        tool.evaluator_pid(),
        None,
        "retired after {SERVED_CALLS} calls"
    );
    assert!(gone(&procs));
    echo(&s, &tool, "next");
    assert!(tool.evaluator_pid().is_some_and(|p| p != first));
}

/// CPU time the process `pid` and those below it (the evaluator inside its sandbox) have
/// used, from each one's `/proc/<pid>/schedstat`.
fn cpu_time(pid: u32) -> Duration {
    common::tree(pid)
        .into_iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/schedstat")).ok())
        .map(|stat| Duration::from_nanos(stat.split_whitespace().next().unwrap().parse().unwrap()))
        .sum()
}

#[test]
fn each_call_has_its_own_cpu_limit_however_much_earlier_calls_used() {
    let s = Session::new();
    let burn = r#"
FOOTPRINT = []
DESCRIPTION = "Burn CPU without statements."
INPUT = {"type": "object"}

def main(input):
    return len([1 for a in range(input["n"]) if a < 0])
"#;
    let mut evaluator = common::evaluator();
    evaluator.limits.cpu_secs = 1;
    evaluator.deadline = Duration::from_secs(20);
    let file = "agent/programs/burn.star";
    let decl = l3m_programs::host::check_source(&evaluator, file, burn).unwrap();
    let tool = ProgramTool::new(decl, file.into(), burn, evaluator);
    // Grow the work until one call uses a tenth of the limit or more, then call until the one
    // evaluator has used well over the limit in all.
    let mut n = 50_000u64;
    s.call(&tool, json!({"n": 0})).unwrap();
    let pid = tool.evaluator_pid().unwrap();
    loop {
        let before = cpu_time(pid);
        s.call(&tool, json!({"n": n})).unwrap();
        if cpu_time(pid) - before >= Duration::from_millis(100) {
            break;
        }
        n *= 2;
    }
    while cpu_time(pid) < Duration::from_millis(2500) {
        let out = s.call(&tool, json!({"n": n})).unwrap();
        assert_eq!(out.text, "0");
        assert_eq!(tool.evaluator_pid(), Some(pid), "the same evaluator");
    }
}

#[test]
fn the_one_shot_run_mode_still_answers() {
    let source = "FOOTPRINT = []\nDESCRIPTION = \"d\"\nINPUT = {\"type\": \"object\"}\n\
                  def main(input):\n    return input[\"x\"] + 1\n";
    let file = "agent/programs/inc.star";
    let request = RunRequest {
        file: file.into(),
        source: source.into(),
        input: json!({"x": 41}),
        steps: 100,
    };
    let last = exchange(&common::evaluator(), "run", file, &request).unwrap();
    assert_eq!(
        last,
        FromChild::Done {
            result: Ok(Value::from(42))
        }
    );
}

#[test]
fn a_result_longer_than_one_read_arrives_whole() {
    let s = Session::new();
    let long = "FOOTPRINT = []\nDESCRIPTION = \"d\"\nINPUT = {\"type\": \"object\"}\n\
                def main(input):\n    return \"ab\" * input[\"n\"]\n";
    let tool = s.admit("long", long).unwrap();
    for n in [100_000, 3, 70_000] {
        let out = s.call(&tool, json!({ "n": n })).unwrap();
        assert_eq!(out.text, "ab".repeat(n));
    }
}
