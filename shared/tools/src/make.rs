//! `make`: a Makefile target built in a container with no network — one a human blessed, or
//! any target of a tame Makefile.
//!
//! Editing a Makefile is writing; running it is executing. So make itself runs only on bytes a
//! human pinned with `l3m bless` — the Makefile, its literal includes and the scripts the
//! target's recipes call (`refs/l3m/blessings/...`, which no session can write). For a blessed
//! target this tool reads that pin, hashes the same files in the folder asked for, and reads the
//! Makefile's inputs again: any changed, missing or new input is a refusal by the blessing
//! boundary and nothing is sent. Otherwise it asks the builder for one build stage whose command
//! the harness writes — `make -f MAKEFILE TARGET` on a copy of the source — so the model passes
//! make no variable, option or second goal: the input has no field for one, and a target make
//! would read as an argument is refused (core's `check_target`).
//!
//! A target no human blessed is built only if its Makefile is *tame make* (core's
//! `build::tame`): the harness lowers it to argument vectors of a few known tools and writes the
//! stage's script itself, every word quoted (`command_line`), so make never runs and no byte of
//! the Makefile is read as shell. That needs no human: the model picks only which tame tools
//! run on which files of its source, in a container that reaches nothing and writes only its
//! artifact. Either way, what the target leaves under `build/` becomes the artifact.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use l3m_core::build::{
    ArtifactDigest, BlessError, Blessing, MountRole, Network, Plan, StageKind, TAME_TOOLS,
    blessed_inputs, check_blessing, command_line, lower,
};
use l3m_core::effects::{EffectClass, Reversibility, ToolDecl};
use l3m_core::grant::AcrPath;
use l3m_ring::effects::{BuildAsk, FsRead, Granted, StageError};
use serde_json::{Value, json};

use crate::args::{Args, bad};
use crate::build::{DEFAULT_STAGE_SECONDS, MAX_STAGE_SECONDS, describe, mount, stage};
use crate::tool::{Tool, ToolError, ToolOutput, declare};

/// The blessed build stage's script: `$1` is the Makefile and `$2` the target, passed as
/// arguments so no byte of either is ever read as shell.
const MAKE_SCRIPT: &str = "mkdir /tmp/work && cp -R /src/. /tmp/work && cd /tmp/work \
     && make -f \"$1\" \"$2\" && if [ -d build ]; then cp -R build/. /artifact/; fi";

/// The tame build stage's script around the lowered steps: it works on a copy of the source,
/// echoes each step as it runs it (`-x`), stops at the first that fails (`-e`), and keeps
/// `build/` as the artifact.
const TAME_PROLOGUE: &str =
    "set -ex\nmkdir /tmp/work\ncp -R /src/. /tmp/work\ncd /tmp/work\nmkdir -p build\n";
const TAME_EPILOGUE: &str = "cp -R build/. /artifact/\n";

/// The Makefile a tame target is read from when the call names none.
const DEFAULT_MAKEFILE: &str = "Makefile";

/// What the model is told of the tool: both paths, and the tame dialect with its tools.
static DESCRIPTION: LazyLock<String> = LazyLock::new(|| {
    format!(
        "Build a Makefile target in a container with no network; what the target writes under \
         build/ becomes the artifact, named by its digest (pass it to `run`). A target a human \
         blessed for you (`l3m bless`) runs make itself, only while the Makefile, the files it \
         includes and the scripts the target's recipes call are byte for byte what was blessed \
         (after any edit it is refused until a human blesses again); make gets no variables or \
         options. Any other target needs a tame Makefile, which the harness runs without make \
         and without a human: every rule's target is a path under build/, every recipe line \
         runs one of {} with plain relative arguments (no $, quotes, ;, |, >, globs, \
         variables, = or absolute paths); each target is made once, prerequisites first.",
        TAME_TOOLS.join(", ")
    )
});

/// Builds a blessed Makefile target, or a target of a tame Makefile.
#[derive(Debug, Clone, Copy, Default)]
pub struct Make;

/// `blessing`'s check against the files in `source` now: the Makefile's inputs read again, and
/// every pinned or new input hashed.
fn check(read: &dyn FsRead, source: &AcrPath, blessing: &Blessing) -> Result<(), BlessError> {
    let hash = |path: &str| {
        read.read(&format!("{source}/{path}"))
            .ok()
            .map(|bytes| ArtifactDigest::from_bytes(*blake3::hash(&bytes).as_bytes()))
    };
    let makefile = read
        .read(&format!("{source}/{}", blessing.makefile))
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(|| BlessError::Missing {
            path: blessing.makefile.clone(),
        })?;
    let inputs_now = blessed_inputs(&blessing.makefile, &makefile, &blessing.target)?;
    let hashes_now: BTreeMap<String, Option<ArtifactDigest>> = blessing
        .files
        .keys()
        .chain(&inputs_now)
        .map(|path| (path.clone(), hash(path)))
        .collect();
    check_blessing(blessing, &inputs_now, &hashes_now)
}

