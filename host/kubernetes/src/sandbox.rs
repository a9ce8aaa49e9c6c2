//! One pod: made, waited for within its deadline, attached to, cut off the network and
//! deleted.

use crate::api::{delete_at_once, resend_on_transport, API_DEADLINE};
use crate::backend::KubernetesBackend;
use crate::pod::{self, PodPlan, SANDBOX_CONTAINER};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::api::{Api, AttachParams, AttachedProcess, Patch, PatchParams, PostParams};
use sandlot_container::{AgentClient, AgentSandbox, SandboxHandle, Transport};
use sandlot_core::backend::{owner, SandboxSpec};
use sandlot_core::error::{Error, Result};
use sandlot_core::policy::Network;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long the agent has to answer once its container runs.
const START_DEADLINE: Duration = Duration::from_secs(30);

/// The pause between attach tries while the container starts: short while a pod
/// normally comes up, then longer, so a pod that waits for an image or a node does not
/// send the API server ten requests a second for minutes.
const ATTACH_RETRY_SOON: Duration = Duration::from_millis(100);
const ATTACH_RETRY_LATER: Duration = Duration::from_secs(1);
const ATTACH_SOON_FOR: Duration = Duration::from_secs(5);

/// How much of the agent's own standard error is kept, for diagnostics.
const AGENT_STDERR: usize = 4096;

/// Waiting reasons that mean an image will not come.
const IMAGE_FAILURES: &[&str] = &[
    "ErrImageNeverPull",
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
];

