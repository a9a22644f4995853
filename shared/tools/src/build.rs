//! `build` and `run`: an agent's W^X builds (DESIGN §8).
//!
//! `build` asks the builder for an optional fetch stage (the lockfile folder read-only at
//! `/lock`, a fresh cache at `/cache`, only the listed hosts reachable) and a build stage (the
//! source read-only at `/src`, the fetched cache read-only at `/cache`, no network, one fresh
//! `/artifact` to write); it returns each stage's exit and bounded log and the artifact's blake3
//! digest. `run` takes that digest and nothing else of the build: the runner mounts the artifact
//! read-only at `/artifact`, with no network and one fresh `/out` as the only writable place, and
//! returns the exit, the log, the digest of `out/` and its listing.
//!
//! The tool writes the plan itself from a few fields, so a model cannot ask for a mount, a
//! writable path or a network the pipeline does not allow; the builder's and the runner's
//! gates check it again. Both tools are tame (`bounded`): a build writes no file of the ACR,
//! only a new content-addressed artifact, and reaches only the grant's hosts; a run writes only
//! its fresh `out/`. Neither can be undone, so the result names the artifact or `out/` as a
//! lasting effect and a rewind says it did not take it back.

use l3m_core::build::{
    ArtifactDigest, Limits, Mount, MountRole, Network, Plan, Stage, StageExit, StageKind,
    StageOutcome, TreeEntry,
};
use l3m_core::effects::{EffectClass, Reversibility, ToolDecl};
use l3m_core::grant::{AcrPath, HostPattern};
use l3m_ring::effects::{BuildAsk, Granted};
use serde_json::{Value, json};

use crate::args::{Args, bad};
use crate::tool::{Tool, ToolError, ToolOutput, declare};

/// The longest deadline a stage may be given, in seconds.
pub const MAX_STAGE_SECONDS: usize = 600;

/// The deadline of a stage whose call names none, in seconds.
pub(crate) const DEFAULT_STAGE_SECONDS: usize = 120;

/// The most bytes of a stage's log kept by the container driver: a build's two logs and a
/// run's listing stay well inside one tool result.
const STAGE_LOG_BYTES: u64 = 16 << 10;

/// The most entries of a run's `out/` listed in its result; the rest are counted.
const MAX_LISTED: usize = 200;

/// Builds a folder of the ACR into a content-addressed artifact.
#[derive(Debug, Clone, Copy, Default)]
pub struct BuildTool;

/// Runs an artifact, by digest, into a fresh `out/`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunTool;

fn command_schema(what: &str) -> Value {
    json!({"type": "array", "items": {"type": "string"}, "minItems": 1, "description": what})
}

/// One stage over `mounts`, with the call's image and deadline.
pub(crate) fn stage(
    kind: StageKind,
    image: &str,
    command: Vec<String>,
    mounts: Vec<Mount>,
    network: Network,
    deadline_s: usize,
) -> Stage {
    Stage {
        name: kind.as_str().to_owned(),
        kind,
        image: image.to_owned(),
        command,
        workdir: "/tmp".into(),
        mounts,
        network,
        limits: Limits {
            deadline_ms: u64::try_from(deadline_s).unwrap_or(u64::MAX) * 1000,
            log_bytes: STAGE_LOG_BYTES,
            ..Limits::default()
        },
    }
}

/// The run stage over the artifact at `/artifact` and a fresh `/out`, with no network.
fn run_stage(image: &str, command: Vec<String>, deadline_s: usize) -> Stage {
    let mounts = vec![
        mount(MountRole::Artifact, "/artifact", false),
        mount(MountRole::Out, "/out", true),
    ];
    stage(
        StageKind::Run,
        image,
        command,
        mounts,
        Network::None,
        deadline_s,
    )
}

/// A mount of `role` at `target`.
pub(crate) fn mount(role: MountRole, target: &str, writable: bool) -> Mount {
    Mount {
        role,
        target: target.into(),
        writable,
    }
}

fn command(args: &Args<'_>, field: &str) -> Result<Option<Vec<String>>, ToolError> {
    let Some(argv) = args.opt_strings(field)? else {
        return Ok(None);
    };
    if argv.is_empty() {
        return Err(bad(field, "needs the program and its arguments".into()));
    }
    Ok(Some(argv.into_iter().map(str::to_owned).collect()))
}

fn folder(args: &Args<'_>, field: &str) -> Result<Option<AcrPath>, ToolError> {
    args.opt_string(field)?
        .map(|p| AcrPath::parse(p).map_err(|e| bad(field, e.to_string())))
        .transpose()
}

