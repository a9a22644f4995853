//! The evaluator's globals, built per footprint: the kept builtins plus the functions of the
//! declared classes, and nothing else. A class the footprint does not declare has no functions
//! here, so a program naming one does not load.
//!
//! Each class function asks the parent over the pipe ([`crate::protocol`]) and waits for its
//! answer; the evaluator holds no token, so the parent's ring decides every effect.

use std::cell::RefCell;
use std::io::{BufReader, Stdin, Stdout};
use std::sync::OnceLock;

use l3m_core::effects::Footprint;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use starlark::environment::{Globals, GlobalsBuilder};
use starlark::eval::Evaluator;
use starlark::starlark_module;
use starlark::values::Value as StarValue;

use crate::protocol::{Answer, FromChild, LineError, read_line, write_line};
use crate::vocabulary::{BUILTINS, Class};

/// The process's link to its parent, set once by the evaluator's `run` or `serve` before the
/// program starts; without it (in a check) every class function fails.
pub(crate) struct Parent {
    /// Answers arrive here.
    pub(crate) input: BufReader<Stdin>,
    /// Calls go here.
    pub(crate) output: Stdout,
}

thread_local! {
    static PARENT: RefCell<Option<Parent>> = const { RefCell::new(None) };
}

/// Installs the link to the parent for the rest of this thread.
pub(crate) fn connect(parent: Parent) {
    PARENT.with(|p| *p.borrow_mut() = Some(parent));
}

/// Reads the parent's next line through the link (a serving evaluator's next request); with
/// no link there is nothing to read, as if the pipe had closed.
pub(crate) fn receive<T: DeserializeOwned>() -> Result<T, LineError> {
    PARENT.with(|p| match p.borrow_mut().as_mut() {
        Some(parent) => read_line(&mut parent.input),
        None => Err(LineError::Closed),
    })
}

/// Writes `message` to the parent through the link (a serving evaluator's `Done`).
pub(crate) fn tell(message: &FromChild) -> std::io::Result<()> {
    PARENT.with(|p| match p.borrow_mut().as_mut() {
        Some(parent) => write_line(&mut parent.output, message),
        None => Err(std::io::Error::other("no parent to tell")),
    })
}

/// Asks the parent for `function(args)` and waits for the answer.
fn ask(function: &str, args: Map<String, Value>) -> anyhow::Result<Value> {
    PARENT.with(|p| {
        let mut guard = p.borrow_mut();
        let parent = guard
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("`{function}` has no parent to answer it here"))?;
        let call = FromChild::Call {
            function: function.to_owned(),
            args,
        };
        write_line(&mut parent.output, &call)?;
        match read_line::<Answer>(&mut parent.input)? {
            Answer::Ok { value } => Ok(value),
            Answer::Err { message } => Err(anyhow::anyhow!("{function}: {message}")),
        }
    })
}

/// [`ask`], with the answer allocated on the program's heap.
fn ask_value<'v>(
    eval: &mut Evaluator<'v, '_, '_>,
    function: &str,
    args: Value,
) -> anyhow::Result<StarValue<'v>> {
    let Value::Object(args) = args else {
        return Err(anyhow::anyhow!("`{function}`: arguments must be an object"));
    };
    let value = ask(function, args)?;
    Ok(eval.heap().alloc(value))
}

#[starlark_module]
fn fs_read_functions(builder: &mut GlobalsBuilder) {
    fn fs_read<'v>(
        #[starlark(require = pos)] path: &str,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<StarValue<'v>> {
        ask_value(eval, "fs_read", json!({ "path": path }))
    }

    fn fs_list<'v>(
        #[starlark(require = pos)] path: &str,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<StarValue<'v>> {
        ask_value(eval, "fs_list", json!({ "path": path }))
    }
}

#[starlark_module]
fn fs_write_functions(builder: &mut GlobalsBuilder) {
    fn fs_write<'v>(
        #[starlark(require = pos)] path: &str,
        #[starlark(require = pos)] text: &str,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<StarValue<'v>> {
        ask_value(eval, "fs_write", json!({ "path": path, "text": text }))
    }
}

#[starlark_module]
fn clock_functions(builder: &mut GlobalsBuilder) {
    fn clock_now<'v>(eval: &mut Evaluator<'v, '_, '_>) -> anyhow::Result<StarValue<'v>> {
        ask_value(eval, "clock_now", json!({}))
    }
}

