//! `builder`: runs the fetch and build stages of a build in containers.
//!
//! The builder owns the write half of W^X builds (DESIGN §8). It serves `builder.upload`, a
//! build's source and lockfile folders as a bundle, kept for the voucher it came under
//! ([`uploads`]), and `builder.build` ([`l3m_wire::build`]): a plan of fetch and build stages, checked by the
//! core's gate, carrying hubd's voucher that the agent's grant covers exactly this build
//! ([`l3m_wire::build::gate`]), each stage run in a hardened container through
//! [`l3m_containers`]. A fetch sees only
//! the lockfile folder and reaches only the hosts its plan lists, through the builder's
//! allowlisting proxy on an internal network ([`egress`]); a build sees the source and the
//! fetched cache read-only, no network, and writes one artifact folder, which is stored by its
//! blake3 digest. The digest is all that leaves: the caller hands it to the runner.
//!
//! **Must never** run a built artifact (a run stage is refused before anything starts), build
//! without a voucher, build a source but the one its voucher brought, mount anything but that
//! source's own folders, or ask any service but hubd's build policy (its NATS user cannot).
//!
//! # Layout
//! - [`pipeline`]: one request, from the gate to the artifact's digest.
//! - [`uploads`]: the sources uploaded and not yet built, by voucher.
//! - [`egress`]: the fetch stage's internal network and allowlisting proxy.
//! - [`serve`]: the request loop on the bus.

pub mod egress;
pub mod pipeline;
pub mod uploads;

use std::sync::Arc;

use l3m_containers::Driver;
use l3m_containers::service::{Meter, Pins, Serving};
use l3m_core::build::StageOwner;
use l3m_wire::WireError;
use l3m_wire::build::gate::VoucherGate;
use l3m_wire::build::{BuildReply, BuildRequest, OP_BUILD, OP_UPLOAD, UploadSource, Uploaded};
use l3m_wire::bus::Bus;
use l3m_wire::subjects::{Operation, Service, Subjects};
use l3m_wire::typed::{ServeOptions, TypedRequest, TypedServer};
use tokio_util::sync::CancellationToken;

pub use pipeline::{BuildError, Config};
use uploads::Uploads;

/// Subscribes to the upload and build ops of `subjects`' hub and serves them until `shutdown`:
/// an upload's chunks are kept when `gate` checks their voucher, a build runs when `gate`
/// admits its voucher (with `pins`, the driver's pins re-read from hubd first), from the source
/// uploaded under it; and answers the builder's health requests. Returns once every
/// subscription is live, so a caller can send at once.
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
    let uploads = Arc::new(Uploads::default());
    let uploading = serve_uploads(
        bus,
        subjects,
        Arc::clone(&gate),
        Arc::clone(&uploads),
        &shutdown,
    )
    .await?;
    let state = Arc::new((driver, config, gate, pins, Arc::clone(&meter), uploads));
    let building = server.run(
        move |req: TypedRequest<BuildRequest>| {
            let state = Arc::clone(&state);
            async move {
                let (driver, config, gate, pins, meter, uploads) = &*state;
                let taken = meter.take();
                if let Some(pins) = pins {
                    pins.follow(driver).await;
                }
                pipeline::build(driver, config, gate, uploads, &req.body)
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
        tokio::join!(building, uploading);
        let _ = health.await;
    });
    Ok(Serving { task, meter })
}

/// Binds `builder.upload`: each chunk's voucher is checked (signed, in time, not yet taken,
/// for a build) and the chunk kept in `uploads`; returns the loop to run until `shutdown`.
async fn serve_uploads(
    bus: &dyn Bus,
    subjects: &Subjects,
    gate: Arc<VoucherGate>,
    uploads: Arc<Uploads>,
    shutdown: &CancellationToken,
) -> Result<impl std::future::Future<Output = ()> + use<>, WireError> {
    let subject = subjects.request(Service::Builder, &Operation::parse(OP_UPLOAD)?);
    let server =
        TypedServer::<UploadSource, Uploaded>::bind(bus, &subject, ServeOptions::default()).await?;
    Ok(server.run(
        move |req: TypedRequest<UploadSource>| {
            let (gate, uploads) = (Arc::clone(&gate), Arc::clone(&uploads));
            async move {
                let chunk = &req.body;
                let voucher = gate
                    .check(Some(&chunk.vouched), |v| match v.cover {
                        l3m_core::build::Cover::Build { .. } => Ok(()),
                        _ => Err(l3m_core::build::Uncovered::Elsewhere {
                            vouched: v.cover.to_string(),
                            asked: "the upload of a build's source".into(),
                        }),
                    })
                    .await
                    .map_err(|e| e.to_remote())?;
                let now = l3m_core::clock::now_ms();
                uploads
                    .receive(
                        &voucher.nonce,
                        voucher.expires_ms,
                        chunk.total,
                        chunk.offset,
                        &chunk.bytes,
                        now,
                    )
                    .map_err(|e| {
                        tracing::info!(error = %e, "upload refused");
                        e.to_remote()
                    })
            }
        },
        shutdown.clone(),
    ))
}
