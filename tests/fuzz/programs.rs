//! Starlark program sources (`l3m_programs::evaluate::check` and `check_hook`): the seal, type
//! and schema checks every `agent/programs/*.star` and `agent/hooks.star` an agent writes goes
//! through before anything of it runs.

use l3m_programs::evaluate::{check, check_hook};
use l3m_programs::input;
use serde_json::Value;

use crate::harness::{self, Src};

/// A program that passes all checks, and a hook; the seeds the mutations start from.
const PROGRAM: &str = r#""""Counts the TODO lines of a file."""
FOOTPRINT = ["fs-read"]
DESCRIPTION = "count TODOs"
INPUT = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
LIMIT = 3

def count(text):
    n = 0
    for line in text.split("\n"):
        if "TODO" in line:
            n += 1
    return n

def main(input):
    return {"todos": count(fs_read(input["path"]))}
"#;
const HOOK: &str = r#"BORING = ["ci-bot"]

def on_event(event):
    if event["kind"] != "letter":
        return "show"
    if event["from"] in BORING:
        return "dismiss"
    return {"kind": "reply", "text": "got it"}
"#;

/// Starlark's syntax and the words the seal rules look for.
const TOKENS: &[&str] = &[
    "\n",
    "    ",
    "\t",
    ":",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    "\"",
    "'",
    "\"\"\"",
    "\\",
    "while True:\n",
    "load(\"a.star\", \"b\")\n",
    "lambda x: x",
    "def f():\n    def g():\n",
    "main(input)",
    "count(text)",
    "FOOTPRINT",
    "INPUT",
    "DESCRIPTION",
    "\"fs-write\"",
    "\"shell\"",
    "\"spawn\"",
    "\"type\"",
    "\"properties\"",
    "\"$ref\"",
    "\"pattern\"",
    "for ",
    " in ",
    "if ",
    "return ",
    "print(",
    "getattr(",
    "struct(",
    "1e999",
    "-0",
    "0x",
    "@",
    "\u{feff}",
    "\u{202e}",
];

/// Every refusal names the file and a line of the source.
fn refused(source: &str, e: &l3m_programs::LoadError) {
    let lines = source.lines().count().max(1);
    assert!(
        e.line as usize <= lines + 1,
        "refusal at line {} of a {lines}-line source: {e}",
        e.line
    );
    assert!(!e.detail.is_empty() || !e.to_string().is_empty());
}

/// `fuzz_starlark_program_sources`: any source, and mutations of a valid program and hook,
/// pass the seal and type checks or are refused with a typed error at a line of the source;
/// a program that passes has a schema its own check accepts.
#[test]
fn fuzz_starlark_program_sources() {
    harness::run("starlark", 3_000, 2048, |bytes| {
        let mut src = Src::new(bytes);
        let as_hook = src.below(4) == 0;
        let raw = match src.below(6) {
            0 => bytes.to_vec(),
            _ => harness::mutate(
                if as_hook { HOOK } else { PROGRAM }.as_bytes(),
                &mut src,
                TOKENS,
            ),
        };
        let source = String::from_utf8_lossy(&raw);
        if as_hook {
            if let Err(e) = check_hook("agent/hooks.star", &source) {
                refused(&source, &e);
            }
            return;
        }
        match check("agent/programs/todo.star", &source) {
            Ok(decl) => {
                assert!(input::check_schema(&decl.input_schema).is_ok(), "{decl:?}");
                let probe = Value::String(harness::string(&mut src, &[]));
                if let Err(e) = input::check(&decl.input_schema, &probe) {
                    assert!(!e.to_string().is_empty());
                }
            }
            Err(e) => refused(&source, &e),
        }
    });
}

/// Deep nesting is where a recursive parser or checker runs out of stack: sources nested far
/// deeper than the fuzzer's inputs reach, up to the largest source a program may be, are
/// refused or pass, and never overflow.
#[test]
fn fuzz_starlark_deep_nesting_is_refused_not_a_crash() {
    let shapes = [
        ("[", "]"),
        ("(", ")"),
        ("{\"a\": ", "}"),
        ("-", ""),
        ("not ", ""),
        ("1 + ", ""),
        ("x.y(", ")"),
        ("a[", "]"),
    ];
    for depth in [64usize, 512, 2048, 15_000] {
        for (open, close) in shapes {
            let source = format!(
                "FOOTPRINT = []\nDESCRIPTION = \"d\"\nINPUT = {{\"type\": \"object\"}}\nX = {}1{}\n\ndef main(input):\n    return X\n",
                open.repeat(depth),
                close.repeat(depth)
            );
            if source.len() > l3m_programs::decl::MAX_SOURCE {
                continue;
            }
            if let Err(e) = check("agent/programs/deep.star", &source) {
                refused(&source, &e);
            }
        }
    }
}