/// The tame build stage's script for `target` of the Makefile at `makefile` (relative to
/// `source`), if that Makefile is tame make.
fn tame_script(
    read: &dyn FsRead,
    source: &AcrPath,
    makefile: &str,
    target: &str,
) -> Result<String, ToolError> {
    let path = format!("{source}/{makefile}");
    let bytes = read.read(&path)?;
    let text = String::from_utf8(bytes).map_err(|e| ToolError::NotText {
        path: path.clone(),
        len: e.as_bytes().len(),
    })?;
    let steps = lower(&text, target).map_err(|why| StageError::NotTame {
        target: target.to_owned(),
        makefile: path,
        why,
    })?;
    let mut script = TAME_PROLOGUE.to_owned();
    for step in &steps {
        script.push_str(&command_line(&step.argv));
        script.push('\n');
    }
    script.push_str(TAME_EPILOGUE);
    Ok(script)
}

impl Tool for Make {
    fn decl(&self) -> ToolDecl {
        declare(
            "make",
            [EffectClass::FsRead, EffectClass::Build],
            Reversibility::Bounded,
        )
    }

    fn description(&self) -> &str {
        &DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "source": {"type": "string", "description": "the folder holding the Makefile, relative to your ACR (the blessing's paths and the recipes' arguments are relative to it)"},
                "target": {"type": "string", "description": "the target: exactly as blessed, or a tame rule's target under build/"},
                "makefile": {"type": "string", "description": "a tame target's Makefile, relative to `source` (default `Makefile`); a blessed target uses the blessed one"},
                "image": {"type": "string", "description": "the container image (with make), by the id or tag the hub pins"},
                "deadline_s": {"type": "integer", "minimum": 1, "maximum": MAX_STAGE_SECONDS, "description": "the stage's deadline in seconds (default 120)"}
            },
            "required": ["source", "target", "image"],
            "additionalProperties": false
        })
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        let args = Args::parse(&input, &self.input_schema())?;
        let source =
            AcrPath::parse(args.string("source")?).map_err(|e| bad("source", e.to_string()))?;
        let target = args.string("target")?;
        let makefile = args.opt_string("makefile")?;
        let deadline = args
            .opt_count("deadline_s", MAX_STAGE_SECONDS)?
            .unwrap_or(DEFAULT_STAGE_SECONDS);
        let build = fx.build()?;
        let (command, kind) = match build.blessing(target)? {
            Some(blessing) => {
                if makefile.is_some_and(|m| m != blessing.makefile) {
                    return Err(bad(
                        "makefile",
                        format!("{target} is blessed with {}", blessing.makefile),
                    ));
                }
                check(fx.fs_read()?, &source, &blessing).map_err(StageError::from)?;
                let argv = ["sh", "-c", MAKE_SCRIPT, "make", &blessing.makefile, target];
                (argv.map(str::to_owned).to_vec(), "blessed")
            }
            None => {
                let makefile = makefile.unwrap_or(DEFAULT_MAKEFILE);
                let script = tame_script(fx.fs_read()?, &source, makefile, target)?;
                (vec!["sh".into(), "-c".into(), script], "tame")
            }
        };
        let ask = BuildAsk {
            plan: Plan {
                stages: vec![stage(
                    StageKind::Build,
                    args.string("image")?,
                    command,
                    vec![
                        mount(MountRole::Source, "/src", false),
                        mount(MountRole::Artifact, "/artifact", true),
                    ],
                    Network::None,
                    deadline,
                )],
            },
            source,
            lockfile: None,
        };
        let built = build.build(&ask)?;
        let mut text: String = built.stages.iter().map(describe).collect();
        let Some(digest) = &built.artifact else {
            text.push_str("no artifact: the target did not succeed\n");
            return Ok(ToolOutput::text(text));
        };
        text.push_str(&format!(
            "artifact: {} (pass it to `run` as `artifact`)\n",
            digest.as_str()
        ));
        Ok(ToolOutput::text(text).lasting(
            EffectClass::Build,
            format!(
                "artifact {} of {kind} {target} in {}",
                digest.as_str(),
                ask.source
            ),
        ))
    }
}
