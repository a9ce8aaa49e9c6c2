//! The Kubernetes backend: connecting to a cluster, the pods it makes for sandboxes,
//! lists and collects, and what it can enforce there.

use crate::api::{delete_at_once, resend_on_transport, API_DEADLINE};
use crate::pod;
use crate::pod::PodTemplate;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use sandlot_core::backend::{
    check_capabilities, owner, Backend, BackendName, Capabilities, Capability, Check, Needs,
    Sandbox, SandboxSpec, Unsuitable,
};
use sandlot_core::config::KubernetesConfig;
use sandlot_core::error::{Error, Result};
use sandlot_core::policy::{Network, Policy, PolicyField};
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Whether the cluster enforces NetworkPolicy objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum NetworkPolicies {
    /// Look for a network plugin known to enforce them (Calico, Cilium, Weave Net,
    /// Antrea, kube-router, Canal) in `kube-system`; if none is found, assume not.
    #[default]
    Detect,
    /// The cluster enforces them (a plugin sandlot does not recognise).
    Enforced,
    /// It does not: networks are never claimed to be cut.
    NotEnforced,
}

/// Connects a [`KubernetesBackend`].
///
/// ```no_run
/// use sandlot::kubernetes::KubernetesBackend;
/// # fn main() -> Result<(), sandlot::Error> {
/// let cluster = KubernetesBackend::builder()
///     .namespace("sandboxes")
///     .image_prefix("registry.internal:5000")
///     .connect()?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct KubernetesBackendBuilder {
    kubeconfig: Option<PathBuf>,
    context: Option<String>,
    namespace: Option<String>,
    image_prefix: Option<String>,
    template: Option<PodTemplate>,
    network_policies: NetworkPolicies,
    start_timeout: Option<Duration>,
    pod_lifetime: Option<Duration>,
    name: Option<String>,
}

impl KubernetesBackendBuilder {
    /// The kubeconfig file (default: `KUBECONFIG`, then `~/.kube/config`, then the
    /// service account of the pod sandlot runs in).
    pub fn kubeconfig(&mut self, path: impl Into<PathBuf>) -> &mut Self {
        self.kubeconfig = Some(path.into());
        self
    }

    /// The kubeconfig context (default: its current context).
    pub fn context(&mut self, context: impl Into<String>) -> &mut Self {
        self.context = Some(context.into());
        self
    }

    /// The namespace pods are made in (default: the context's, else `default`).
    pub fn namespace(&mut self, namespace: impl Into<String>) -> &mut Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// A registry the cluster pulls sandlot's images from: `sandlot/python:latest`
    /// becomes `PREFIX/sandlot/python:latest`, pulled if not present. Without one,
    /// images must already be in the nodes' engines (`imagePullPolicy: Never`), as on a
    /// single-node cluster whose engine `sandlot images build` fills.
    pub fn image_prefix(&mut self, prefix: impl Into<String>) -> &mut Self {
        self.image_prefix = Some(prefix.into().trim_end_matches('/').to_string());
        self
    }

    /// A pod template merged under the generated pod.
    pub fn template(&mut self, template: PodTemplate) -> &mut Self {
        self.template = Some(template);
        self
    }

    /// Whether the cluster enforces NetworkPolicy (default: detect).
    pub fn network_policies(&mut self, policies: NetworkPolicies) -> &mut Self {
        self.network_policies = policies;
        self
    }

