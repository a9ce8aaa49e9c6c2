//! What is done to a container whatever made it: removing it, and where the agent and
//! its socket directories are, which sweeping after a killed host needs.

use bollard::query_parameters::RemoveContainerOptions;
use bollard::Docker;
use sandlot_core::backend::{owner, wait};
use std::time::Duration;

/// Names of agent socket directories in the host's temp dir.
pub(crate) const IPC_PREFIX: &str = "sandlot-ipc-";

pub(crate) const AGENT_PATH: &str = "/.sandlot/agent";

/// Kills and deletes a container in one request; `None` if the runtime is gone. A
/// container that is already gone, or going (it removes itself when its agent exits),
/// counts as removed. Podman, busy with other containers, sometimes fails a removal it
/// then does at the second try, so failures are retried a few times.
pub(crate) fn remove(
    docker: &Docker,
    runtime: &tokio::runtime::Handle,
    id: String,
) -> Option<std::result::Result<(), bollard::errors::Error>> {
    let docker = docker.clone();
    wait(runtime, async move {
        let mut attempt = 0;
        loop {
            let result = docker
                .remove_container(
                    &id,
                    Some(RemoveContainerOptions {
                        force: true,
                        v: true,
                        ..Default::default()
                    }),
                )
                .await;
            attempt += 1;
            match result {
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 404, ..
                }) => return Ok(()),
                Err(_) if attempt < 6 => {
                    tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
                }
                other => return other,
            }
        }
    })
}

/// Removes agent socket directories that processes killed while starting a sandbox
/// left in the temp dir.
pub(crate) fn sweep_ipc_dirs() {
    owner::sweep_temp_dirs(IPC_PREFIX);
}
