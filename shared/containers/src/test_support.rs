//! Helpers for tests that need the real engine: the pipeline's images and a fresh site.
//!
//! Tests using these need a running Docker engine and, the first time, Debian's package
//! mirror (to build `l3m/busybox:dev` from `busybox-static`).
#![allow(clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

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
