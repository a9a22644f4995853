//! What the file provider's checks and journal cost, against raw cap-std doing the same IO.
//!
//! Prints a table; run with `cargo bench -p l3m-ring --bench files`. Each figure is the median
//! of several rounds, provider and reference interleaved so both see the same cache and disk:
//! - read: 10k small files through `files::read` vs `Dir::read` of the same paths (target ≤ 1.15);
//! - write (new): 1k new files through `files::write` with entries kept in a `MemoryUndo` (their durable
//!   home, the hub's undo chain, costs one hubd append: `cargo bench -p hubd`) vs `Dir::create` + `write_all` + `sync_all` of the same files (target ≤ 2.0);
//! - write (overwrite): the same over existing files, so the provider also reads and records
//!   each prior content.

use std::error::Error;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use cap_std::fs::Dir;
use l3m_ring::tokens::{FilesToken, MintInput, mint};
use l3m_ring::undo::MemoryUndo;
use l3m_ring::{ambient_authority, files};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

const READ_FILES: usize = 10_000;
const WRITE_FILES: usize = 1_000;
const PER_DIR: usize = 100;
const READ_ROUNDS: usize = 9;
const WRITE_ROUNDS: usize = 7;
/// Files written by one side before the other takes its turn.
const CHUNK: usize = 50;

fn main() -> Result<()> {
    let acr = tempfile::tempdir()?;
    std::fs::create_dir(acr.path().join("workspace"))?;
    let input = MintInput {
        acr: acr.path().into(),
        files: Some(vec!["workspace".into()]),
        ..MintInput::default()
    };
    let token = mint(&input, ambient_authority())?
        .files
        .ok_or("mint conferred no files token")?;
    let raw = Dir::open_ambient_dir(acr.path(), ambient_authority())?;
    let journal = MemoryUndo::default();

    println!(
        "{:<22} {:>12} {:>12} {:>8} {:>8}",
        "case", "provider", "raw cap-std", "ratio", "target"
    );
    let read = bench_read(acr.path(), &token, &raw)?;
    row("read 10k small", read, 1.15);
    let new = bench_write(&token, &raw, &journal, false)?;
    row("write+journal 1k new", new, 2.0);
    let over = bench_write(&token, &raw, &journal, true)?;
    row("write+journal 1k over", over, 2.0);
    Ok(())
}

fn row(case: &str, (provider, raw): (Duration, Duration), target: f64) {
    let ratio = provider.as_secs_f64() / raw.as_secs_f64();
    println!(
        "{case:<22} {:>10.2}ms {:>10.2}ms {ratio:>8.3} {:>8}",
        provider.as_secs_f64() * 1e3,
        raw.as_secs_f64() * 1e3,
        format!("≤ {target}"),
    );
}

fn path(dir: &str, i: usize) -> String {
    format!("workspace/{dir}{}/f{}", i / PER_DIR, i % PER_DIR)
}

fn make_dirs(root: &Path, dir: &str, n: usize) -> Result<()> {
    for d in 0..n.div_ceil(PER_DIR) {
        std::fs::create_dir_all(root.join(format!("workspace/{dir}{d}")))?;
    }
    Ok(())
}

fn content(i: usize) -> Vec<u8> {
    format!("file {i}: {}\n", "x".repeat(64 + i % 128)).into_bytes()
}

fn bench_read(root: &Path, token: &FilesToken, raw: &Dir) -> Result<(Duration, Duration)> {
    make_dirs(root, "r", READ_FILES)?;
    let paths: Vec<String> = (0..READ_FILES).map(|i| path("r", i)).collect();
    for (i, p) in paths.iter().enumerate() {
        std::fs::write(root.join(p), content(i))?;
    }
    let mut provider = Vec::new();
    let mut reference = Vec::new();
    // a warm-up pass of each, then interleaved rounds
    for round in 0..=READ_ROUNDS {
        let t = Instant::now();
        let mut bytes = 0;
        for p in &paths {
            bytes += files::read(token, p)?.len();
        }
        let through_provider = t.elapsed();
        let t = Instant::now();
        let mut raw_bytes = 0;
        for p in &paths {
            raw_bytes += raw.read(p)?.len();
        }
        let through_raw = t.elapsed();
        if bytes != raw_bytes {
            return Err(format!("read {bytes} bytes through the provider, {raw_bytes} raw").into());
        }
        if round > 0 {
            provider.push(through_provider);
            reference.push(through_raw);
        }
    }
    Ok((median(provider), median(reference)))
}

fn bench_write(
    token: &FilesToken,
    raw: &Dir,
    journal: &MemoryUndo,
    overwrite: bool,
) -> Result<(Duration, Duration)> {
    let root = token.acr_path().to_path_buf();
    let mut provider = Vec::new();
    let mut reference = Vec::new();
    for round in 0..WRITE_ROUNDS {
        let (p_dir, r_dir) = (format!("p{round}_"), format!("q{round}_"));
        make_dirs(&root, &p_dir, WRITE_FILES)?;
        make_dirs(&root, &r_dir, WRITE_FILES)?;
        let p_paths: Vec<String> = (0..WRITE_FILES).map(|i| path(&p_dir, i)).collect();
        let r_paths: Vec<String> = (0..WRITE_FILES).map(|i| path(&r_dir, i)).collect();
        if overwrite {
            for (p, r) in p_paths.iter().zip(&r_paths) {
                std::fs::write(root.join(p), b"old content\n")?;
                std::fs::write(root.join(r), b"old content\n")?;
            }
        }
        // Interleaved in chunks, so a burst of disk load from elsewhere hits both sides alike.
        let (mut through_provider, mut through_raw) = (Duration::ZERO, Duration::ZERO);
        for chunk in (0..WRITE_FILES).collect::<Vec<_>>().chunks(CHUNK) {
            let t = Instant::now();
            for &i in chunk {
                files::write(token, &p_paths[i], &content(i), journal)?;
            }
            through_provider += t.elapsed();
            let t = Instant::now();
            for &i in chunk {
                let mut f = raw.create(&r_paths[i])?;
                f.write_all(&content(i))?;
                f.sync_all()?;
            }
            through_raw += t.elapsed();
        }
        provider.push(through_provider);
        reference.push(through_raw);
    }
    Ok((median(provider), median(reference)))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}
