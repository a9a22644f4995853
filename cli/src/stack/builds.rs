//! The builder and the runner in the local stack: `l3m up` starts both beside the sequencer
//! supervisor when a Docker engine answers and both binaries are found, so an agent granted
//! `build` and `run` can build on a plain `l3m up`; otherwise it says in one line why builds
//! are off and starts the rest.
//!
//! Asked for by name (`--services builder,runner`), they are like any other service: a missing
//! engine or binary is an error, and nothing starts.

use std::path::{Path, PathBuf};

use super::Service;

/// The two halves of a build, in start order.
pub const STAGES: [Service; 2] = [Service::Builder, Service::Runner];

/// The artifact cache both share, relative to the hub folder (as in the compose site).
pub const CACHE: &str = "cache/artifacts";

/// The artifact cache of the hub at `root`.
pub fn cache(root: &Path) -> PathBuf {
    root.join(CACHE)
}

/// Whether `l3m up` adds the builder and the runner on its own: when agents run here (the
/// sequencer starts) and neither was named.
pub fn implied(services: &[Service]) -> bool {
    services.contains(&Service::Sequencer) && !services.iter().any(|s| STAGES.contains(s))
}

/// What `l3m up` does about builds when they are implied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Start both, from these binaries.
    Start(Vec<(Service, PathBuf)>),
    /// Start neither; the line says why.
    Off(String),
}

/// Decides from whether the engine answers and where each binary is (or why it is not found).
pub fn decide(
    engine: Result<(), String>,
    builder: Result<PathBuf, String>,
    runner: Result<PathBuf, String>,
) -> Decision {
    let off = |why: String| Decision::Off(format!("builds are off: {why}"));
    if let Err(why) = engine {
        return off(format!(
            "{why}; the builder and the runner need a Docker engine (`l3m doctor` checks it)"
        ));
    }
    match (builder, runner) {
        (Ok(b), Ok(r)) => Decision::Start(vec![(Service::Builder, b), (Service::Runner, r)]),
        (Err(why), _) | (_, Err(why)) => off(why),
    }
}

/// The one line `l3m up` prints when an implied stage started and then exited: the first line
/// of why, and where its log is.
pub fn exited_line(service: Service, why: &str, log: &Path) -> String {
    let first = why.lines().next().unwrap_or(why);
    format!(
        "builds are off: {first} (the {} log: {})",
        service.as_str(),
        log.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn implied_beside_the_sequencer_unless_one_is_named() {
        assert!(implied(&[Service::Hubd, Service::Sequencer]));
        assert!(!implied(&[Service::Hubd]));
        assert!(!implied(&[Service::Sequencer, Service::Runner]));
    }

    #[test]
    fn both_start_only_with_an_engine_and_both_binaries() {
        let b = || Ok(PathBuf::from("/bin/builder"));
        let r = || Ok(PathBuf::from("/bin/runner"));
        assert_eq!(
            decide(Ok(()), b(), r()),
            Decision::Start(vec![
                (Service::Builder, PathBuf::from("/bin/builder")),
                (Service::Runner, PathBuf::from("/bin/runner")),
            ])
        );
        let Decision::Off(why) = decide(Err("no engine at unix:///x".into()), b(), r()) else {
            panic!("started without an engine");
        };
        assert!(
            why.contains("no engine at unix:///x") && !why.contains('\n'),
            "{why}"
        );
        let Decision::Off(why) = decide(Ok(()), b(), Err("cannot find `runner`".into())) else {
            panic!("started without the runner");
        };
        assert!(why.contains("`runner`"), "{why}");
    }

    #[test]
    fn an_exit_is_one_line_naming_the_log() {
        let line = exited_line(
            Service::Builder,
            "builder exited with 1\nline two",
            Path::new("/h/.l3m-run/builder.log"),
        );
        assert!(line.contains("builder exited with 1") && !line.contains("line two"));
        assert!(line.contains("/h/.l3m-run/builder.log"));
    }
}
