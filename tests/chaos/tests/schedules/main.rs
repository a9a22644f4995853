//! The fault harness (issue 39, items 1–5): a site in containers (NATS, hubd, a sequencer
//! host; `site`), a workload of letters recording its history (`workload`), a nemesis of
//! kills, pauses and network cuts drawn from a seed (`nemesis`), and a checker that reads the
//! hub with plain git (`checker`). The images are deploy/compose/build-images's, holding this
//! test's own build of the services; nothing is pulled.
//!
//! Environment:
//! - `L3M_SEED`: the seed of the first schedule (each run prints its own); replays a run.
//! - `L3M_CHAOS_SCHEDULES`: how many schedules (default 1, for CI).
//! - `L3M_CHAOS_SECS`: how long each schedule's faults go on (default 25).
//!
//! Each schedule writes its plan, its history (`history.jsonl`) and the checker's verdict
//! (`verdict.txt`) into a folder of the system's temp dir it prints, kept after the test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod checker;
mod nemesis;
mod site;
mod workload;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nemesis::{Fault, Kind, Rng};
use site::{Images, Service, Site};
use workload::{Outcome, Workload};

/// `name`'s value in the environment, or `default`.
fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A folder for a schedule's readable record, kept after the test.
fn report_dir(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("l3m-chaos-{label}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Checks the hub of `site` (hubd stopped first) against `history`, writes the history and
/// the verdict into `report`, and returns the verdict.
async fn check_and_record(
    site: &Site,
    history: &[workload::Op],
    report: &std::path::Path,
) -> checker::Verdict {
    site.stop_hubd().await;
    let verdict = checker::check(&site.hub(), history);
    std::fs::write(report.join("history.jsonl"), workload::render(history)).unwrap();
    std::fs::write(report.join("verdict.txt"), verdict.render()).unwrap();
    eprintln!("chaos: history and verdict in {}", report.display());
    verdict
}

/// Random schedules under the plain images: every letter hubd acknowledged is in its inbox
/// exactly once, no letter is there that was not sent to it, and the hub passes
/// `git fsck --strict`, whatever kills, pauses and cuts hubd and the sequencer host took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_schedules_lose_double_and_invent_no_acknowledged_letter() {
    let schedules = env_or("L3M_CHAOS_SCHEDULES", 1);
    let span = Duration::from_secs(env_or("L3M_CHAOS_SECS", 25));
    site::build(Images::Dev);
    let first = Rng::seed_from_env();
    let mut seeds = Rng::seeded(first);
    let mut totals = (0, 0, 0, 0);
    let mut faults_by_kind = std::collections::BTreeMap::<Kind, usize>::new();
    for s in 0..schedules {
        let seed = if s == 0 { first } else { seeds.next() };
        let started = std::time::Instant::now();
        let mut rng = Rng::seeded(seed);
        let plan: Vec<Fault> = nemesis::plan(&mut rng, span);
        let report = report_dir(&format!("{seed}"));
        std::fs::write(report.join("plan.txt"), format!("seed {seed}\n{plan:#?}\n")).unwrap();
        eprintln!(
            "chaos: schedule {s} seed {seed}: {} faults over {span:?}",
            plan.len()
        );
        let mut site = Site::start(Images::Dev, &format!("s{s}")).await;
        site.start_seqhost().await;
        let stop = AtomicBool::new(false);
        let working = Workload::new(&site).run(Duration::from_millis(150), &stop);
        let faulting = async {
            let counts = nemesis::run(&site, &plan).await;
            // A quiet spell after the last heal, so the workload sees the site whole again.
            tokio::time::sleep(Duration::from_secs(2)).await;
            stop.store(true, Ordering::Relaxed);
            counts
        };
        let (history, counts) = tokio::join!(working, faulting);
        let verdict = check_and_record(&site, &history, &report).await;
        let ok = history
            .iter()
            .filter(|op| op.outcome == Outcome::Ok)
            .count();
        let (lost, doubled, fabricated) = verdict.totals();
        eprintln!(
            "chaos: schedule {s} seed {seed}: {} operations ({ok} ok), faults {counts:?}, \
             lost {lost} doubled {doubled} fabricated {fabricated}, in {:?}",
            history.len(),
            started.elapsed()
        );
        assert!(
            verdict.clean(),
            "seed {seed}: {}\n(record in {})",
            verdict.render(),
            report.display()
        );
        // The schedule exercised something: letters acknowledged, and faults that ran.
        assert!(ok >= 10, "seed {seed}: only {ok} letters acknowledged");
        assert!(!counts.is_empty(), "seed {seed}: no fault ran");
        totals.0 += history.len();
        totals.1 += lost;
        totals.2 += doubled;
        totals.3 += fabricated;
        for (kind, n) in counts {
            *faults_by_kind.entry(kind).or_default() += n;
        }
    }
    eprintln!(
        "chaos: {schedules} schedule(s): {} operations, faults {faults_by_kind:?}, \
         lost {} doubled {} fabricated {}",
        totals.0, totals.1, totals.2, totals.3
    );
}

/// The same fixed schedule — letters, hubd killed (-9) and restarted, more letters — under the
/// plain images and under hubd's fault switch (`fault-drop-acked-on-restart`, which drops an
/// inbox's newest letter when the hub is opened): the checker finds nothing in the first and
/// exactly the dropped acknowledged letter, lost, in the second. Not in CI: it builds hubd a
/// second time, with the switch (minutes on two cores); run it with `--ignored`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "builds hubd again with its fault switch; run with --ignored"]
async fn the_checker_reports_the_letter_hubds_fault_switch_drops_and_nothing_without_it() {
    site::build(Images::Fault);
    for images in [Images::Dev, Images::Fault] {
        let mut site = Site::start(images, &format!("{images:?}").to_lowercase()).await;
        site.start_seqhost().await;
        let mut work = Workload::new(&site);
        for _ in 0..6 {
            let op = work.step().await;
            assert_eq!(op.outcome, Outcome::Ok, "before any fault: {op:?}");
        }
        let hubd = site.container(Service::Hubd);
        let out = std::process::Command::new("docker")
            .args(["kill", "--signal", "KILL", hubd.id()])
            .output()
            .unwrap();
        assert!(out.status.success());
        hubd.start().await.unwrap();
        for _ in 0..6 {
            work.step().await;
        }
        let history = work.history;
        let report = report_dir(&format!("{images:?}").to_lowercase());
        let verdict = check_and_record(&site, &history, &report).await;
        eprintln!("{images:?}: {}", verdict.render());
        let (lost, doubled, fabricated) = verdict.totals();
        assert_eq!((doubled, fabricated), (0, 0), "{}", verdict.render());
        assert!(verdict.fsck.is_empty(), "{}", verdict.render());
        match images {
            Images::Dev => assert_eq!(lost, 0, "{}", verdict.render()),
            Images::Fault => {
                // The newest letter crew's inbox held before the restart, acknowledged.
                let dropped = history[..6]
                    .iter()
                    .filter(|op| op.to == "crew")
                    .map(|op| op.n)
                    .max()
                    .unwrap();
                assert_eq!(
                    verdict.inboxes["crew"].lost,
                    std::collections::BTreeSet::from([dropped]),
                    "{}",
                    verdict.render()
                );
                assert_eq!(lost, 1, "{}", verdict.render());
            }
        }
    }
}
