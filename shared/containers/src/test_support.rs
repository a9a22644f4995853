//! Helpers for tests that need the real engine: the pipeline's images and a fresh site.
//!
//! Tests using these need a running Docker engine and, the first time, Debian's package
//! mirror (to build `l3m/busybox:dev` from `busybox-static`).
#![allow(clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The package the builds' tests fetch: the host the fetch stage's grant lists, served by a
/// package source each test starts on port 8080.
pub const PKG_HOST: &str = "pkgs.test";

/// The one package the package source serves, `greeting.sh`: it greets as `$GREETER`.
pub const GREETING_SH: &str = "echo \"hello from a $GREETER artifact\"\n";

/// The fetch stage's script as an agent's `build` call gives it: each file the lockfile names,
/// from [`PKG_HOST`] through the builder's proxy, into the cache.
pub const FETCH: &str = r#"for f in $(cat /lock/deps.lock); do printf 'GET http://pkgs.test:8080/%s HTTP/1.0\r\nHost: pkgs.test\r\n\r\n' "$f" | nc -w 10 "$L3M_PROXY_HOST" "$L3M_PROXY_PORT" > /tmp/resp; head -1 /tmp/resp | grep -q ' 200 ' || exit 3; sed '1,/^\r$/d' /tmp/resp > "/cache/$f"; done; echo fetched"#;

/// The busybox image tag the tests run, built once per test process by `deploy/images/build`.
pub fn busybox_image() -> String {
    static BUILT: OnceLock<String> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let script = repo_root().join("deploy/images/build");
            let out = Command::new(&script)
                .env("L3M_IMAGE_TAG", "dev")
                .output()
                .expect("run deploy/images/build");
            assert!(
                out.status.success(),
                "deploy/images/build failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            "l3m/busybox:dev".to_owned()
        })
        .clone()
}

/// The toolchain image (gcc, make; a debootstrap rootfs), built once per test process by
/// `deploy/images/build` with `L3M_TOOLCHAIN=1`: minutes and ~400 MB the first time.
pub fn toolchain_image() -> String {
    static BUILT: OnceLock<String> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let script = repo_root().join("deploy/images/build");
            let out = Command::new(&script)
                .env("L3M_IMAGE_TAG", "dev")
                .env("L3M_TOOLCHAIN", "1")
                .output()
                .expect("run deploy/images/build");
            assert!(
                out.status.success(),
                "deploy/images/build failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            "l3m/toolchain:dev".to_owned()
        })
        .clone()
}

/// A site name no other test uses, so reaping in one test never touches another's containers.
pub fn fresh_site(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("test-{test}-{}-{nanos}", std::process::id())
}

/// The workspace root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}
