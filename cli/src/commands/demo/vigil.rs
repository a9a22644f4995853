//! The demo's vigils: the human pins a vigil on `keeper` that it cannot cancel; keeper arms
//! its own with the `watch` tool, is refused when it tries to `unwatch` the pinned one, and
//! sleeps; hubd fires each vigil once, and each firing reaches keeper as one event (waking it
//! if it sleeps).

use std::time::{Duration, Instant};

use l3m_core::log::{Record, RecordBody};
use l3m_core::vigil::Watch;
use l3m_wire::client::HubClient;

use super::credentials::Seen;
use super::{assign, name, runtime};
use crate::error::CliError;
use crate::render::time::now_ms;

/// The agent that keeps time.
pub const AGENT: &str = "keeper";

/// How long after its spawn the human's pinned vigil fires.
const PINNED_SECS: u64 = 3;

/// Spawns keeper, pins a vigil on it as the human, gives it its task, and waits until both
/// vigils have reached its Log and it answered the last one.
pub async fn step(me: &HubClient, within: Duration) -> Result<Seen, CliError> {
    let keeper = name(AGENT)?;
    let mut pinned = None;
    // Pinned before the task reaches keeper, so the vigil it is refused is already there.
    let pin = async || {
        let at = now_ms() + PINNED_SECS * 1000;
        let armed = me
            .arm_vigil(&keeper, Watch::Deadline { at_ms: at }, at + 600_000)
            .await?;
        pinned = Some(armed.id);
        Ok(())
    };
    assign(me, &keeper, "", pin, "Keep time: set a reminder.").await?;
    let pinned = pinned.unwrap_or_default();
    let deadline = Instant::now() + within;
    let log = loop {
        let log = me.read_log_from(&keeper, 0).await?.records;
        if vigil_events(&log) >= 2 && log.last().is_some_and(|r| r.body == RecordBody::TurnEnd) {
            break log;
        }
        if Instant::now() > deadline {
            return Err(runtime(format!(
                "{keeper}'s vigils did not both fire within {within:?}; `l3m vigil ls {keeper} --all` \
                 and `l3m log {keeper}` show how far it got"
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let refused = log.iter().any(|r| {
        matches!(&r.body, RecordBody::ToolResult { output, is_error: true, .. }
            if output.contains("pinned by human:"))
    });
    let mut text = format!(
        "\nvigils: the human pinned {} on {keeper} (a deadline in {PINNED_SECS} s); {keeper} armed \
         its own with `watch`, could not `unwatch` the pinned one, slept, and was told of each:\n",
        pinned
    );
    for record in &log {
        if let RecordBody::Event { id, text: said, .. } = &record.body
            && id.as_str().starts_with("vigil-")
        {
            text.push_str(&format!("  {said}\n"));
        }
    }
    Ok(Seen {
        checks: vec![
            (
                "keeper could not cancel the vigil the human pinned on it",
                refused,
            ),
            (
                "both vigils fired once each and reached keeper as events",
                vigil_events(&log) == 2,
            ),
        ],
        text,
    })
}

/// How many fired vigils the Log journaled.
fn vigil_events(log: &[Record]) -> usize {
    log.iter()
        .filter(|r| matches!(&r.body, RecordBody::Event { id, .. } if id.as_str().starts_with("vigil-")))
        .count()
}
