//! Red team for the sandboxed shell: unlisted programs, the network, writes outside the write
//! roots, runaway time and output are each stopped by their named boundary.

use crate::shell_acr;

use std::io::Read;
use std::net::TcpListener;
use std::time::Duration;

use l3m_ring::shell::{ShellError, run};
use shell_acr::{Acr, request, script};

#[tokio::test]
async fn shell_boundary_program_not_on_the_list() {
    let acr = Acr::new();
    for program in ["curl", "bash", "python3"] {
        let err = run(&acr.wild, &acr.files, &request(program, &[]))
            .await
            .unwrap_err();
        assert!(
            matches!(err, ShellError::ProgramNotListed { .. }),
            "{program}: {err}"
        );
    }
    for program in ["/usr/bin/python3", "../../bin/sh", "./sh"] {
        let err = run(&acr.wild, &acr.files, &request(program, &[]))
            .await
            .unwrap_err();
        assert!(
            matches!(err, ShellError::ProgramIsPath { .. }),
            "{program}: {err}"
        );
    }
}

#[tokio::test]
async fn shell_boundary_no_network() {
    let acr = Acr::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let probe = format!(
        "ls /sys/class/net; cat /proc/net/dev; \
         bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' && echo CONNECTED"
    );
    let got = run(&acr.wild, &acr.files, &script(&probe)).await.unwrap();
    let stdout = String::from_utf8_lossy(&got.stdout);
    assert!(!stdout.contains("CONNECTED"), "{stdout}");
    assert!(
        !stdout.contains("eth0") && stdout.contains("lo:"),
        "{stdout}"
    );
    // The listener on the host's loopback saw no connection.
    let mut seen = listener.accept().map(|(mut s, _)| {
        let mut b = String::new();
        let _ = s.read_to_string(&mut b);
        b
    });
    assert!(seen.as_mut().is_err(), "{seen:?}");
}

#[tokio::test]
async fn shell_boundary_no_write_to_the_acr_root_or_docs() {
    let acr = Acr::new();
    let got = run(
        &acr.wild,
        &acr.files,
        &script(
            "echo x > /acr/planted; echo x > ../docs/guide.md; echo x > /usr/planted; echo done",
        ),
    )
    .await
    .unwrap();
    assert_eq!(got.stdout, b"done\n");
    assert!(String::from_utf8_lossy(&got.stderr).contains("Read-only"));
    assert!(!acr.path.join("planted").exists());
    assert_eq!(
        std::fs::read(acr.path.join("docs/guide.md")).unwrap(),
        b"read me\n"
    );
}

#[tokio::test]
async fn shell_boundary_host_tmp_untouched() {
    let acr = Acr::new();
    let marker = format!("/tmp/l3m-redteam-{}", std::process::id());
    let got = run(
        &acr.wild,
        &acr.files,
        &script(&format!("echo x > {marker} && cat {marker}")),
    )
    .await
    .unwrap();
    assert_eq!(got.stdout, b"x\n", "the private /tmp is writable");
    assert!(
        !std::path::Path::new(&marker).exists(),
        "host /tmp untouched"
    );
}

#[tokio::test]
async fn shell_boundary_harness_hidden_and_read_only() {
    let acr = Acr::new();
    let got = run(
        &acr.wild,
        &acr.files,
        &script(
            "ls -A /acr/.l3m; cat /acr/.l3m/grants.toml; echo x > /acr/.l3m/planted; echo done",
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        got.stdout,
        b"done\n",
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    assert!(!acr.path.join(".l3m/planted").exists());
    assert_eq!(
        std::fs::read(acr.path.join(".l3m/grants.toml")).unwrap(),
        b"secret\n"
    );
    let mut inside = request("ls", &[]);
    inside.cwd = ".l3m".into();
    let err = run(&acr.wild, &acr.files, &inside).await.unwrap_err();
    assert!(matches!(err, ShellError::Cwd { .. }), "{err}");
}

#[tokio::test]
async fn shell_boundary_runaway_is_killed_at_the_deadline() {
    let acr = Acr::new();
    let mut forever = script("while true; do :; done");
    forever.timeout = Duration::from_millis(300);
    let got = run(&acr.wild, &acr.files, &forever).await.unwrap();
    assert!(got.timed_out && got.status.is_none(), "{got:?}");
}

#[tokio::test]
async fn shell_boundary_output_flood_cut_at_the_limit() {
    let acr = Acr::new();
    let mut flood = script("while true; do echo yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy; done");
    flood.max_output = 10_000;
    let got = run(&acr.wild, &acr.files, &flood).await.unwrap();
    assert!(got.truncated && !got.timed_out, "{got:?}");
    assert_eq!(got.stdout.len(), 10_000);
}
