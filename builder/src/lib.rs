//! `builder`: runs the fetch and build stages of a build in containers.
//!
//! The builder owns the write half of W^X builds (DESIGN §8). It serves one request,
//! `builder.build` ([`l3m_wire::build`]): a plan of fetch and build stages, checked by the
//! core's gate, carrying hubd's voucher that the agent's grant covers exactly this build
//! ([`l3m_wire::build::gate`]), each stage run in a hardened container through
//! [`l3m_containers`]. A fetch sees only
//! the lockfile folder and reaches only the hosts its plan lists, through the builder's
//! allowlisting proxy on an internal network ([`egress`]); a build sees the source and the
//! fetched cache read-only, no network, and writes one artifact folder, which is stored by its
//! blake3 digest. The digest is all that leaves: the caller hands it to the runner.
//!
//! **Must never** run a built artifact (a run stage is refused before anything starts), build
//! without a voucher, mount anything outside the vouched agent's ACR, or ask any service but
//! hubd's build policy (its NATS user cannot).
//!
//! # Layout
//! - [`pipeline`]: one request, from the gate to the artifact's digest.
//! - [`egress`]: the fetch stage's internal network and allowlisting proxy.
//! - [`serve`]: the request loop on the bus.

pub mod egress;
pub mod pipeline;

use std::sync::Arc;

use l3m_containers::Driver;
use l3m_containers::service::{Meter, Pins, Serving};
use l3m_core::build::StageOwner;
use l3m_wire::WireError;
use l3m_wire::build::gate::VoucherGate;
use l3m_wire::build::{BuildReply, BuildRequest, OP_BUILD};
use l3m_wire::bus::Bus;
use l3m_wire::subjects::{Operation, Service, Subjects};
use l3m_wire::typed::{ServeOptions, TypedRequest, TypedServer};
use tokio_util::sync::CancellationToken;

pub use pipeline::{BuildError, Config};

/// Subscribes to the build op of `subjects`' hub and serves it until `shutdown`, taking only
/// requests whose voucher `gate` admits (with `pins`, the driver's pins re-read from hubd first),
/// and answers the builder's health requests. Returns
/// once both subscriptions are live, so a caller can send at once.
pub async fn serve(
    bus: &dyn Bus,
    subjects: &Subjects,
    driver: Driver,
    config: Config,
    gate: Arc<VoucherGate>,
    pins: Option<Pins>,
    shutdown: CancellationToken,
) -> Result<Serving, WireError> {
    let subject = subjects.request(Service::Builder, &Operation::parse(OP_BUILD)?);
    // Stages are heavy: a few at a time, the rest wait in the subscription's queue.
    let options = ServeOptions {
        max_in_flight: 2,
        ..ServeOptions::default()
    };
    let server = TypedServer::<BuildRequest, BuildReply>::bind(bus, &subject, options).await?;
    let meter = Arc::new(Meter::new(StageOwner::Builder));
    let health = meter
        .serve(bus, subjects, driver.clone(), shutdown.clone())
        .await?;
    let state = Arc::new((driver, config, gate, pins, Arc::clone(&meter)));
    let building = server.run(
        move |req: TypedRequest<BuildRequest>| {
            let state = Arc::clone(&state);
            async move {
                let (driver, config, gate, pins, meter) = &*state;
                let taken = meter.take();
                if let Some(pins) = pins {
                    pins.follow(driver).await;
                }
                pipeline::build(driver, config, gate, &req.body)
                    .await
                    .map_err(|e| {
                        taken.refused();
                        tracing::info!(error = %e, "build refused");
                        e.to_remote()
                    })
            }
        },
        shutdown,
    );
    let task = tokio::spawn(async move {
        building.await;
        let _ = health.await;
    });
    Ok(Serving { task, meter })
}
