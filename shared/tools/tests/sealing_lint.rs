//! The sealing linter fires: `shared/tools/clippy.toml`, copied at test time into a scratch copy
//! of a fixture crate, makes `cargo clippy -- -D warnings` fail on a tool body that calls
//! `std::fs::write`, `std::process::Command::new` and friends, and pass a body that does not.
//! A control run of the leaky fixture without the config passes, so it is the config that fires.
// The test is harness work: it copies files and starts cargo, which tool bodies may never do.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::unwrap_used
)]

use std::path::Path;
use std::process::Command;

/// The real config, the one this crate is linted with.
fn real_config() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clippy.toml")
}

/// Lints a scratch copy of `tests/fixtures/<fixture>`, with the real config when `sealed`.
/// Returns whether clippy passed, and its diagnostics.
fn lint(fixture: &str, sealed: bool) -> (bool, String) {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(fixture);
    let work = tempfile::tempdir().unwrap();
    let krate = work.path().join(fixture);
    std::fs::create_dir_all(krate.join("src")).unwrap();
    for file in ["Cargo.toml", "src/lib.rs"] {
        std::fs::copy(source.join(file), krate.join(file)).unwrap();
    }
    if sealed {
        std::fs::copy(real_config(), krate.join("clippy.toml")).unwrap();
        assert_eq!(
            std::fs::read(krate.join("clippy.toml")).unwrap(),
            std::fs::read(real_config()).unwrap()
        );
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["clippy", "--offline", "--quiet", "--manifest-path"])
        .arg(krate.join("Cargo.toml"))
        .args(["--", "-D", "warnings"])
        .env("CARGO_TARGET_DIR", work.path().join("target"))
        .env_remove("CLIPPY_CONF_DIR")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.success(), text)
}

#[test]
fn the_real_config_fails_a_leaky_tool_naming_each_escape() {
    let (passed, diagnostics) = lint("leaky_tool", true);
    assert!(!passed, "clippy passed a leaky tool:\n{diagnostics}");
    for escape in [
        "disallowed method `std::fs::write`",
        "disallowed method `std::process::Command::new`",
        "disallowed type `std::process::Command`",
        "disallowed method `std::env::var`",
        "disallowed method `std::net::TcpStream::connect`",
        "disallowed method `std::time::SystemTime::now`",
    ] {
        assert!(
            diagnostics.contains(escape),
            "missing `{escape}` in:\n{diagnostics}"
        );
    }
    assert!(diagnostics.contains("tool bodies reach files only through l3m_ring::effects"));
}

#[test]
fn the_real_config_passes_a_sealed_tool() {
    let (passed, diagnostics) = lint("clean_tool", true);
    assert!(passed, "clippy refused a sealed tool:\n{diagnostics}");
    assert!(!diagnostics.contains("disallowed"), "{diagnostics}");
}

#[test]
fn without_the_config_the_leaky_tool_passes_so_the_config_is_what_fires() {
    let (passed, diagnostics) = lint("leaky_tool", false);
    assert!(
        passed,
        "the control run failed for another reason:\n{diagnostics}"
    );
}
