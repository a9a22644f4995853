//! `make`: a blessed Makefile target, built only while its bytes are the ones a human blessed.
//!
//! Editing a Makefile is writing; running it is executing. A human pins, with `l3m bless`, the
//! Makefile, its literal includes and the scripts the target's recipes call
//! (`refs/l3m/blessings/...`, which no session can write). This tool reads that pin, hashes the
//! same files in the folder asked for, and reads the Makefile's inputs again: any changed,
//! missing or new input is a refusal by the blessing boundary and nothing is sent. Otherwise it
//! asks the builder for one build stage whose command the harness writes — `make -f MAKEFILE
//! TARGET` on a copy of the source, the target's `build/` becoming the artifact — so the model
//! passes make no variable, option or second goal: the input has no field for one, and a
//! target make would read as an argument is refused (core's `check_target`).

use std::collections::BTreeMap;

use l3m_core::build::{
    ArtifactDigest, BlessError, Blessing, MountRole, Network, Plan, StageKind, blessed_inputs,
    check_blessing,
};
use l3m_core::effects::{EffectClass, Reversibility, ToolDecl};
use l3m_core::grant::AcrPath;
use l3m_ring::effects::{BuildAsk, FsRead, Granted, StageError};
use serde_json::{Value, json};

use crate::args::{Args, bad};
use crate::build::{DEFAULT_STAGE_SECONDS, MAX_STAGE_SECONDS, describe, mount, stage};
use crate::tool::{Tool, ToolError, ToolOutput, declare};

/// The build stage's script: `$1` is the Makefile and `$2` the target, passed as arguments so
/// no byte of either is ever read as shell.
const MAKE_SCRIPT: &str = "mkdir /tmp/work && cp -R /src/. /tmp/work && cd /tmp/work \
     && make -f \"$1\" \"$2\" && if [ -d build ]; then cp -R build/. /artifact/; fi";

/// Builds a blessed Makefile target.
#[derive(Debug, Clone, Copy, Default)]
pub struct MakeBlessed;

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

impl Tool for MakeBlessed {
    fn decl(&self) -> ToolDecl {
        declare(
            "make",
            [EffectClass::FsRead, EffectClass::Build],
            Reversibility::Bounded,
        )
    }

    fn description(&self) -> &str {
        "Build a Makefile target a human blessed for you (`l3m bless`), in a container with no network: only while the Makefile, the files it includes and the scripts the target's recipes call are byte for byte what was blessed (after any edit it is refused until a human blesses again). make gets no variables or options: name the folder and the target only. What the target writes under build/ becomes the artifact, named by its digest; pass that to `run`."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "source": {"type": "string", "description": "the folder holding the Makefile, relative to your ACR (the blessing's paths are relative to it)"},
                "target": {"type": "string", "description": "the blessed target, exactly as blessed"},
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
        let deadline = args
            .opt_count("deadline_s", MAX_STAGE_SECONDS)?
            .unwrap_or(DEFAULT_STAGE_SECONDS);
        let build = fx.build()?;
        let blessing = build
            .blessing(target)?
            .ok_or_else(|| StageError::NotBlessed {
                target: target.to_owned(),
            })?;
        check(fx.fs_read()?, &source, &blessing).map_err(StageError::from)?;
        let command = [
            "sh",
            "-c",
            MAKE_SCRIPT,
            "make",
            &blessing.makefile,
            &blessing.target,
        ]
        .map(str::to_owned)
        .to_vec();
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
                "artifact {} of blessed {} in {}",
                digest.as_str(),
                blessing.target,
                ask.source
            ),
        ))
    }
}
