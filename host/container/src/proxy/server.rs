//! [`EgressProxy`]: the socket served, and each connection's first line read and
//! handed to what serves it.

use super::connection::Connection;
use super::environment::{CA_BUNDLE_FILE, CA_FILE};
use super::head::{read_line, respond, timed_out, Io, HEAD_DEADLINE};
use super::intercept::Bound;
use super::intercept::{bundle, Authority};
use super::shared::{Access, Shared};

use sandlot_agent::InstallToken;
use sandlot_core::egress::{AllowList, Denial, RequestRules};
use sandlot_core::secret::Injector;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UnixStream;

/// Connections one sandbox may have open through the proxy at once.
pub(super) const MAX_CONNECTIONS: usize = 64;

/// Connections every sandbox of this process together may have open: each holds two
/// descriptors of the host process.
const MAX_CONNECTIONS_IN_ALL: usize = 1024;

fn permits() -> &'static Arc<tokio::sync::Semaphore> {
    static PERMITS: std::sync::OnceLock<Arc<tokio::sync::Semaphore>> = std::sync::OnceLock::new();
    PERMITS.get_or_init(|| Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS_IN_ALL)))
}

/// A running egress proxy for one sandbox. Dropping it closes every connection it
/// relays.
pub struct EgressProxy {
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for EgressProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressProxy")
            .field("allow", &self.shared.allow)
            .field("access", &self.shared.access)
            .finish_non_exhaustive()
    }
}

impl EgressProxy {
    /// Serves the connections that arrive on `listener`, on `runtime`, letting
    /// through only what `allow` lists.
    pub fn serve(
        listener: std::os::unix::net::UnixListener,
        allow: AllowList,
        runtime: &tokio::runtime::Handle,
    ) -> std::io::Result<EgressProxy> {
        EgressProxy::serve_with(listener, allow, Access::Listed, runtime)
    }

    /// Serves the connections that arrive on `listener`, on `runtime`, letting the
    /// code's through to what `access` says; `allow` is what [`Access::Listed`]
    /// lets through.
    pub fn serve_with(
        listener: std::os::unix::net::UnixListener,
        allow: AllowList,
        access: Access,
        runtime: &tokio::runtime::Handle,
    ) -> std::io::Result<EgressProxy> {
        listener.set_nonblocking(true)?;
        let listener = {
            let _entered = runtime.enter();
            tokio::net::UnixListener::from_std(listener)?
        };
        let shared = Arc::new(Shared {
            allow,
            denials: Default::default(),
            access,
            install: tokio::sync::watch::Sender::new(None),
            secrets: Default::default(),
            rules_changed: tokio::sync::watch::Sender::new(0),
            authority: Authority::new().map_err(std::io::Error::other)?,
        });
        let task = runtime.spawn(accept(listener, shared.clone()));
        Ok(EgressProxy { shared, task })
    }

    /// From now on, lets connections that present `token` (the agent's install
    /// proxy, [`sandlot_agent::InstallProxy`]) through to any public destination,
    /// whatever the code may reach; `None` when the install is over. Either way the
    /// connections of the install before end: what an install opened does not
    /// outlive it, and its token opens nothing after it.
    pub fn admit_install(&self, token: Option<InstallToken>) {
        self.shared.install.send_replace(token);
    }

    /// [`EgressProxy::admit_install`] on a sandbox's proxy, for an engine's
    /// [`SandboxHandle::admit_install`](crate::SandboxHandle::admit_install): an
    /// agent that offered an install proxy where no egress proxy listens is an error
    /// (the sandbox is lost if the install cannot be ended).
    pub fn admit_install_on(
        proxy: Option<&EgressProxy>,
        token: Option<InstallToken>,
    ) -> sandlot_core::error::Result<()> {
        match proxy {
            Some(proxy) => {
                proxy.admit_install(token);
                Ok(())
            }
            None => Err(sandlot_core::error::Error::Agent {
                reason: "the agent offered an install proxy to a sandbox without an egress proxy"
                    .into(),
            }),
        }
    }

    /// From the next request on, puts the values of `secrets` into requests to the
    /// hosts each is bound to, where its placeholder is, and hides them in what comes
    /// back ([`Injector`]); replaces the secrets bound before (a pooled sandbox lent
    /// to another session keeps none of the last one's).
    pub fn bind_secrets(&self, secrets: Arc<Injector>) {
        let mut bound = self
            .shared
            .secrets
            .write()
            .unwrap_or_else(|e| e.into_inner());
        *bound = Arc::new(Bound::new(secrets, bound.rules.clone()));
    }

    /// From now on, lets through to the hosts `rules` name only the requests they
    /// allow ([`RequestRules`]), reading each (through TLS, with the proxy's CA);
    /// replaces the rules before. Rules that change end every connection open: one
    /// checked against the old rules, or relayed unread to a host the new ones
    /// name, would otherwise go on under them. Clients open a new connection for
    /// their next request, which meets the new rules.
    pub fn set_request_rules(&self, rules: RequestRules) {
        let mut bound = self
            .shared
            .secrets
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if *bound.rules == rules {
            return;
        }
        *bound = Arc::new(Bound::new(bound.injector.clone(), Arc::new(rules)));
        drop(bound);
        self.shared.rules_changed.send_modify(|n| *n += 1);
    }