impl BuildTool {
    /// The request a call asks for, or the field at fault.
    fn ask(args: &Args<'_>) -> Result<BuildAsk, ToolError> {
        let image = args.string("image")?;
        let deadline = args
            .opt_count("deadline_s", MAX_STAGE_SECONDS)?
            .unwrap_or(DEFAULT_STAGE_SECONDS);
        let source = folder(args, "source")?.ok_or_else(|| bad("source", "required".into()))?;
        let build_command =
            command(args, "command")?.ok_or_else(|| bad("command", "required".into()))?;
        let lockfile = folder(args, "lockfile")?;
        let fetch_command = command(args, "fetch_command")?;
        let hosts = args
            .opt_strings("hosts")?
            .unwrap_or_default()
            .into_iter()
            .map(|h| HostPattern::parse(h).map_err(|e| bad("hosts", e.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        let mut stages = Vec::new();
        match (&fetch_command, &lockfile) {
            (Some(fetch), Some(_)) => stages.push(stage(
                StageKind::Fetch,
                image,
                fetch.clone(),
                vec![
                    mount(MountRole::Lockfile, "/lock", false),
                    mount(MountRole::Cache, "/cache", true),
                ],
                if hosts.is_empty() {
                    Network::None
                } else {
                    Network::Hosts(hosts)
                },
                deadline,
            )),
            (Some(_), None) => {
                return Err(bad(
                    "lockfile",
                    "a fetch needs the folder of lockfiles it reads".into(),
                ));
            }
            (None, Some(_)) => {
                return Err(bad(
                    "fetch_command",
                    "a lockfile folder is read only by a fetch; give its command".into(),
                ));
            }
            (None, None) if !hosts.is_empty() => {
                return Err(bad(
                    "hosts",
                    "only a fetch reaches hosts; give fetch_command and lockfile".into(),
                ));
            }
            (None, None) => {}
        }
        let mut mounts = vec![mount(MountRole::Source, "/src", false)];
        if fetch_command.is_some() {
            mounts.push(mount(MountRole::Cache, "/cache", false));
        }
        mounts.push(mount(MountRole::Artifact, "/artifact", true));
        stages.push(stage(
            StageKind::Build,
            image,
            build_command,
            mounts,
            Network::None,
            deadline,
        ));
        Ok(BuildAsk {
            plan: Plan { stages },
            source,
            lockfile,
        })
    }
}

impl Tool for BuildTool {
    fn decl(&self) -> ToolDecl {
        declare("build", [EffectClass::Build], Reversibility::Bounded)
    }

    fn description(&self) -> &str {
        "Build a folder of your workspace in a container, with no network, into an artifact named by its blake3 digest. The build command sees the source read-only at /src, a fetched cache read-only at /cache (if you fetch), and writes what it makes into /artifact; /tmp is scratch and also the working directory. To download dependencies first, give `fetch_command` and `lockfile`: that stage sees only the lockfile folder (read-only at /lock), writes /cache, and reaches only `hosts` (which your grant's net axis must list) through the proxy at $L3M_PROXY_HOST:$L3M_PROXY_PORT. `image` is one the hub pins. Pass the digest to `run` to execute the artifact."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "source": {"type": "string", "description": "the folder to build, relative to your ACR (e.g. `workspace/app`)"},
                "command": command_schema("the build command and its arguments (no shell unless you name one, e.g. [\"sh\", \"-c\", \"make && cp app /artifact/\"])"),
                "image": {"type": "string", "description": "the container image, by the id or tag the hub pins"},
                "lockfile": {"type": "string", "description": "the folder of lockfiles the fetch reads, relative to your ACR"},
                "fetch_command": command_schema("the fetch command and its arguments; it fills /cache"),
                "hosts": {"type": "array", "items": {"type": "string"}, "description": "hosts the fetch may reach"},
                "deadline_s": {"type": "integer", "minimum": 1, "maximum": MAX_STAGE_SECONDS, "description": "each stage's deadline in seconds (default 120)"}
            },
            "required": ["source", "command", "image"],
            "additionalProperties": false
        })
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        let args = Args::parse(&input, &self.input_schema())?;
        let ask = Self::ask(&args)?;
        let built = fx.build()?.build(&ask)?;
        let mut text: String = built.stages.iter().map(describe).collect();
        match &built.artifact {
            Some(digest) => {
                text.push_str(&format!(
                    "artifact: {} (pass it to `run` as `artifact`)\n",
                    digest.as_str()
                ));
                Ok(ToolOutput::text(text).lasting(
                    EffectClass::Build,
                    format!("artifact {} of {}", digest.as_str(), ask.source),
                ))
            }
            None => {
                text.push_str("no artifact: a stage did not succeed\n");
                Ok(ToolOutput::text(text))
            }
        }
    }
}

impl Tool for RunTool {
    fn decl(&self) -> ToolDecl {
        declare("run", [EffectClass::Run], Reversibility::Bounded)
    }

