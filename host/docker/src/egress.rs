//! A container under an egress allow-list, or whose network is only for installs: no
//! network of its own, and a directory bind-mounted from the host holding the socket
//! of its [`EgressProxy`] and the `resolv.conf` that sends its DNS queries to the
//! agent's relay. Its installs go out through the agent's install proxy, with the
//! install's token ([`sandlot_agent::InstallProxy`]).

use crate::socket::open_to_container;
use bollard::models::{ContainerCreateBody, HostConfig};
use sandlot_container::proxy::{sandbox_environment, Access, EgressProxy, SANDBOX_ADDRESS};
use sandlot_core::backend::owner;
use sandlot_core::egress::Denial;
use sandlot_core::error::{Error, Result};
use sandlot_core::policy::Policy;
use std::collections::HashMap;
use std::os::unix::net::UnixListener;

/// Names of egress socket directories in the host's temp dir.
const EGRESS_PREFIX: &str = "sandlot-egress-";
/// Where the directory is in the container.
const EGRESS_DIR: &str = "/.sandlot/egress";

/// The proxy of one container and the directory its socket is in; both go when the
/// container does.
pub(super) struct Egress {
    proxy: EgressProxy,
    dir: tempfile::TempDir,
}

impl Egress {
    /// Starts the proxy for a container that will run as the policy's user, letting
    /// its code through to what `access` says.
    pub(super) fn start(
        policy: &Policy,
        access: Access,
        runtime: &tokio::runtime::Handle,
    ) -> Result<Egress> {
        let io = |context: &str| {
            let context = context.to_string();
            move |source| Error::Io { context, source }
        };
        let dir = tempfile::Builder::new()
            .prefix(&format!("{EGRESS_PREFIX}{}-", owner::owner_stamp()))
            .tempdir()
            .map_err(io("cannot create the egress proxy's socket directory"))?;
        let socket = dir.path().join("proxy.sock");
        let listener = UnixListener::bind(&socket)
            .and_then(|l| {
                open_to_container(dir.path(), &socket, policy.uid, policy.gid).map(|()| l)
            })
            .map_err(io(&format!("cannot listen on {}", socket.display())))?;
        let resolv = dir.path().join("resolv.conf");
        std::fs::write(
            &resolv,
            format!("nameserver {SANDBOX_ADDRESS}\noptions ndots:0 attempts:1\n"),
        )
        .and_then(|()| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&resolv, std::fs::Permissions::from_mode(0o644))
        })
        .map_err(io(&format!("cannot write {}", resolv.display())))?;
        let proxy = EgressProxy::serve_with(listener, policy.allow.clone(), access, runtime)
            .map_err(io("cannot start the egress proxy"))?;
        proxy.set_request_rules(policy.requests.clone());
        proxy
            .write_trust(dir.path())
            .map_err(io("cannot write the egress proxy's CA for the container"))?;
        Ok(Egress { proxy, dir })
    }

    /// What the allow-list refused since the last call.
    pub(super) fn take_denials(&self) -> Vec<Denial> {
        self.proxy.take_denials()
    }

    /// The proxy itself.
    pub(super) fn proxy(&self) -> &EgressProxy {
        &self.proxy
    }

    /// Cuts the container off every network and points it at the proxy instead: the
    /// agent relays the proxy port, ports 80 and 443 and DNS on the container's
    /// loopback to the socket, which it finds in `SANDLOT_EGRESS_SOCKET`.
    pub(super) fn configure(&self, config: &mut ContainerCreateBody) {
        let env = config.env.get_or_insert_with(Vec::new);
        env.extend(
            sandbox_environment(EGRESS_DIR)
                .into_iter()
                .map(|(name, value)| format!("{name}={value}")),
        );
        let host: &mut HostConfig = config.host_config.get_or_insert_with(Default::default);
        host.network_mode = Some("none".into());
        let dir = self.dir.path().display();
        host.binds.get_or_insert_with(Vec::new).extend([
            format!("{dir}:{EGRESS_DIR}:ro"),
            format!("{dir}/resolv.conf:/etc/resolv.conf:ro"),
        ]);
        // The relay listens on ports 53, 80 and 443 of the container's own loopback,
        // as the policy's unprivileged user; the setting is the container's network
        // namespace's alone.
        host.sysctls
            .get_or_insert_with(HashMap::new)
            .insert("net.ipv4.ip_unprivileged_port_start".into(), "0".into());
    }
}

/// Removes egress socket directories that processes killed while a sandbox was open
/// left in the temp dir.
pub(super) fn sweep_dirs() {
    owner::sweep_temp_dirs(EGRESS_PREFIX);
}
