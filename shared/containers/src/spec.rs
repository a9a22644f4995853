//! A checked stage and its bound host folders → the engine's create request.
//!
//! Pure, so the hardening every container gets is visible in one function and testable
//! without an engine.

use std::collections::HashMap;
use std::path::PathBuf;

use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType};
use l3m_core::build::{MountRole, Network, Stage, StageOwner};

/// Label naming the process that owns a container; reaping at start removes exactly these.
pub const LABEL_OWNER: &str = "l3m.owner";
/// Label naming the stage a container runs, for logs and `docker ps`.
pub const LABEL_STAGE: &str = "l3m.stage";
/// Label naming the site (hub) a container belongs to, so two hubs on one engine never reap
/// each other's containers.
pub const LABEL_SITE: &str = "l3m.site";

impl Identity {
    /// The identity of this process: containers run as its own uid and gid, which own the
    /// folders it binds, so no container needs root or a capability to write its output.
    pub fn of_this_process(owner: StageOwner, site: impl Into<String>) -> Self {
        let uid = rustix::process::getuid().as_raw();
        let gid = rustix::process::getgid().as_raw();
        Identity {
            owner,
            site: site.into(),
            user: format!("{uid}:{gid}"),
        }
    }
}

/// Who starts a container: the owning process, its site, and the `uid:gid` it runs as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The builder or the runner.
    pub owner: StageOwner,
    /// The site (hub) name the containers are labelled with.
    pub site: String,
    /// `uid:gid` the containers run as (the driver's own, which owns the bound folders).
    pub user: String,
}

/// Host folders for a stage's mount roles, prepared by the service.
pub type Binds = HashMap<MountRole, PathBuf>;

/// A stage that cannot be turned into a container request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The plan mounts a role the service bound no folder for.
    #[error("stage {stage}: no host folder bound for the {role} mount")]
    Unbound {
        /// The stage.
        stage: String,
        /// The role left unbound.
        role: MountRole,
    },
    /// A fetch stage needs the internal network the builder made, and none was given.
    #[error("stage {stage}: asks for hosts but no internal network was prepared for it")]
    NoNetwork {
        /// The stage.
        stage: String,
    },
    /// A host folder's path is not UTF-8, which the engine's API cannot carry.
    #[error("stage {stage}: host folder {path:?} is not UTF-8")]
    PathNotUtf8 {
        /// The stage.
        stage: String,
        /// The folder.
        path: PathBuf,
    },
}

/// The network a fetch stage is attached to, and the environment that tells its tools the way
/// out (the builder's proxy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// The internal network's name.
    pub network: String,
    /// `NAME=value` lines added to the container's environment.
    pub env: Vec<String>,
}

/// The engine request for `stage`, started by `who`, attached per `attach` (the internal network
/// a fetch stage uses; every other stage gets `none`, and an attachment is ignored for it).
pub fn container_body(
    stage: &Stage,
    who: &Identity,
    binds: &Binds,
    attach: Option<&Attachment>,
) -> Result<ContainerCreateBody, SpecError> {
    let mut mounts = Vec::with_capacity(stage.mounts.len());
    for m in &stage.mounts {
        let host = binds.get(&m.role).ok_or_else(|| SpecError::Unbound {
            stage: stage.name.clone(),
            role: m.role,
        })?;
        let source = host.to_str().ok_or_else(|| SpecError::PathNotUtf8 {
            stage: stage.name.clone(),
            path: host.clone(),
        })?;
        mounts.push(Mount {
            target: Some(m.target.clone()),
            source: Some(source.to_owned()),
            typ: Some(MountType::BIND),
            read_only: Some(!m.writable),
            ..Default::default()
        });
    }
    let network_mode = match &stage.network {
        Network::None => "none".to_owned(),
        Network::Hosts(_) => attach
            .ok_or_else(|| SpecError::NoNetwork {
                stage: stage.name.clone(),
            })?
            .network
            .clone(),
    };
    let mut env = vec![
        "PATH=/usr/local/bin:/usr/bin:/bin".to_owned(),
        "HOME=/tmp".to_owned(),
    ];
    if let (Network::Hosts(_), Some(a)) = (&stage.network, attach) {
        env.extend(a.env.iter().cloned());
    }
    let limits = &stage.limits;
    let memory = i64::try_from(limits.memory_bytes).unwrap_or(i64::MAX);
    let host_config = HostConfig {
        mounts: Some(mounts),
        network_mode: Some(network_mode),
        cap_drop: Some(vec!["ALL".into()]),
        security_opt: Some(vec!["no-new-privileges".into()]),
        readonly_rootfs: Some(true),
        tmpfs: Some(HashMap::from([(
            "/tmp".to_owned(),
            format!("rw,nosuid,nodev,size={}", limits.tmp_bytes),
        )])),
        pids_limit: Some(i64::from(limits.pids)),
        memory: Some(memory),
        memory_swap: Some(memory),
        nano_cpus: Some(i64::try_from(limits.nano_cpus).unwrap_or(i64::MAX)),
        privileged: Some(false),
        ipc_mode: Some("private".into()),
        ..Default::default()
    };
    Ok(ContainerCreateBody {
        image: Some(stage.image.clone()),
        cmd: Some(stage.command.clone()),
        entrypoint: Some(Vec::new()),
        working_dir: Some(stage.workdir.clone()),
        user: Some(who.user.clone()),
        env: Some(env),
        labels: Some(HashMap::from([
            (LABEL_OWNER.to_owned(), who.owner.to_string()),
            (LABEL_SITE.to_owned(), who.site.clone()),
            (LABEL_STAGE.to_owned(), stage.name.clone()),
        ])),
        network_disabled: Some(matches!(stage.network, Network::None)),
        attach_stdout: Some(false),
        attach_stderr: Some(false),
        host_config: Some(host_config),
        ..Default::default()
    })
}