/// Waiting reasons that mean the container cannot be made.
const CREATE_FAILURES: &[&str] = &[
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

/// The engine side of a pod: network switch and deletion.
struct PodHandle {
    api: Api<Pod>,
    runtime: Arc<tokio::runtime::Runtime>,
    name: String,
    deleted: bool,
}

impl PodHandle {
    fn error(&self, context: String, source: impl std::fmt::Display) -> Error {
        Error::Engine {
            engine: "kubernetes".into(),
            context,
            source: source.to_string().into(),
        }
    }

    fn delete(&mut self) {
        if std::mem::replace(&mut self.deleted, true) {
            return;
        }
        let api = self.api.clone();
        let name = self.name.clone();
        // Deleted at once, without a grace period: the object goes now, and a kubelet
        // that cannot be reached kills the containers of pods it no longer has when
        // it comes back. If the API server does not answer in time, the pod is left
        // to `sandlot gc` and, at the latest, to its own deadline.
        // A delete is resent after a dropped connection, as a create is: one lost
        // send would leave the pod running until its deadline.
        let _ = sandlot_core::backend::wait(self.runtime.handle(), async move {
            tokio::time::timeout(
                API_DEADLINE,
                resend_on_transport(API_DEADLINE, |_| {
                    let (api, name) = (api.clone(), name.clone());
                    async move { delete_at_once(&api, &name).await }
                }),
            )
            .await
        });
    }
}

impl SandboxHandle for PodHandle {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn set_network(&mut self, online: bool) -> Result<()> {
        let api = self.api.clone();
        let name = self.name.clone();
        let labels = serde_json::json!({
            "metadata": { "labels": { pod::NETWORK_LABEL: if online { "install" } else { "off" } } }
        });
        let context = format!(
            "{} the network of pod {}",
            if online { "opening" } else { "cutting" },
            self.name
        );
        // A merge of the same labels may be sent twice.
        sandlot_core::backend::wait(self.runtime.handle(), async move {
            tokio::time::timeout(
                API_DEADLINE,
                resend_on_transport(API_DEADLINE, |_| {
                    let (api, name, labels) = (api.clone(), name.clone(), labels.clone());
                    async move {
                        api.patch(&name, &PatchParams::default(), &Patch::Merge(&labels))
                            .await
                    }
                }),
            )
            .await
        })
        .ok_or_else(|| self.error(context.clone(), "the client runtime stopped"))?
        .map_err(|_| self.error(context.clone(), "no answer in time"))?
        .map_err(|e| self.error(context, e))?;
        Ok(())
    }

    fn destroy(&mut self) {
        self.delete();
    }
}

impl Drop for PodHandle {
    fn drop(&mut self) {
        self.delete();
    }
}

/// Makes, starts and attaches to one pod for `spec`.
impl KubernetesBackend {
    /// Makes one pod for `spec`, waits for it to run and connects to its agent.
    pub(crate) fn open_pod(&self, spec: &SandboxSpec<'_>) -> Result<AgentSandbox> {
        open(self, spec)
    }
}

fn open(backend: &KubernetesBackend, spec: &SandboxSpec<'_>) -> Result<AgentSandbox> {
    let id = owner::sandbox_id();
    let name = format!("sandlot-{id}");
    // Pods of sandlot's own images start from their variant with the agent inside
    // (`sandlot images build` makes it next to the image): no init container to run
    // and wait for first. Other images, and images from a registry, get the agent
    // copied in by an init container from the agent's own image.
    let baked = backend.image_prefix.is_none()
        && sandlot_container::Recipe::all()
            .iter()
            .any(|r| r.image == spec.image);
    let (image, agent_image) = if baked {
        (
            backend.image_reference(&sandlot_container::variant(spec.image)),
            None,
        )
    } else {
        (
            backend.image_reference(spec.image),
            Some(backend.image_reference(&sandlot_container::image())),
        )
    };
    let owner = owner::owner_tag();
    let plan = PodPlan {
        name: &name,
        id: &id,
        image: &image,
        agent_image: agent_image.as_deref(),
        pull_policy: if backend.image_prefix.is_some() {
            "IfNotPresent"
        } else {
            "Never"
        },
        owner: &owner,
        deadline_seconds: backend.pod_lifetime.as_secs().max(1),
    };
    let manifest = pod::manifest(&plan, spec, backend.template.as_ref())?;
    let api = backend.pods();
    // Made before the pod: dropping it deletes the pod, also one whose creation
    // timed out here but went through on the server (a delete of nothing is fine).
    let handle = PodHandle {
        api: api.clone(),
        runtime: backend.runtime.clone(),
        name: name.clone(),
        deleted: false,
    };
    {
        let api = api.clone();
        backend.call_resending(
            &format!("creating a pod from {image}"),
            API_DEADLINE,
            move |resend| {
                let api = api.clone();
                let manifest = manifest.clone();
                async move {
                    match api.create(&PostParams::default(), &manifest).await {
                        // The name is this sandbox's own: after a lost answer, a pod
                        // of that name is the one the earlier send made.
                        Err(kube::Error::Api(status)) if resend && status.code == 409 => Ok(()),
                        other => other.map(|_| ()),
                    }
                }
            },
        )?;
    }
    let attached = start(
        backend,
        &api,
        &name,
        spec.language,
        &image,
        agent_image.as_deref(),
    )?;
    let (transport, stderr) = bridge(backend, attached)?;
    let agent = AgentClient::connect(transport, START_DEADLINE).map_err(|e| {
        let said = String::from_utf8_lossy(&stderr.lock().unwrap_or_else(|e| e.into_inner()))
            .trim()
            .to_string();
        if said.is_empty() {
            e
        } else {
            Error::Agent {
                reason: format!("{e}; the agent said: {said}"),
            }
        }
    })?;
    let online = spec.policy.network == Network::On;
    Ok(
        AgentSandbox::new(agent, Box::new(handle), spec.policy.clone(), online)
            .with_kernel(spec.kernel.cloned())
            .with_tool_runtime(backend.runtime.handle().clone()),
    )
}

/// How a start ended before the attach went through.
enum Stopped {
    /// The pod can never start.
    Failed(StartFailure),
    /// The pod went away while it started.
    Deleted,
    /// The API server refused the attach for good (no rights, most likely).
    Refused(kube::Error),
}

/// Attaches to the sandbox container as soon as it runs, failing as soon as the pod
/// cannot start (an image that is not there, a container that cannot be made, a pod
/// that ended), and at the latest after the backend's start timeout.
///
/// The attach is tried without waiting for the pod's status to say the container
/// runs: the kubelet notices a started container on its next relist (once a second)
/// and only then reports it, while an attach reaches the container as soon as the
/// engine has started it. Waiting for the status cost up to a second per pod.
fn start(
    backend: &KubernetesBackend,
    api: &Api<Pod>,
    name: &str,
    language: &str,
    image: &str,
    agent_image: Option<&str>,
) -> Result<AttachedProcess> {
    let deadline = backend.start_timeout;
    let last: Arc<Mutex<Option<Pod>>> = Arc::new(Mutex::new(None));
    let last_attach: Arc<Mutex<String>> = Arc::new(Mutex::new(String::new()));
    let failure = |reason: String| Error::Engine {
        engine: "kubernetes".into(),
        context: format!("starting pod {name} from {image}"),
        source: reason.into(),
    };
    let outcome = {
        let attaching = attach_when_running(api.clone(), name.to_string(), last_attach.clone());
        let watching = watch_for_failure(api.clone(), name.to_string(), last.clone());
        sandlot_core::backend::wait(backend.runtime.handle(), async move {
            tokio::time::timeout(deadline, async move {
                tokio::select! {
                    attached = attaching => attached,
                    stopped = watching => Err(stopped),
                }
            })
            .await
        })
    };
    let pod = last.lock().unwrap_or_else(|e| e.into_inner()).clone();
    match outcome {
        None => Err(failure("the client runtime stopped".into())),
        Some(Err(_)) => {
            let attach = last_attach
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            Err(failure(format!(
                "it did not start within {} s ({}{}); a slow image pull or a busy cluster may \
                 need a longer `start_timeout`",
                deadline.as_secs(),
                pod.as_ref().map_or("never seen".into(), pending_reason),
                if attach.is_empty() {
                    String::new()
                } else {
                    format!("; the last attach said: {attach}")
                }
            )))
        }
        Some(Ok(Ok(attached))) => Ok(attached),
        Some(Ok(Err(Stopped::Refused(e)))) => Err(failure(format!(
            "the API server refused to attach to it: {e}; {}",
            backend.needed_rights()
        ))),
        Some(Ok(Err(Stopped::Deleted))) => Err(failure(
            "the pod was deleted while it started (by `sandlot gc`, an eviction or an \
             administrator)"
                .into(),
        )),
        Some(Ok(Err(Stopped::Failed(reason)))) => Err(match reason {
            StartFailure::Image {
                image: missing,
                message,
            } => {
                let hint = match (&backend.image_prefix, Some(missing.as_str()) == agent_image) {
                    (Some(prefix), _) => format!(
                        "push it to {prefix}, or give the pods pull secrets in the pod template"
                    ),
                    (None, true) => "run `sandlot images build` against the node's engine (it \
                                     loads the agent image too)"
                        .into(),
                    (None, false) => {
                        return Err(Error::ImageMissing {
                            engine: "kubernetes".into(),
                            image: image.to_string(),
                            language: language.to_string(),
                        })
                    }
                };
                failure(format!(
                    "the node cannot get image `{missing}` ({message}); {hint}"
                ))
            }
            StartFailure::Other(reason) => failure(reason),
        }),
    }
}

/// Tries to attach to the sandbox container until it runs. Until then the API server
/// or the kubelet answers with an error (no node yet, container not found), which is
/// kept for the timeout's message; only a refusal for good ends the tries.
async fn attach_when_running(
    api: Api<Pod>,
    name: String,
    last_error: Arc<Mutex<String>>,
) -> std::result::Result<AttachedProcess, Stopped> {
    let params = AttachParams::default()
        .container(SANDBOX_CONTAINER)
        .stdin(true)
        .stdout(true)
        .stderr(true)
        .max_stdout_buf_size(1 << 20)
        .max_stdin_buf_size(1 << 20);
    let started = std::time::Instant::now();
    loop {
        match tokio::time::timeout(API_DEADLINE, api.attach(&name, &params)).await {
            Ok(Ok(attached)) => return Ok(attached),
            Ok(Err(kube::Error::Api(status))) if matches!(status.code, 401 | 403) => {
                return Err(Stopped::Refused(kube::Error::Api(status)))
            }
            Ok(Err(e)) => *last_error.lock().unwrap_or_else(|e| e.into_inner()) = e.to_string(),
            Err(_) => {
                *last_error.lock().unwrap_or_else(|e| e.into_inner()) = "no answer in time".into()
            }
        }
        tokio::time::sleep(if started.elapsed() < ATTACH_SOON_FOR {
            ATTACH_RETRY_SOON
        } else {
            ATTACH_RETRY_LATER
        })
        .await;
    }
}

/// Watches the pod until it can never start or is deleted, keeping the last state
/// seen for messages. A watch can break (an API server restart, a timeout of the
/// connection): it is taken up again.
async fn watch_for_failure(api: Api<Pod>, name: String, last: Arc<Mutex<Option<Pod>>>) -> Stopped {
    loop {
        let seen = last.clone();
        let watched =
            kube::runtime::wait::await_condition(api.clone(), &name, move |pod: Option<&Pod>| {
                let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
                // Gone after it was seen: deleted, which ends the wait too.
                let deleted = pod.is_none() && seen.is_some();
                if let Some(pod) = pod {
                    *seen = Some(pod.clone());
                }
                deleted || pod.is_some_and(|pod| failure_of(pod).is_some())
            })
            .await;
        match watched {
            Ok(None) => return Stopped::Deleted,
            Ok(Some(pod)) => {
                if let Some(failure) = failure_of(&pod) {
                    return Stopped::Failed(failure);
                }
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Why a pod cannot start.
enum StartFailure {
    /// An image the node does not have and cannot pull.
    Image { image: String, message: String },
    /// Anything else, said in words.
    Other(String),
}

/// Why the pod can never start, from its status, if it cannot.
fn failure_of(pod: &Pod) -> Option<StartFailure> {
    let status = pod.status.as_ref()?;
    let statuses = status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten());
    for container in statuses {
        if let Some(waiting) = container.state.as_ref().and_then(|s| s.waiting.as_ref()) {
            let reason = waiting.reason.as_deref().unwrap_or_default();
            let message = waiting.message.clone().unwrap_or_default();
            if IMAGE_FAILURES.contains(&reason) {
                return Some(StartFailure::Image {
                    image: container.image.clone(),
                    message: if message.is_empty() {
                        reason.to_string()
                    } else {
                        message
                    },
                });
            }
            if CREATE_FAILURES.contains(&reason) {
                return Some(StartFailure::Other(format!(
                    "container `{}` cannot be made ({reason}): {message}",
                    container.name
                )));
            }
        }
        if let Some(ended) = terminated_badly(container) {
            return Some(StartFailure::Other(ended));
        }
    }
    match status.phase.as_deref() {
        Some(phase @ ("Failed" | "Succeeded")) => Some(StartFailure::Other(format!(
            "the pod ended ({phase}) before its agent answered: {}",
            status.message.as_deref().unwrap_or("no message")
        ))),
        _ => None,
    }
}

/// A container that exited with a failure, said in words.
fn terminated_badly(container: &ContainerStatus) -> Option<String> {
    let ended = container.state.as_ref()?.terminated.as_ref()?;
    (ended.exit_code != 0).then(|| {
        format!(
            "container `{}` exited with {} ({}){}",
            container.name,
            ended.exit_code,
            ended.reason.as_deref().unwrap_or("no reason"),
            ended
                .message
                .as_deref()
                .map(|m| format!(": {}", m.trim()))
                .unwrap_or_default()
        )
    })
}

/// Why a pod is still pending: the scheduler's or a container's word for it.
fn pending_reason(pod: &Pod) -> String {
    let Some(status) = pod.status.as_ref() else {
        return "no status yet".into();
    };
    let unscheduled = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False");
    if let Some(condition) = unscheduled {
        return format!(
            "not scheduled: {}",
            condition.message.as_deref().unwrap_or("no reason given")
        );
    }
    let waiting = status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten())
        .find_map(|c| {
            let waiting = c.state.as_ref()?.waiting.as_ref()?;
            Some(format!(
                "container `{}` waiting: {}",
                c.name,
                waiting.reason.as_deref().unwrap_or("no reason")
            ))
        });
    waiting.unwrap_or_else(|| format!("phase {}", status.phase.as_deref().unwrap_or("unknown")))
}

/// Bridges the attached sandbox container's standard streams to a transport and
/// wakes the agent, which says nothing until the host is there to hear it. Returns
/// the transport and the agent's own standard error, for diagnostics.
fn bridge(
    backend: &KubernetesBackend,
    mut attached: AttachedProcess,
) -> Result<(Transport, Arc<Mutex<Vec<u8>>>)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (Some(mut stdin), Some(mut stdout), Some(mut stderr)) =
        (attached.stdin(), attached.stdout(), attached.stderr())
    else {
        return Err(Error::Agent {
            reason: "the attach stream came without its standard streams".into(),
        });
    };
    let (to_host, from_agent) = std::sync::mpsc::channel::<Vec<u8>>();
    let (to_agent, mut outgoing) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    let said = Arc::new(Mutex::new(Vec::new()));
    let kept = said.clone();
    let runtime = backend.runtime.handle();
    let reading = runtime.spawn(async move {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match stdout.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if to_host.send(buf[..n].to_vec()).is_err() {
                        return;
                    }
                }
            }
        }
        // Dropping `to_host` ends the agent's stream for the client.
    });
    let errors = runtime.spawn(async move {
        let mut buf = vec![0u8; 4096];
        while let Ok(n) = stderr.read(&mut buf).await {
            if n == 0 {
                return;
            }
            let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
            let room = AGENT_STDERR.saturating_sub(kept.len());
            kept.extend_from_slice(&buf[..n.min(room)]);
        }
    });
    let writing = runtime.spawn(async move {
        // The agent's wake-up call.
        if stdin.write_all(&[1]).await.is_err() || stdin.flush().await.is_err() {
            return;
        }
        while let Some(bytes) = outgoing.recv().await {
            if stdin.write_all(&bytes).await.is_err() || stdin.flush().await.is_err() {
                return;
            }
        }
        // The client is gone. (Dropping standard input closes the whole websocket on
        // this protocol, which is what the end of the client means anyway.)
    });
    let attached = Mutex::new(Some(attached));
    let transport = Transport::channels(
        from_agent,
        move |bytes| to_agent.send(bytes).is_ok(),
        move || {
            reading.abort();
            errors.abort();
            writing.abort();
            // Dropping the attached process ends its websocket: the agent's input
            // closes and it stops everything.
            drop(attached.lock().unwrap_or_else(|e| e.into_inner()).take());
        },
    );
    Ok((transport, said))
}