#[starlark_module]
fn net_functions(builder: &mut GlobalsBuilder) {
    fn net_fetch<'v>(
        #[starlark(require = pos)] url: &str,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<StarValue<'v>> {
        ask_value(eval, "net_fetch", json!({ "url": url }))
    }
}

#[starlark_module]
fn mail_functions(builder: &mut GlobalsBuilder) {
    fn mail_send<'v>(
        #[starlark(require = pos)] to: &str,
        #[starlark(require = pos)] body: &str,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<StarValue<'v>> {
        ask_value(eval, "mail_send", json!({ "to": to, "body": body }))
    }
}

#[starlark_module]
fn spawn_functions(builder: &mut GlobalsBuilder) {
    fn spawn_child<'v>(
        #[starlark(require = pos)] name: &str,
        #[starlark(require = pos)] task: &str,
        #[starlark(require = pos)] grant: StarValue<'v>,
        #[starlark(require = pos)] loan: StarValue<'v>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<StarValue<'v>> {
        let args = json!({
            "name": name,
            "task": task,
            "grant": grant.to_json_value()?,
            "loan": loan.to_json_value()?,
        });
        ask_value(eval, "spawn_child", args)
    }

    fn await_answer<'v>(
        #[starlark(require = pos)] child: &str,
        #[starlark(require = pos)] secs: i32,
        #[starlark(require = pos)] menu: StarValue<'v>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<StarValue<'v>> {
        let args = json!({ "child": child, "secs": secs, "menu": menu.to_json_value()? });
        ask_value(eval, "await_answer", args)
    }

    fn retire_child<'v>(
        #[starlark(require = pos)] child: &str,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<StarValue<'v>> {
        ask_value(eval, "retire_child", json!({ "child": child }))
    }
}

#[starlark_module]
fn shell_functions(builder: &mut GlobalsBuilder) {
    fn shell_run<'v>(
        #[starlark(require = pos)] program: &str,
        #[starlark(require = pos)] args: StarValue<'v>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<StarValue<'v>> {
        let args = json!({ "program": program, "args": args.to_json_value()? });
        ask_value(eval, "shell_run", args)
    }
}

/// The standard library, built once, from which the kept builtins are copied.
fn standard() -> &'static Globals {
    static STANDARD: OnceLock<Globals> = OnceLock::new();
    STANDARD.get_or_init(Globals::standard)
}

/// The globals of a program with `footprint`: the kept builtins and the functions of each
/// declared admitted class. Classes that are not admitted add nothing (the surface check
/// refuses them).
pub fn for_footprint(footprint: &Footprint) -> Globals {
    let mut builder = GlobalsBuilder::new();
    for (name, value) in standard().iter() {
        if BUILTINS.contains(&name) {
            builder.set(name, value);
        }
    }
    for class in footprint.0.iter().filter_map(Class::of) {
        let add: fn(&mut GlobalsBuilder) = match class {
            Class::FsRead => fs_read_functions,
            Class::FsWrite => fs_write_functions,
            Class::Clock => clock_functions,
            Class::Net => net_functions,
            Class::Mail => mail_functions,
            Class::Spawn => spawn_functions,
            Class::Shell => shell_functions,
        };
        add(&mut builder);
    }
    builder.build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocabulary::{FUNCTIONS, functions_of};
    use std::collections::BTreeSet;

    fn names(globals: &Globals) -> BTreeSet<String> {
        globals.names().map(|n| n.as_str().to_owned()).collect()
    }

    #[test]
    fn each_class_brings_exactly_its_functions() {
        let bare = names(&for_footprint(&Footprint::default()));
        for f in FUNCTIONS {
            assert!(!bare.contains(f.name), "{} without its class", f.name);
        }
        assert!(!bare.contains("getattr") && !bare.contains("dir"));
        for class in Class::ALL {
            let with = names(&for_footprint(&Footprint::of([class.effect()])));
            let added: BTreeSet<String> = with.difference(&bare).cloned().collect();
            let expected: BTreeSet<String> =
                functions_of(class).map(|f| f.name.to_owned()).collect();
            assert_eq!(added, expected, "{class:?}");
        }
    }
}