    fn description(&self) -> &str {
        "Run a built artifact, named only by the digest `build` returned (or one given to you), in a container with no network. The command sees the artifact read-only at /artifact and writes its results into /out, a fresh folder for this run and the only writable place besides scratch /tmp. Returns the exit status, the log, the digest of out/ and what it holds."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "artifact": {"type": "string", "description": "the artifact's digest, exactly as `build` returned it"},
                "command": command_schema("the command and its arguments, e.g. [\"/artifact/app\", \"--out\", \"/out\"]"),
                "image": {"type": "string", "description": "the container image, by the id or tag the hub pins"},
                "deadline_s": {"type": "integer", "minimum": 1, "maximum": MAX_STAGE_SECONDS, "description": "the deadline in seconds (default 120)"}
            },
            "required": ["artifact", "command", "image"],
            "additionalProperties": false
        })
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        let args = Args::parse(&input, &self.input_schema())?;
        let artifact = ArtifactDigest::parse(args.string("artifact")?)
            .map_err(|e| bad("artifact", e.to_string()))?;
        let command =
            command(&args, "command")?.ok_or_else(|| bad("command", "required".into()))?;
        let deadline = args
            .opt_count("deadline_s", MAX_STAGE_SECONDS)?
            .unwrap_or(DEFAULT_STAGE_SECONDS);
        let stage = run_stage(args.string("image")?, command, deadline);
        let ran = fx.run()?.run(&artifact, &stage)?;
        let mut text = describe(&ran.outcome);
        text.push_str(&format!("out: {}\n", ran.out.as_str()));
        text.push_str(&listing(&ran.listing));
        Ok(ToolOutput::text(text).lasting(
            EffectClass::Run,
            format!("run of {} into out {}", artifact.as_str(), ran.out.as_str()),
        ))
    }
}

/// A stage's exit, time and log, as the model reads it.
pub(crate) fn describe(outcome: &StageOutcome) -> String {
    let exit = match outcome.exit {
        StageExit::Exited { code } => format!("exited {code}"),
        StageExit::OutOfMemory => "killed at its memory limit".to_owned(),
        StageExit::Deadline => "killed at its deadline".to_owned(),
    };
    let dropped = if outcome.log_dropped > 0 {
        format!(", {} more bytes dropped", outcome.log_dropped)
    } else {
        String::new()
    };
    format!(
        "stage {}: {exit} in {} ms\n--- log ({} bytes{dropped}) ---\n{}\n--- end of log ---\n",
        outcome.stage,
        outcome.elapsed_ms,
        outcome.log.len(),
        String::from_utf8_lossy(&outcome.log).trim_end()
    )
}

/// `out/`'s entries, one a line, at most [`MAX_LISTED`].
fn listing(entries: &[TreeEntry]) -> String {
    let mut text = format!("out/ holds {} entries:\n", entries.len());
    for entry in entries.iter().take(MAX_LISTED) {
        text.push_str(&match entry {
            TreeEntry::Dir { path } => format!("  {path}/\n"),
            TreeEntry::File {
                path,
                executable,
                len,
                ..
            } => format!(
                "  {path} ({len} bytes{})\n",
                if *executable { ", executable" } else { "" }
            ),
            TreeEntry::Symlink { path, target } => format!("  {path} -> {target}\n"),
        });
    }
    if entries.len() > MAX_LISTED {
        text.push_str(&format!("  … and {} more\n", entries.len() - MAX_LISTED));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use l3m_core::build::check_plan;

    fn ask(input: Value) -> Result<BuildAsk, ToolError> {
        BuildTool::ask(&Args::parse(&input, &BuildTool.input_schema())?)
    }

    #[test]
    fn every_plan_the_tool_writes_passes_the_core_gate() {
        let with_fetch = ask(json!({
            "source": "workspace/app", "image": "img", "command": ["make"],
            "lockfile": "workspace/app/lock", "fetch_command": ["fetch"], "hosts": ["pkgs.test"],
        }))
        .unwrap();
        let kinds: Vec<StageKind> = with_fetch.plan.stages.iter().map(|s| s.kind).collect();
        assert_eq!(kinds, [StageKind::Fetch, StageKind::Build]);
        check_plan(&with_fetch.plan).unwrap();
        let fetch_without_hosts = ask(json!({
            "source": "workspace/app", "image": "img", "command": ["make"],
            "lockfile": "workspace/app/lock", "fetch_command": ["fetch"],
        }))
        .unwrap();
        assert_eq!(fetch_without_hosts.plan.stages[0].network, Network::None);
        check_plan(&fetch_without_hosts.plan).unwrap();
        let alone = ask(json!({"source": "workspace/app", "image": "img", "command": ["make"], "deadline_s": 5}))
            .unwrap();
        assert_eq!(alone.plan.stages.len(), 1);
        assert_eq!(alone.plan.stages[0].limits.deadline_ms, 5_000);
        check_plan(&alone.plan).unwrap();
        let run = run_stage("img", vec!["/artifact/app".into()], DEFAULT_STAGE_SECONDS);
        check_plan(&Plan { stages: vec![run] }).unwrap();
    }
}
