//! The parent's answer to one effect a program asks for: the function's arguments checked, the
//! call made through the ring's providers exactly as a built-in tool makes it, the result as
//! JSON. A function of a class the footprint does not declare is refused by [`Granted`] itself.
//! The spawn class's functions are answered by the call's [`Drive`], which keeps its children.

use std::time::Instant;

use l3m_core::mail::Address;
use l3m_ring::effects::Granted;
use l3m_ring::net::FetchRequest;
use l3m_ring::shell::ShellRequest;
use l3m_tools::ToolError;
use serde_json::{Map, Value, json};

use crate::drive::Drive;

/// Answers `function(args)` with the effects `fx` grants; the children the call drives are
/// `drive`'s.
pub(crate) fn call(
    function: &str,
    args: &Map<String, Value>,
    fx: &Granted<'_>,
    drive: &mut Drive<'_, '_>,
) -> Result<Value, ToolError> {
    if let Some(answer) = drive.answer(function, args) {
        return answer;
    }
    match function {
        "fs_read" => {
            let path = text(args, "path")?;
            let bytes = fx.fs_read()?.read(path)?;
            let len = bytes.len();
            String::from_utf8(bytes)
                .map(Value::String)
                .map_err(|_| ToolError::NotText {
                    path: path.to_owned(),
                    len,
                })
        }
        "fs_list" => {
            let listing = fx.fs_read()?.list(text(args, "path")?)?;
            Ok(Value::Array(
                listing
                    .entries
                    .iter()
                    .map(|e| json!({"name": e.name, "kind": e.kind.to_string()}))
                    .collect(),
            ))
        }
        "fs_write" => {
            let path = text(args, "path")?;
            fx.fs_write()?.write(path, text(args, "text")?.as_bytes())?;
            Ok(Value::Null)
        }
        "clock_now" => Ok(json!(fx.clock()?.now_ms())),
        "net_fetch" => {
            let response = fx.net()?.fetch(&FetchRequest::get(text(args, "url")?))?;
            Ok(json!({
                "status": response.status,
                "body": String::from_utf8_lossy(&response.body),
                "final_url": response.final_url,
            }))
        }
        "mail_send" => {
            let to = text(args, "to")?;
            let address = Address::parse(to).map_err(|e| ToolError::BadInput {
                field: "to".into(),
                reason: e.to_string(),
            })?;
            Ok(Value::String(fx.mail()?.send(
                &address,
                None,
                text(args, "body")?,
            )?))
        }
        "shell_run" => shell_run(args, fx, drive.waits_until()),
        other => Err(ToolError::BadInput {
            field: "function".into(),
            reason: format!("`{other}` is no program function"),
        }),
    }
}

/// The most bytes a shell run keeps of stdout and of stderr (as the `shell` tool does).
const MAX_SHELL_OUTPUT: usize = 256 << 10;

/// `shell_run(program, args)`: one listed program in the shell sandbox, in `workspace`, killed
/// at `until`, before the call's evaluator is.
fn shell_run(
    args: &Map<String, Value>,
    fx: &Granted<'_>,
    until: Instant,
) -> Result<Value, ToolError> {
    let words = args.get("args").and_then(Value::as_array);
    let words: Option<Vec<String>> =
        words.and_then(|w| w.iter().map(|a| a.as_str().map(str::to_owned)).collect());
    let request = ShellRequest {
        program: text(args, "program")?.to_owned(),
        args: words.ok_or_else(|| ToolError::BadInput {
            field: "args".into(),
            reason: "a list of strings is required".into(),
        })?,
        cwd: "workspace".into(),
        stdin: Vec::new(),
        timeout: until.saturating_duration_since(Instant::now()),
        max_output: MAX_SHELL_OUTPUT,
    };
    let outcome = fx.shell()?.run(&request)?;
    let killed = match (outcome.timed_out, outcome.truncated) {
        (true, _) => Value::from("deadline"),
        (_, true) => Value::from("output"),
        _ => Value::Null,
    };
    Ok(json!({
        "status": outcome.status,
        "stdout": String::from_utf8_lossy(&outcome.stdout),
        "stderr": String::from_utf8_lossy(&outcome.stderr),
        "killed": killed,
    }))
}

/// The string argument `name`.
fn text<'a>(args: &'a Map<String, Value>, name: &str) -> Result<&'a str, ToolError> {
    args.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::BadInput {
            field: name.to_owned(),
            reason: "a string is required".into(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocabulary::FUNCTIONS;
    use l3m_core::clock::FixedClock;
    use l3m_core::effects::{EffectClass, Footprint};
    use l3m_ring::effects::Effects;
    use l3m_ring::tokens::{MintInput, mint};
    use l3m_ring::undo::MemoryUndo;
    use std::sync::Arc;
    use std::time::Duration;

    fn effects() -> (tempfile::TempDir, Effects) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("workspace")).unwrap();
        let input = MintInput {
            acr: dir.path().into(),
            files: Some(vec!["workspace".into()]),
            ..MintInput::default()
        };
        let tokens = mint(&input, l3m_ring::ambient_authority()).unwrap();
        let fx = Effects::new(
            tokens,
            Arc::new(MemoryUndo::default()),
            Arc::new(FixedClock(7)),
            None,
        );
        (dir, fx)
    }

    /// [`call`] with a drive of its own, for the classes that keep no children.
    fn ask(
        function: &str,
        args: &Map<String, Value>,
        fx: &Granted<'_>,
    ) -> Result<Value, ToolError> {
        let mut drive = Drive::new(fx, std::time::Instant::now() + Duration::from_secs(5));
        call(function, args, fx, &mut drive)
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn calls_go_through_the_granted_classes_only() {
        let (dir, fx) = effects();
        let granted = fx
            .for_footprint(&Footprint::of([EffectClass::FsRead, EffectClass::FsWrite]))
            .unwrap();
        ask(
            "fs_write",
            &args(json!({"path": "workspace/a", "text": "hi"})),
            &granted,
        )
        .unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("workspace/a")).unwrap(),
            b"hi"
        );
        assert_eq!(
            ask("fs_read", &args(json!({"path": "workspace/a"})), &granted).unwrap(),
            json!("hi")
        );
        let listing = ask("fs_list", &args(json!({"path": "workspace"})), &granted).unwrap();
        assert_eq!(listing, json!([{"name": "a", "kind": "regular file"}]));
        // The clock is not in the footprint: the grant refuses it, naming the class.
        let e = ask("clock_now", &Map::new(), &granted).unwrap_err();
        assert!(matches!(e, ToolError::Effects(_)), "{e}");
        // The provider still refuses what the token does not reach.
        let e = ask(
            "fs_write",
            &args(json!({"path": "../x", "text": ""})),
            &granted,
        )
        .unwrap_err();
        assert!(e.refusal().is_some(), "{e}");
        let e = ask("fs_read", &args(json!({"path": 3})), &granted).unwrap_err();
        assert!(matches!(e, ToolError::BadInput { ref field, .. } if field == "path"));
    }

    #[test]
    fn every_vocabulary_function_is_answered() {
        let (_dir, fx) = effects();
        let granted = fx.for_footprint(&Footprint::default()).unwrap();
        for f in FUNCTIONS {
            let e = ask(f.name, &Map::new(), &granted).unwrap_err();
            assert!(
                !matches!(e, ToolError::BadInput { ref field, .. } if field == "function"),
                "{} is not answered",
                f.name
            );
        }
    }
}