    /// How long a pod may take to be scheduled, pull its images and start (default:
    /// 120 s; between 1 s and 10 minutes, which is less than the agent waits for its
    /// host).
    pub fn start_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.start_timeout = Some(timeout.clamp(Duration::from_secs(1), Duration::from_secs(600)));
        self
    }

    /// The longest a pod may live (`activeDeadlineSeconds`, default: 24 hours): the
    /// backstop that ends a sandbox whatever happens to the host that made it.
    pub fn pod_lifetime(&mut self, lifetime: Duration) -> &mut Self {
        // At least a minute: 0 would not mean "never" to the cluster.
        self.pod_lifetime = Some(lifetime.max(Duration::from_secs(60)));
        self
    }

    /// The backend's name in a [`Sandlot`](sandlot_core::Sandlot) (default: `kubernetes`).
    pub fn name(&mut self, name: impl Into<String>) -> &mut Self {
        self.name = Some(name.into());
        self
    }

    /// Reads the kubeconfig, asks the server its version (10 s at most), and makes
    /// sure the namespace has sandlot's NetworkPolicy. A cluster that does not answer
    /// is [`Error::EngineUnavailable`], which says how to point sandlot at one.
    pub fn connect(&self) -> Result<KubernetesBackend> {
        let name = match &self.name {
            Some(name) => BackendName::new(name.clone())?,
            None => BackendName::KUBERNETES,
        };
        let where_ = self
            .kubeconfig
            .as_ref()
            .map(|p| p.display().to_string())
            .or_else(|| std::env::var("KUBECONFIG").ok().filter(|k| !k.is_empty()))
            .unwrap_or_else(|| "~/.kube/config".into());
        let unavailable = |endpoint: String, reason: String| Error::EngineUnavailable {
            engine: "kubernetes".into(),
            endpoint,
            reason,
            hint: "start the cluster, or point KUBECONFIG or sandlot.toml's \
                   [kubernetes] kubeconfig at one"
                .into(),
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("sandlot-kube")
            .enable_all()
            .build()
            .map_err(|e| {
                unavailable(where_.clone(), format!("cannot start an I/O runtime: {e}"))
            })?;
        let options = kube::config::KubeConfigOptions {
            context: self.context.clone(),
            ..Default::default()
        };
        let kubeconfig = self.kubeconfig.clone();
        let config = runtime
            .block_on(async move {
                match kubeconfig {
                    Some(path) => {
                        let file = kube::config::Kubeconfig::read_from(&path)
                            .map_err(|e| format!("cannot read it: {e}"))?;
                        kube::Config::from_custom_kubeconfig(file, &options)
                            .await
                            .map_err(|e| e.to_string())
                    }
                    None if options.context.is_some() => kube::Config::from_kubeconfig(&options)
                        .await
                        .map_err(|e| e.to_string()),
                    None => kube::Config::infer().await.map_err(|e| e.to_string()),
                }
            })
            .map_err(|reason| unavailable(where_.clone(), reason))?;
        let endpoint = config.cluster_url.to_string();
        let namespace = self
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        // Building the client may run the kubeconfig's credential plugin (cloud
        // logins): never interactively, and not for ever.
        let mut config = config;
        if let Some(exec) = config.auth_info.exec.as_mut() {
            exec.interactive_mode = Some(kube::config::ExecInteractiveMode::Never);
        }
        let client = runtime
            .block_on(async {
                tokio::time::timeout(
                    Duration::from_secs(30),
                    tokio::task::spawn_blocking(move || kube::Client::try_from(config)),
                )
                .await
            })
            .map_err(|_| {
                unavailable(
                    endpoint.clone(),
                    "its credentials were not ready within 30 s".into(),
                )
            })?
            .map_err(|e| unavailable(endpoint.clone(), e.to_string()))?
            .map_err(|e| unavailable(endpoint.clone(), e.to_string()))?;
        let version = {
            let client = client.clone();
            runtime
                .block_on(async {
                    tokio::time::timeout(Duration::from_secs(10), client.apiserver_version()).await
                })
                .map_err(|_| unavailable(endpoint.clone(), "no answer within 10 s".into()))?
                .map_err(|e| unavailable(endpoint.clone(), e.to_string()))?
        };
        let minor = version
            .minor
            .trim_end_matches(|c: char| !c.is_ascii_digit())
            .parse()
            .unwrap_or(0);
        let mut backend = KubernetesBackend {
            name,
            endpoint,
            namespace,
            client,
            runtime: Arc::new(runtime),
            image_prefix: self.image_prefix.clone(),
            template: self.template.clone(),
            server: format!("{}.{}", version.major, version.minor),
            server_minor: minor,
            enforces_network: false,
            start_timeout: self.start_timeout.unwrap_or(Duration::from_secs(120)),
            pod_lifetime: self.pod_lifetime.unwrap_or(Duration::from_secs(24 * 3600)),
            reaped: Mutex::new(false),
        };
        backend.enforces_network = match self.network_policies {
            NetworkPolicies::Enforced => true,
            NetworkPolicies::NotEnforced => false,
            NetworkPolicies::Detect => backend.detect_network_plugin(),
        };
        backend.ensure_network_policy()?;
        Ok(backend)
    }
}

