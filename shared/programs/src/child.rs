//! The evaluator process's main: parse its arguments, limit itself and filter its system calls
//! ([`crate::seccomp`]), read one request from its parent, answer it; or, serving, load one
//! program and answer its calls one after another.
//! `src/bin/l3m-program.rs` is a thin wrapper around [`main`].
//!
//! ```text
//! l3m-program check --memory-mib N --cpu-secs S      # stdin: CheckRequest; stdout: Checked
//! l3m-program run   --memory-mib N --cpu-secs S      # stdin: RunRequest;   stdout: Call…, Done
//! l3m-program check-hook --memory-mib N --cpu-secs S # stdin: CheckRequest; stdout: HookChecked
//! l3m-program hook  --memory-mib N --cpu-secs S      # stdin: HookRequest;  stdout: Decided
//! l3m-program serve --memory-mib N --cpu-secs S      # stdin: CheckRequest, then CallRequest…
//!                                                    # stdout: per call, Call…, Done
//! ```
//! A serving evaluator's `--cpu-secs` is each call's share ([`limits::renew_cpu`]); it ends
//! when its parent closes the pipe or after [`limits::SERVED_CALLS`] calls.
//!
//! Exit codes: 0 when a final line was written (whatever it says) or, serving, when the
//! parent closed the pipe or the calls were all served; 1 when the pipe or a limit failed;
//! 2 for bad arguments.

use std::io::{BufReader, Stdin, Write};
use std::process::ExitCode;

use crate::evaluate;
use crate::globals::{self, Parent};
use crate::limits::{self, Limits};
use crate::protocol::{
    CallRequest, CheckRequest, FromChild, HookRequest, LineError, RunRequest, read_line, write_line,
};
use crate::rule::RunError;
use crate::seccomp;

/// What the evaluator was asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Check,
    Run,
    CheckHook,
    Hook,
    Serve,
}

/// Parses `check|run|check-hook|hook|serve --memory-mib N --cpu-secs S`.
fn parse(args: &[String]) -> Result<(Mode, Limits), String> {
    let mode = match args.first().map(String::as_str) {
        Some("check") => Mode::Check,
        Some("run") => Mode::Run,
        Some("check-hook") => Mode::CheckHook,
        Some("hook") => Mode::Hook,
        Some("serve") => Mode::Serve,
        other => {
            return Err(format!(
                "expected `check`, `run`, `check-hook`, `hook` or `serve`, got {other:?}"
            ));
        }
    };
    let mut memory_mib = None;
    let mut cpu_secs = None;
    let mut rest = args[1..].iter();
    while let Some(flag) = rest.next() {
        let value = rest
            .next()
            .ok_or_else(|| format!("{flag} needs a value"))?
            .parse::<u64>()
            .map_err(|e| format!("{flag}: {e}"))?;
        match flag.as_str() {
            "--memory-mib" => memory_mib = Some(value),
            "--cpu-secs" => cpu_secs = Some(value),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok((
        mode,
        Limits {
            memory_mib: memory_mib.ok_or("--memory-mib is required")?,
            cpu_secs: cpu_secs.ok_or("--cpu-secs is required")?,
        },
    ))
}

/// The evaluator's main over its arguments (without the program name).
pub fn main(args: &[String]) -> ExitCode {
    let (mode, limits) = match parse(args) {
        Ok(parsed) => parsed,
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "l3m-program: {e}\nusage: l3m-program check|run|check-hook|hook|serve \
                 --memory-mib N --cpu-secs S"
            );
            return ExitCode::from(2);
        }
    };
    let mut stdout = std::io::stdout();
    let applied = match mode {
        Mode::Serve => limits::apply_serving(limits),
        _ => limits::apply(limits),
    };
    let confined = applied
        .map_err(|e| e.to_string())
        .and_then(|()| seccomp::confine().map_err(|e| e.to_string()));
    if let Err(e) = confined {
        let _ = writeln!(std::io::stderr(), "l3m-program: {e}");
        return ExitCode::from(1);
    }
    let mut stdin = BufReader::new(std::io::stdin());
    let written = match mode {
        Mode::Check => match read_line::<CheckRequest>(&mut stdin) {
            Ok(req) => write_line(
                &mut stdout,
                &FromChild::Checked {
                    result: evaluate::check(&req.file, &req.source),
                },
            ),
            Err(e) => Err(std::io::Error::other(e.to_string())),
        },
        Mode::Run => match read_line::<RunRequest>(&mut stdin) {
            Ok(req) => {
                globals::connect(Parent {
                    input: stdin,
                    output: std::io::stdout(),
                });
                let result = evaluate::run(&req.file, &req.source, req.input, req.steps);
                let result = result.map_err(|e| RunError {
                    file: req.file,
                    ..e
                });
                write_line(&mut stdout, &FromChild::Done { result })
            }
            Err(e) => Err(std::io::Error::other(e.to_string())),
        },
        Mode::CheckHook => match read_line::<CheckRequest>(&mut stdin) {
            Ok(req) => write_line(
                &mut stdout,
                &FromChild::HookChecked {
                    result: evaluate::check_hook(&req.file, &req.source),
                },
            ),
            Err(e) => Err(std::io::Error::other(e.to_string())),
        },
        Mode::Hook => match read_line::<HookRequest>(&mut stdin) {
            Ok(req) => write_line(
                &mut stdout,
                &FromChild::Decided {
                    result: evaluate::run_hook(&req.file, &req.source, req.events, req.steps),
                },
            ),
            Err(e) => Err(std::io::Error::other(e.to_string())),
        },
        Mode::Serve => serve(stdin, limits),
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "l3m-program: {e}");
            ExitCode::from(1)
        }
    }
}

/// Serves one program: checks and loads the program the first line names, once, then answers
/// each [`CallRequest`] with the program's calls and one `Done`, each call under its own CPU
/// limit, until the parent closes the pipe or [`limits::SERVED_CALLS`] calls are answered.
fn serve(stdin: BufReader<Stdin>, limits: Limits) -> std::io::Result<()> {
    let io = |e: LineError| std::io::Error::other(e.to_string());
    globals::connect(Parent {
        input: stdin,
        output: std::io::stdout(),
    });
    let named: CheckRequest = globals::receive().map_err(io)?;
    let program = evaluate::Program::load(&named.file, &named.source);
    for _ in 0..limits::SERVED_CALLS {
        let call: CallRequest = match globals::receive() {
            Ok(call) => call,
            Err(LineError::Closed) => return Ok(()),
            Err(e) => return Err(io(e)),
        };
        limits::renew_cpu(limits).map_err(std::io::Error::other)?;
        let result = match &program {
            Ok(program) => program.call(call.input, call.steps),
            Err(refused) => Err(refused.clone()),
        };
        globals::tell(&FromChild::Done { result })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn arguments_are_parsed_or_named() {
        assert_eq!(
            parse(&args("run --memory-mib 64 --cpu-secs 2")).unwrap(),
            (
                Mode::Run,
                Limits {
                    memory_mib: 64,
                    cpu_secs: 2
                }
            )
        );
        assert!(parse(&args("eval")).unwrap_err().contains("eval"));
        assert_eq!(
            parse(&args("hook --memory-mib 64 --cpu-secs 2")).unwrap().0,
            Mode::Hook
        );
        assert_eq!(
            parse(&args("serve --memory-mib 64 --cpu-secs 2"))
                .unwrap()
                .0,
            Mode::Serve
        );
        assert!(parse(&args("check --memory-mib x --cpu-secs 1")).is_err());
        assert!(
            parse(&args("check --cpu-secs 1"))
                .unwrap_err()
                .contains("memory")
        );
    }
}
