//! A hub outlet that records every call that reached it, in the form hubd would receive it.

use std::sync::Mutex;

use l3m_core::build::{ArtifactDigest, Blessing, Stage};
use l3m_core::grant::SpawnRequest;
use l3m_core::mail::Address;
use l3m_core::names::AgentName;
use l3m_core::vigil::Watch;

use crate::effects::{BuildAsk, Built, HubOutlet, OutletError, Ran, StageError};

/// Records letters as `letter to <address> | <subject> | <body>` and spawns as
/// `spawn <child> driven=<bool> loan=<model calls> grant=<grant JSON> | <task>`. Letters are
/// accepted (id `l-<n>`); spawns are accepted, or all answered with the refusal set by
/// [`Recorder::refusing_spawns`]. Builds and runs are recorded as `build <source>` and
/// `run <digest>` and answered as a builder that is not running would be; no target is blessed.
/// Vigils are recorded as `arm <on|self> <watch JSON> until=<ms>` (id `v<n>`) and
/// `cancel <on|self> <id>`, and accepted. A letter read is recorded as `read letter <id>` and
/// found in no inbox. Retirements are recorded as `retire <child>`; a
/// taken answer as `take <child>`, answered with the next body queued by
/// [`Recorder::answer_from`] for that child (none queued: no letter came in time).
#[derive(Debug, Default)]
pub struct Recorder {
    calls: Mutex<Vec<String>>,
    spawn_refusal: Option<OutletError>,
    answers: Mutex<Vec<(String, String)>>,
}

impl Recorder {
    /// A recorder whose every spawn hubd "refuses" with `refusal` (after recording it).
    pub fn refusing_spawns(refusal: OutletError) -> Self {
        Recorder {
            spawn_refusal: Some(refusal),
            ..Recorder::default()
        }
    }

    /// Queues `body` as the next letter `child` answers with.
    pub fn answer_from(&self, child: &str, body: &str) {
        self.answers
            .lock()
            .unwrap()
            .push((child.to_owned(), body.to_owned()));
    }

    /// Every call recorded, oldest first.
    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    fn record(&self, call: String) -> usize {
        let mut calls = self.calls.lock().unwrap();
        calls.push(call);
        calls.len()
    }
}

impl HubOutlet for Recorder {
    fn send_letter(
        &self,
        to: &Address,
        subject: Option<&str>,
        body: &str,
    ) -> Result<String, OutletError> {
        let n = self.record(format!("letter to {} | {subject:?} | {body}", to.render()));
        Ok(format!("l-{n}"))
    }

    fn spawn(&self, request: &SpawnRequest, task: &str) -> Result<String, OutletError> {
        self.record(format!(
            "spawn {} driven={} loan={} grant={} | {task}",
            request.child,
            request.driven,
            request.loan.model_calls,
            serde_json::to_string(&request.grant).unwrap()
        ));
        match &self.spawn_refusal {
            Some(refusal) => Err(refusal.clone()),
            None => Ok(request.child.to_string()),
        }
    }

    fn retire(&self, child: &AgentName) -> Result<(), OutletError> {
        self.record(format!("retire {child}"));
        Ok(())
    }

    fn take_letter(
        &self,
        child: &AgentName,
        _until: std::time::Instant,
    ) -> Result<Option<String>, OutletError> {
        self.record(format!("take {child}"));
        let mut answers = self.answers.lock().unwrap();
        let at = answers.iter().position(|(from, _)| from == child.as_str());
        Ok(at.map(|i| answers.remove(i).1))
    }

    fn build(&self, ask: &BuildAsk) -> Result<Built, StageError> {
        self.record(format!("build {}", ask.source));
        Err(not_running("builder"))
    }

    fn run(&self, artifact: &ArtifactDigest, _stage: &Stage) -> Result<Ran, StageError> {
        self.record(format!("run {}", artifact.as_str()));
        Err(not_running("runner"))
    }

    fn blessing(&self, target: &str) -> Result<Option<Blessing>, StageError> {
        self.record(format!("blessing {target}"));
        Ok(None)
    }

    fn arm_vigil(
        &self,
        on: Option<&AgentName>,
        watch: Watch,
        until_ms: u64,
    ) -> Result<String, OutletError> {
        let on = on.map_or("self".to_owned(), ToString::to_string);
        let watch = serde_json::to_string(&watch).unwrap();
        let n = self.record(format!("arm {on} {watch} until={until_ms}"));
        Ok(format!("v{n}"))
    }

    fn cancel_vigil(&self, on: Option<&AgentName>, id: &str) -> Result<(), OutletError> {
        let on = on.map_or("self".to_owned(), ToString::to_string);
        self.record(format!("cancel {on} {id}"));
        Ok(())
    }

    fn read_letter(&self, id: &str) -> Result<Option<l3m_core::mail::Letter>, OutletError> {
        self.record(format!("read letter {id}"));
        Ok(None)
    }
}

fn not_running(service: &'static str) -> StageError {
    StageError::Unreachable {
        service,
        reason: "no responders (the recorder starts none)".into(),
    }
}