/// A pod sandlot made, as [`KubernetesBackend::sandboxes`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PodInfo {
    /// The pod's name, `sandlot-<sandbox id>`.
    pub name: String,
    /// The language it was opened for.
    pub language: String,
    /// Its phase: `Pending`, `Running`, `Succeeded`, `Failed`.
    pub phase: String,
    /// Whether the process that opened it still runs (a process of another machine
    /// counts as running: it cannot be looked up from here).
    pub owner_alive: bool,
    /// The process id of the host process that opened it.
    pub owner_pid: Option<u32>,
}

/// The Kubernetes backend.
pub struct KubernetesBackend {
    name: BackendName,
    endpoint: String,
    namespace: String,
    client: kube::Client,
    pub(crate) runtime: Arc<tokio::runtime::Runtime>,
    pub(crate) image_prefix: Option<String>,
    pub(crate) template: Option<PodTemplate>,
    /// `major.minor` of the API server.
    server: String,
    server_minor: u32,
    enforces_network: bool,
    pub(crate) start_timeout: Duration,
    pub(crate) pod_lifetime: Duration,
    /// Whether pods a crashed host left behind were reaped already.
    reaped: Mutex<bool>,
}

impl std::fmt::Debug for KubernetesBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubernetesBackend")
            .field("name", &self.name)
            .field("endpoint", &self.endpoint)
            .field("namespace", &self.namespace)
            .field("server", &self.server)
            .field("enforces_network", &self.enforces_network)
            .finish_non_exhaustive()
    }
}

/// The NetworkPolicy that cuts off pods labelled `sandlot.dev/network=off`.
const NETWORK_POLICY: &str = "sandlot-network-off";

impl KubernetesBackend {
    /// Configures a connection.
    pub fn builder() -> KubernetesBackendBuilder {
        KubernetesBackendBuilder::default()
    }

    /// A builder with the settings of sandlot.toml's `[kubernetes]` section (the pod
    /// template is read now).
    pub fn configured(settings: &KubernetesConfig) -> Result<KubernetesBackendBuilder> {
        let mut builder = KubernetesBackend::builder();
        if let Some(path) = &settings.kubeconfig {
            builder.kubeconfig(path);
        }
        if let Some(context) = &settings.context {
            builder.context(context);
        }
        if let Some(namespace) = &settings.namespace {
            builder.namespace(namespace);
        }
        if let Some(prefix) = &settings.image_prefix {
            builder.image_prefix(prefix);
        }
        if let Some(path) = &settings.pod_template {
            builder.template(PodTemplate::read(path)?);
        }
        builder.network_policies(match settings.network_policy_enforced {
            None => NetworkPolicies::Detect,
            Some(true) => NetworkPolicies::Enforced,
            Some(false) => NetworkPolicies::NotEnforced,
        });
        if let Some(seconds) = settings.start_timeout {
            builder.start_timeout(Duration::from_secs(seconds));
        }
        if let Some(seconds) = settings.pod_lifetime {
            builder.pod_lifetime(Duration::from_secs(seconds));
        }
        Ok(builder)
    }

    /// Connects with the kubeconfig of the environment (see
    /// [`KubernetesBackendBuilder::kubeconfig`]).
    pub fn connect() -> Result<KubernetesBackend> {
        KubernetesBackend::builder().connect()
    }

    /// The API server's address.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The namespace pods are made in.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The API server's `major.minor` version.
    pub fn server_version(&self) -> &str {
        &self.server
    }

    /// Whether the cluster enforces the NetworkPolicy that cuts sandboxes off.
    pub fn enforces_network_policy(&self) -> bool {
        self.enforces_network
    }

