//! An ACR on disk for the shell's tests: `workspace/` (the write root), `docs/` (read-only),
//! `.l3m/` (the harness's), and the tokens a shell run takes.

use std::path::PathBuf;
use std::time::Duration;

use crate::shell::ShellRequest;
use crate::tokens::{FilesToken, MintInput, WildToken, mint};
use l3m_core::effects::EffectClass;

/// The ACR and the tokens for it.
pub struct Acr {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
    pub files: FilesToken,
    pub wild: WildToken,
}

impl Acr {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        for d in ["workspace", "docs", ".l3m"] {
            std::fs::create_dir(path.join(d)).unwrap();
        }
        std::fs::write(path.join("docs/guide.md"), b"read me\n").unwrap();
        std::fs::write(path.join(".l3m/grants.toml"), b"secret\n").unwrap();
        let input = MintInput {
            acr: path.clone(),
            files: Some(vec!["workspace".into()]),
            wild: Some(vec![EffectClass::Shell]),
            ..MintInput::default()
        };
        let tokens = mint(&input, crate::ambient_authority()).unwrap();
        Self {
            _dir: dir,
            path,
            files: tokens.files.unwrap(),
            wild: tokens.wild.unwrap(),
        }
    }
}

/// `program args` in `workspace`, no stdin, 20 s, 64 KiB.
pub fn request(program: &str, args: &[&str]) -> ShellRequest {
    ShellRequest {
        program: program.into(),
        args: args.iter().map(|a| a.to_string()).collect(),
        cwd: "workspace".into(),
        stdin: Vec::new(),
        timeout: Duration::from_secs(20),
        max_output: 64 << 10,
    }
}

/// `sh -c script` in `workspace`.
pub fn script(script: &str) -> ShellRequest {
    request("sh", &["-c", script])
}