    /// [`EgressProxy::set_request_rules`] on a sandbox's proxy, for an engine's
    /// [`SandboxHandle::set_request_rules`](crate::SandboxHandle::set_request_rules):
    /// the sandbox `name` without a proxy takes no rules (its requests are not read).
    pub fn set_request_rules_on(
        proxy: Option<&EgressProxy>,
        name: &str,
        rules: &RequestRules,
    ) -> sandlot_core::error::Result<()> {
        match proxy {
            Some(proxy) => {
                proxy.set_request_rules(rules.clone());
                Ok(())
            }
            None if rules.is_empty() => Ok(()),
            None => Err(sandlot_core::error::Error::BackendCannot {
                backend: name.to_string(),
                capability: sandlot_core::capability::Capability::NetworkControl,
                hint: "its sandbox has no egress proxy of sandlot's to read requests: \
                       request rules go with network = \"allow-list\""
                    .into(),
            }),
        }
    }

    /// Writes, in `dir` (the directory the sandbox finds the proxy's socket in), the
    /// proxy's CA and the bundle of it and this host's roots that
    /// [`sandbox_environment`](super::sandbox_environment) points the sandbox's TLS
    /// clients at: through TLS to a host a secret is bound to, the proxy answers
    /// with a certificate of its own CA, which nothing outside the sandbox trusts.
    pub fn write_trust(&self, dir: &std::path::Path) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let ca = self.shared.authority.pem();
        for (name, text) in [(CA_FILE, ca.to_string()), (CA_BUNDLE_FILE, bundle(ca))] {
            let path = dir.join(name);
            std::fs::write(&path, text)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
        }
        Ok(())
    }

    /// What was refused since the last call, in the order it happened, each once.
    pub fn take_denials(&self) -> Vec<Denial> {
        self.shared.denials.take()
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        // The accept task owns every connection's task: aborting it ends them all.
        self.task.abort();
    }
}

pub(super) async fn accept(listener: tokio::net::UnixListener, shared: Arc<Shared>) {
    let mut connections = tokio::task::JoinSet::new();
    let mut install = shared.install.subscribe();
    let mut rules = shared.rules_changed.subscribe();
    loop {
        tokio::select! {
            // An install admitted, or rules changed, are seen before the next
            // connection is accepted.
            biased;
            Ok(()) = rules.changed() => {
                rules.borrow_and_update();
                connections.abort_all();
            }
            // The code, stopped for the install, may have left connections that
            // hold the sandbox's slots (a first line never finished): they give
            // way to the install's.
            Ok(()) = install.changed() => {
                if install.borrow_and_update().is_some() {
                    connections.abort_all();
                }
            }
            accepted = listener.accept(), if connections.len() < MAX_CONNECTIONS => {
                match accepted {
                    Ok((stream, _)) => {
                        // Over the process's limit, the connection is refused at once.
                        let Ok(permit) = permits().clone().try_acquire_owned() else {
                            continue;
                        };
                        let shared = shared.clone();
                        connections.spawn(async move {
                            let _permit = permit;
                            if let Err(e) = serve(stream, &shared).await {
                                tracing::debug!("egress connection ended: {e}");
                            }
                        });
                    }
                    // Out of descriptors, say: wait rather than spin.
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

pub(super) async fn serve(mut stream: UnixStream, shared: &Shared) -> Io {
    let line = tokio::time::timeout(HEAD_DEADLINE, read_line(&mut stream))
        .await
        .map_err(|_| timed_out())??;
    if let Some(presented) = line.strip_prefix("install ") {
        return serve_install(stream, shared, presented).await;
    }
    if shared.access == Access::Closed {
        // Code that asks the proxy is told why, and a lookup fails at once (rather
        // than when the resolver gives up); anything else just finds no way out.
        match line.as_str() {
            "proxy" => {
                respond(
                    &mut stream,
                    "403 Forbidden",
                    "sandlot: this sandbox has no network (only its library installs go out)\n",
                )
                .await?
            }
            "dns" => {
                let connection = Connection {
                    shared,
                    access: Access::Closed,
                };
                connection.dns(stream).await?
            }
            _ => {}
        }
        return Ok(());
    }
    let connection = Connection {
        shared,
        access: shared.access,
    };
    match line.as_str() {
        "proxy" => connection.proxy(stream).await,
        "transparent 80" => connection.transparent_http(stream).await,
        "transparent 443" => connection.transparent_tls(stream).await,
        "dns" => connection.dns(stream).await,
        _ => Ok(()),
    }
}

/// A connection of the agent's install proxy: a proxy connection to any public
/// destination if it presents the token of the install under way, until that
/// install is over; refused like the code's otherwise.
async fn serve_install(mut stream: UnixStream, shared: &Shared, presented: &str) -> Io {
    let mut install = shared.install.subscribe();
    let admitted = match (
        *install.borrow_and_update(),
        InstallToken::from_hex(presented),
    ) {
        (Some(current), Some(presented)) => current.matches(&presented),
        _ => false,
    };
    if !admitted {
        return respond(
            &mut stream,
            "403 Forbidden",
            "sandlot: no library install of this sandbox is under way\n",
        )
        .await;
    }
    let connection = Connection {
        shared,
        access: Access::Public,
    };
    tokio::select! {
        served = connection.proxy(stream) => served,
        // Any change ends the install this connection belonged to.
        _ = install.changed() => Ok(()),
    }
}