    /// The reference the cluster runs `image` as (with the registry prefix, if any).
    pub fn image_reference(&self, image: &str) -> String {
        match &self.image_prefix {
            Some(prefix) => format!("{prefix}/{image}"),
            None => image.to_string(),
        }
    }

    pub(crate) fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    fn api_error(&self, context: impl Into<String>, source: impl std::fmt::Display) -> Error {
        Error::Engine {
            engine: "kubernetes".into(),
            context: context.into(),
            source: source.to_string().into(),
        }
    }

    /// Runs `future` on the backend's runtime within `deadline`.
    fn call<T: Send + 'static>(
        &self,
        context: &str,
        deadline: Duration,
        future: impl Future<Output = std::result::Result<T, kube::Error>> + Send + 'static,
    ) -> Result<T> {
        sandlot_core::backend::wait(self.runtime.handle(), async move {
            tokio::time::timeout(deadline, future).await
        })
        .ok_or_else(|| self.api_error(context, "the client runtime stopped"))?
        .map_err(|_| {
            self.api_error(
                context,
                format!("no answer within {} s", deadline.as_secs()),
            )
        })?
        .map_err(|e| match &e {
            kube::Error::Api(status) if status.code == 403 => {
                self.api_error(context, format!("{e}; {}", self.needed_rights()))
            }
            _ => self.api_error(context, e),
        })
    }

    /// Like [`call`](Self::call), for a request that may be sent again: one whose
    /// connection failed or broke before an answer came is resent, with a growing
    /// pause, until `deadline` is near. `send` is told whether it is a resend, since
    /// a request that got through before its answer was lost can then be refused
    /// for having been done (a create answered 409).
    ///
    /// A busy API server sometimes drops a connection of its pool: without the
    /// resend, one pod of twenty in a burst failed with "client error (SendRequest)".
    pub(crate) fn call_resending<T, F, Fut>(
        &self,
        context: &str,
        deadline: Duration,
        send: F,
    ) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(bool) -> Fut + Send + 'static,
        Fut: Future<Output = std::result::Result<T, kube::Error>> + Send + 'static,
    {
        self.call(context, deadline, resend_on_transport(deadline, send))
    }

    /// What sandlot needs the cluster to allow it, for the message of a refusal.
    pub(crate) fn needed_rights(&self) -> String {
        format!(
            "sandlot needs, in namespace {}: pods create, get, list, watch, patch and delete, \
             pods/attach create, and networkpolicies create",
            self.namespace
        )
    }

    /// Whether a network plugin that enforces NetworkPolicy runs in `kube-system`
    /// (by the names of their usual DaemonSets), and no other NetworkPolicy of the
    /// namespace could let traffic back in: policies add up, so any other one that
    /// selects a sandbox would reopen what sandlot's closes.
    fn detect_network_plugin(&self) -> bool {
        const ENFORCING: &[&str] = &[
            "calico-node",
            "cilium",
            "weave-net",
            "antrea-agent",
            "kube-router",
            "canal",
        ];
        let api: Api<k8s_openapi::api::apps::v1::DaemonSet> =
            Api::namespaced(self.client.clone(), "kube-system");
        let Ok(sets) = self.call("listing kube-system daemonsets", API_DEADLINE, async move {
            api.list(&ListParams::default()).await
        }) else {
            return false;
        };
        let plugin = sets.items.iter().any(|set| {
            let name = set.metadata.name.as_deref().unwrap_or_default();
            ENFORCING.contains(&name)
        });
        if !plugin {
            return false;
        }
        use k8s_openapi::api::networking::v1::NetworkPolicy;
        let api: Api<NetworkPolicy> = Api::namespaced(self.client.clone(), &self.namespace);
        let Ok(policies) = self.call("listing NetworkPolicies", API_DEADLINE, async move {
            api.list(&ListParams::default()).await
        }) else {
            return false;
        };
        policies
            .items
            .iter()
            .all(|p| p.metadata.name.as_deref() == Some(NETWORK_POLICY))
    }

    /// Creates the namespace's NetworkPolicy for cut-off sandboxes, if it is missing.
    fn ensure_network_policy(&self) -> Result<()> {
        use k8s_openapi::api::networking::v1::NetworkPolicy;
        let api: Api<NetworkPolicy> = Api::namespaced(self.client.clone(), &self.namespace);
        let policy: NetworkPolicy = serde_json::from_value(serde_json::json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": { "name": NETWORK_POLICY, "labels": { pod::MANAGED.0: pod::MANAGED.1 } },
            "spec": {
                "podSelector": { "matchLabels": { pod::NETWORK_LABEL: "off" } },
                "policyTypes": ["Ingress", "Egress"],
            },
        }))
        .map_err(|e| self.api_error("making the NetworkPolicy", e))?;
        let created = self.call("creating the NetworkPolicy", API_DEADLINE, async move {
            match api.create(&PostParams::default(), &policy).await {
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
                other => other.map(|_| ()),
            }
        });
        match created {
            Ok(()) => Ok(()),
            // Without the right to make one the network is simply not cut, and the
            // backend says so; it is not a reason to refuse every sandbox.
            Err(_) if !self.enforces_network => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Every pod sandlot made in the namespace, running or not.
    pub fn sandboxes(&self) -> Result<Vec<PodInfo>> {
        let api = self.pods();
        let selector = format!("{}={}", pod::MANAGED.0, pod::MANAGED.1);
        let pods = self.call("listing sandlot's pods", API_DEADLINE, async move {
            api.list(&ListParams::default().labels(&selector)).await
        })?;
        Ok(pods
            .items
            .into_iter()
            .filter_map(|pod| {
                let metadata = pod.metadata;
                let owner = metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(pod::OWNER_ANNOTATION))
                    .cloned()
                    .unwrap_or_default();
                Some(PodInfo {
                    name: metadata.name?,
                    language: metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(pod::LANGUAGE_LABEL))
                        .cloned()
                        .unwrap_or_default(),
                    phase: pod
                        .status
                        .and_then(|s| s.phase)
                        .unwrap_or_else(|| "Unknown".into()),
                    owner_alive: !owner::this_boot(&owner) || owner::owner_alive(&owner),
                    owner_pid: owner::owner_pid(&owner),
                })
            })
            .collect())
    }

    /// Deletes sandlot's pods whose host process on this machine is gone (a crashed or
    /// killed host) and pods that have ended, whoever made them; or every sandlot pod
    /// of the namespace when `all` is set. A namespace is often shared by several
    /// machines: their running pods are theirs to delete. Returns the names deleted.
    pub fn gc(&self, all: bool) -> Result<Vec<String>> {
        let mut removed = Vec::new();
        for pod in self.sandboxes()? {
            let ended = matches!(pod.phase.as_str(), "Succeeded" | "Failed");
            if pod.owner_alive && !ended && !all {
                continue;
            }
            self.delete_pod(&pod.name)?;
            removed.push(pod.name);
        }
        Ok(removed)
    }

    /// Deletes a pod at once (no grace period); one already gone is fine.
    fn delete_pod(&self, name: &str) -> Result<()> {
        let api = self.pods();
        let name_owned = name.to_string();
        self.call_resending(&format!("deleting pod {name}"), API_DEADLINE, move |_| {
            let api = api.clone();
            let name = name_owned.clone();
            async move { delete_at_once(&api, &name).await }
        })
    }
}

