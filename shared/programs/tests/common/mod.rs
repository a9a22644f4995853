//! The programs' test fixture: the ring's file hub (`l3m_ring::test_support::files_hub`) with
//! effects minted for `alice/main` (files under `workspace` and `agent`, her default mail, a
//! recording hub outlet), and the evaluator binary this package builds, under short limits.
#![allow(clippy::unwrap_used, dead_code)]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use l3m_core::axis::Axis;
use l3m_core::clock::FixedClock;
use l3m_core::names::AgentName;
use l3m_programs::LoadError;
use l3m_programs::host::{self, Evaluator, ProgramTool};
use l3m_ring::effects::{Effects, HubOutlet};
use l3m_ring::test_support::files_hub::Hub;
use l3m_ring::test_support::outlet::Recorder;
use l3m_ring::tokens::{MailInput, MintInput, mint};
use l3m_ring::undo::MemoryUndo;
use l3m_tools::{Tool, ToolError, ToolOutput};
use serde_json::Value;

/// The evaluator built with this package, limited to 3 s and 192 MiB, 10 000 statements.
///
/// The step budget is small so a loop trips it long before the deadline even in a debug build
/// on a loaded two-core machine (where 100 000 statements once took longer than 3 s, and the
/// step bomb was stopped by the deadline instead of by its own rule).
pub fn evaluator() -> Evaluator {
    let mut e = Evaluator::new(PathBuf::from(env!("CARGO_BIN_EXE_l3m-program")));
    e.deadline = Duration::from_secs(3);
    e.limits.cpu_secs = 3;
    e.steps = 10_000;
    e
}

/// One agent's ring over the file hub.
pub struct Session {
    pub hub: Hub,
    pub effects: Effects,
    pub journal: Arc<MemoryUndo>,
    pub outlet: Arc<Recorder>,
    pub conferred: BTreeSet<Axis>,
}

impl Session {
    pub fn new() -> Self {
        Self::with_spawn(None)
    }

    /// The same ring, with a spawn token of `level` (none when `None`).
    pub fn with_spawn(spawn: Option<l3m_core::grant::SpawnLevel>) -> Self {
        Self::minted(|input| input.spawn = spawn)
    }

    /// The same ring, with what `adjust` adds to (or takes from) its tokens.
    pub fn minted(adjust: impl FnOnce(&mut MintInput)) -> Self {
        let hub = Hub::new();
        let mut input = MintInput {
            acr: hub.acr.clone(),
            files: Some(vec!["workspace".into(), "agent".into()]),
            mail: Some(MailInput {
                agent: AgentName::parse("alice/main").unwrap(),
                covers: Vec::new(),
            }),
            ..MintInput::default()
        };
        adjust(&mut input);
        let tokens = mint(&input, l3m_ring::ambient_authority()).unwrap();
        let conferred = tokens.conferred();
        let journal = Arc::new(MemoryUndo::default());
        let outlet = Arc::new(Recorder::default());
        let effects = Effects::new(
            tokens,
            journal.clone(),
            Arc::new(FixedClock(1_750_000_000_000)),
            Some(Arc::clone(&outlet) as Arc<dyn HubOutlet>),
        );
        Self {
            hub,
            effects,
            journal,
            outlet,
            conferred,
        }
    }

    /// Writes `agent/programs/<name>.star`.
    pub fn install(&self, name: &str, source: &str) {
        let dir = self.hub.acr.join(host::PROGRAMS_DIR);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.star")), source).unwrap();
    }

    /// Writes `agent/plugins/<plugin>/<name>.star`.
    pub fn install_in_plugin(&self, plugin: &str, name: &str, source: &str) {
        let dir = self
            .hub
            .acr
            .join(l3m_programs::plugin::PLUGINS_DIR)
            .join(plugin);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.star")), source).unwrap();
    }

    /// The three checks of `source` as `<name>.star`, then the tool.
    pub fn admit(&self, name: &str, source: &str) -> Result<ProgramTool, LoadError> {
        let file = format!("{}/{name}.star", host::PROGRAMS_DIR);
        let (decl, _) = host::check(&evaluator(), &file, source, &self.conferred)?;
        Ok(ProgramTool::new(decl, file, source, evaluator()))
    }

    /// Calls `tool` on `input` with exactly its footprint granted.
    pub fn call(&self, tool: &ProgramTool, input: Value) -> Result<ToolOutput, ToolError> {
        let granted = self.effects.for_footprint(&tool.decl().footprint)?;
        tool.call(input, &granted)
    }
}

/// Process `pid` and every process below it, from each process's parent in `/proc/<pid>/stat`:
/// a sandboxed evaluator runs below the bubblewrap whose process id the tool reports.
pub fn tree(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter_map(|p: u32| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let after = &stat[stat.rfind(')')? + 1..];
            Some((p, after.split_whitespace().nth(1)?.parse().ok()?))
        })
        .collect();
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        out.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    out
}
