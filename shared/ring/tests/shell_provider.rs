//! The sandboxed shell does its job: listed programs run in the cwd, read the ACR, write the
//! write roots, take stdin and report their exit code.

use l3m_ring::test_support::shell_acr;

use l3m_core::effects::EffectClass;
use l3m_ring::shell::{ShellError, run};
use shell_acr::{Acr, request, script};

#[tokio::test]
async fn runs_a_listed_program_in_the_cwd_reading_the_acr() {
    let acr = Acr::new();
    let got = run(
        &acr.wild,
        &acr.files,
        &request("cat", &["../docs/guide.md"]),
    )
    .await
    .unwrap();
    assert_eq!(
        (got.status, got.stdout.as_slice()),
        (Some(0), &b"read me\n"[..])
    );
    assert!(!got.truncated && !got.timed_out);
}

#[tokio::test]
async fn writes_under_the_write_root_land_on_the_host() {
    let acr = Acr::new();
    let got = run(&acr.wild, &acr.files, &script("echo made > out.txt && pwd"))
        .await
        .unwrap();
    assert_eq!(
        got.status,
        Some(0),
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    assert_eq!(got.stdout, b"/acr/workspace\n");
    assert_eq!(
        std::fs::read(acr.path.join("workspace/out.txt")).unwrap(),
        b"made\n"
    );
}

#[tokio::test]
async fn stdin_is_fed_and_exit_codes_are_reported() {
    let acr = Acr::new();
    let mut sort = request("sort", &[]);
    sort.stdin = b"b\na\n".to_vec();
    let got = run(&acr.wild, &acr.files, &sort).await.unwrap();
    assert_eq!(got.stdout, b"a\nb\n");
    let got = run(&acr.wild, &acr.files, &script("echo oops >&2; exit 3"))
        .await
        .unwrap();
    assert_eq!(
        (got.status, got.stderr.as_slice()),
        (Some(3), &b"oops\n"[..])
    );
}

#[tokio::test]
async fn the_environment_is_empty_but_path_home_and_lang() {
    let acr = Acr::new();
    let got = run(&acr.wild, &acr.files, &request("sh", &["-c", "env | sort"]))
        .await
        .unwrap();
    let env = String::from_utf8(got.stdout).unwrap();
    let names: Vec<_> = env.lines().filter_map(|l| l.split('=').next()).collect();
    for name in &names {
        assert!(
            ["HOME", "LANG", "PATH", "PWD", "OLDPWD"].contains(name),
            "{env}"
        );
    }
}

#[tokio::test]
async fn a_wild_token_without_shell_is_refused() {
    let acr = Acr::new();
    let aws = acr.wild.narrow(&[]).unwrap();
    let err = run(&aws, &acr.files, &request("true", &[]))
        .await
        .unwrap_err();
    assert!(matches!(err, ShellError::NotGranted { .. }), "{err}");
    assert!(acr.wild.allows(&EffectClass::Shell));
}