impl Backend for KubernetesBackend {
    fn name(&self) -> BackendName {
        self.name.clone()
    }

    fn capabilities(&self, _language: &str) -> Capabilities {
        let mut capabilities = vec![
            Capability::RunsPlans,
            Capability::Kernels,
            Capability::Shell,
            Capability::InstallLibraries,
            Capability::Images,
            Capability::MemoryLimit,
            // In every language: Python has `sandlot_tools`, the rest `sandlot-tool`.
            Capability::Tools,
        ];
        if self.enforces_network {
            capabilities.push(Capability::NetworkControl);
        }
        Capabilities::new(capabilities)
    }

    fn supports(&self, needs: &Needs<'_>) -> std::result::Result<(), Unsuitable> {
        check_capabilities(needs, &self.capabilities(needs.language))
    }

    fn open(&self, spec: &SandboxSpec<'_>) -> Result<Box<dyn Sandbox>> {
        if spec.policy.network == Network::AllowList {
            return Err(Error::BackendCannot {
                backend: self.name.to_string(),
                capability: sandlot_core::capability::Capability::NetworkControl,
                hint: "an egress allow-list is enforced by the Docker and Podman backends only; \
                       on Kubernetes use network = \"off\", \"install-only\" or \"on\", \
                       with a NetworkPolicy-enforcing cluster for the first two"
                    .into(),
            });
        }
        {
            let mut reaped = self.reaped.lock().unwrap_or_else(|e| e.into_inner());
            if !*reaped {
                *reaped = true;
                let _ = self.gc(false);
            }
        }
        Ok(Box::new(self.open_pod(spec)?))
    }

    /// Kubernetes has no per-pod process limit (only the kubelet's, per node); a
    /// memory volume has no size before 1.22 (it is only counted against the memory
    /// limit); and a network is cut only where NetworkPolicy is enforced.
    fn unenforced(&self, policy: &Policy) -> Vec<PolicyField> {
        let mut fields = Vec::new();
        if policy.network != Network::On && !self.enforces_network {
            fields.push(PolicyField::Network);
        }
        fields.push(PolicyField::PidsLimit);
        if self.server_minor < 22 {
            fields.push(PolicyField::WorkdirSize);
        }
        fields
    }

    fn checks(&self) -> Vec<Check> {
        let mut checks = vec![Check::ok(
            "engine",
            format!(
                "Kubernetes {} at {}, namespace {}",
                self.server, self.endpoint, self.namespace
            ),
        )];
        // The gaps are what `unenforced` says of a policy that asks for everything,
        // each with why and what to do.
        let strictest = sandlot_core::policy::Preset::Strict.policy();
        let unenforced = self.unenforced(&strictest);
        if !unenforced.contains(&PolicyField::Network) {
            checks.push(Check::ok(
                "network policy",
                "enforced: a sandbox's NetworkPolicy cuts its network",
            ));
        }
        for field in unenforced {
            checks.push(match field {
                PolicyField::Network => Check::gap(
                    "network policy",
                    "not enforced: no network plugin that enforces NetworkPolicy was found, \
                     so a pod's network cannot be cut (sessions whose policy is not \
                     `network = on` are refused by the servers)",
                    "install a network plugin that enforces NetworkPolicy (Calico, Cilium, \
                     ...); if the cluster has one sandlot does not recognise, set \
                     [kubernetes] network_policy_enforced = true",
                ),
                PolicyField::PidsLimit => Check::gap(
                    "process limit",
                    "Kubernetes has no per-pod process limit: pids_limit is not applied",
                    "set the kubelet's podPidsLimit on the nodes",
                ),
                PolicyField::WorkdirSize => Check::gap(
                    "workspace size",
                    format!(
                        "Kubernetes {} gives memory volumes no size: workdir_size is only \
                         counted against the memory limit",
                        self.server
                    ),
                    "upgrade the cluster to 1.22 or later",
                ),
                other => Check::gap(
                    "policy",
                    format!("{other} is not applied"),
                    "use another backend where it matters",
                ),
            });
        }
        // A node's profile is whatever its runtime makes of RuntimeDefault (1.20's
        // dockershim: Docker's; left unset, none at all): probed in a pod.
        let policy = sandlot_core::Policy {
            network: sandlot_core::Network::Off,
            ..sandlot_core::Policy::default()
        };
        let spec = sandlot_core::backend::SandboxSpec::new(
            "python",
            "sandlot/python:latest",
            &policy,
            256 << 20,
        );
        checks.push(match self.open(&spec) {
            Ok(mut sandbox) => {
                sandlot_container::probe_system_calls(&mut *sandbox, sandlot_container::BAKED_PATH)
            }
            Err(e) => Check::gap(
                "system calls",
                format!("not probed: a pod did not open: {e}"),
                "sandlot images build, with the cluster's engine",
            ),
        });
        checks.push(sandlot_container::proxy::bound_secrets_check(Some(
            "a pod's egress goes through no proxy of sandlot's (it refuses an allow-list)",
        )));
        checks
    }
}
