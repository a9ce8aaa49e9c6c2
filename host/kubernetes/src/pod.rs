//! The pod of one sandbox, generated from the policy: every guarantee the policy asks
//! for is written into it, over whatever a user's [`PodTemplate`] says.

use k8s_openapi::api::core::v1::Pod;
use sandlot_core::backend::SandboxSpec;
use sandlot_core::error::{Error, Result};
use sandlot_core::layout::Layout;
use sandlot_core::policy::{Network, Seccomp};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The container that runs the code.
pub(super) const SANDBOX_CONTAINER: &str = "sandbox";
/// The init container that copies the agent into the pod.
const AGENT_CONTAINER: &str = "agent";
/// Where the agent's volume is mounted, read-only in the sandbox container.
const AGENT_DIR: &str = "/.sandlot";
/// The agent, as the sandbox container runs it: the same path whether the init
/// container copied it there or the image has it baked in.
const AGENT_PATH: &str = sandlot_container::BAKED_PATH;

/// Label on every pod sandlot makes.
pub(super) const MANAGED: (&str, &str) = ("sandlot.dev/managed", "true");
/// Label: the sandbox id.
pub(super) const SANDBOX_LABEL: &str = "sandlot.dev/sandbox";
/// Label: the language.
pub(super) const LANGUAGE_LABEL: &str = "sandlot.dev/language";
/// Label: whether the pod may use the network now (`off`, `install`, `on`); the
/// namespace's NetworkPolicy cuts off pods labelled `off`.
pub(super) const NETWORK_LABEL: &str = "sandlot.dev/network";
/// Annotation: the host process that made the pod (not a label: it holds `:`).
pub(super) const OWNER_ANNOTATION: &str = "sandlot.dev/owner";

/// A user's pod template, merged *under* the pod sandlot generates: it may add
/// labels, annotations, a node selector, tolerations, affinity, a runtime or priority
/// class, image pull secrets, and shape the `sandbox` container (resource requests,
/// extra environment), but it cannot turn off what the policy guarantees (user, read-only
/// root, capabilities, privilege escalation, seccomp, limits, no service account
/// token, no host namespaces). It may not mount host paths or add containers.
///
/// ```
/// use sandlot::kubernetes::PodTemplate;
/// let template = PodTemplate::parse(
///     "spec:\n  nodeSelector:\n    pool: sandboxes\n",
///     "template.yaml".as_ref(),
/// )?;
/// assert!(PodTemplate::parse("spec:\n  hostNetwork: [", "bad.yaml".as_ref()).is_err());
/// # Ok::<(), sandlot::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct PodTemplate {
    value: Value,
    source: PathBuf,
}

impl PodTemplate {
    /// Reads a template from a YAML (or JSON) file holding a Pod, or just its
    /// `metadata` and `spec`.
    pub fn read(path: &Path) -> Result<PodTemplate> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Io {
            context: format!("cannot read the pod template {}", path.display()),
            source: e,
        })?;
        PodTemplate::parse(&text, path)
    }

    /// Parses a template; `source` names it in errors.
    pub fn parse(text: &str, source: &Path) -> Result<PodTemplate> {
        let invalid = |reason: String| Error::PodTemplate {
            path: source.to_path_buf(),
            reason,
        };
        let value: Value = serde_saphyr::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if !value.is_object() {
            return Err(invalid("it must be a Pod: a mapping with `spec`".into()));
        }
        // A template must be a pod the API would take, but need not name containers.
        let mut whole = value.clone();
        if let Some(spec) = whole.get_mut("spec").and_then(Value::as_object_mut) {
            spec.entry("containers").or_insert_with(|| json!([]));
        }
        serde_json::from_value::<Pod>(whole)
            .map_err(|e| invalid(format!("it is not a Pod: {e}")))?;
        let spec = &value["spec"];
        if let Some(volumes) = spec["volumes"].as_array() {
            if let Some(host) = volumes.iter().find(|v| !v["hostPath"].is_null()) {
                return Err(invalid(format!(
                    "volume `{}` mounts a host path, which a sandbox may never see",
                    host["name"].as_str().unwrap_or("?")
                )));
            }
        }
        if spec["volumes"].is_array() {
            return Err(invalid(
                "it adds volumes; the sandbox's volumes are sandlot's own".into(),
            ));
        }
        if let Some(key) = spec
            .as_object()
            .and_then(|spec| spec.keys().find(|k| !SPEC_KEYS.contains(&k.as_str())))
        {
            return Err(invalid(format!(
                "`spec.{key}` is not something a template may set; it may set {}",
                SPEC_KEYS.join(", ")
            )));
        }
        for list in ["containers", "initContainers", "ephemeralContainers"] {
            if let Some(containers) = spec[list].as_array() {
                if let Some(other) = containers
                    .iter()
                    .find(|c| list != "containers" || c["name"] != SANDBOX_CONTAINER)
                {
                    return Err(invalid(format!(
                        "it adds the container `{}`; a template may only shape the \
                         `{SANDBOX_CONTAINER}` container",
                        other["name"].as_str().unwrap_or("?")
                    )));
                }
            }
        }
        if let Some(container) = spec["containers"].as_array().and_then(|c| c.first()) {
            if let Some(key) = container
                .as_object()
                .and_then(|c| c.keys().find(|k| !CONTAINER_KEYS.contains(&k.as_str())))
            {
                return Err(invalid(format!(
                    "`{key}` of the `{SANDBOX_CONTAINER}` container is not something a \
                     template may set; it may set {}",
                    CONTAINER_KEYS.join(", ")
                )));
            }
        }
        Ok(PodTemplate {
            value,
            source: source.to_path_buf(),
        })
    }

    /// The file it came from.
    pub fn source(&self) -> &Path {
        &self.source
    }
}

/// What of a pod's spec a template may set: where and how the pod is scheduled and
/// pulled, and (from `containers` on) keys that sandlot writes over, which a template
/// may name but never decide. Anything else (volumes, init containers, overhead...) is
/// refused, so that no field sandlot does not know of can weaken a sandbox.
const SPEC_KEYS: &[&str] = &[
    "nodeSelector",
    "nodeName",
    "tolerations",
    "affinity",
    "topologySpreadConstraints",
    "priorityClassName",
    "priority",
    "preemptionPolicy",
    "runtimeClassName",
    "schedulerName",
    "imagePullSecrets",
    "serviceAccountName",
    "dnsPolicy",
    "dnsConfig",
    "hostAliases",
    "containers",
    "hostNetwork",
    "hostPID",
    "hostIPC",
    "shareProcessNamespace",
    "securityContext",
    "automountServiceAccountToken",
    "enableServiceLinks",
    "restartPolicy",
    "activeDeadlineSeconds",
    "terminationGracePeriodSeconds",
];

/// What of the `sandbox` container a template may set: its resources and extra
/// environment; the rest listed here is written over by sandlot.
const CONTAINER_KEYS: &[&str] = &[
    "name",
    "resources",
    "env",
    "image",
    "imagePullPolicy",
    "command",
    "args",
    "workingDir",
    "securityContext",
    "stdin",
    "stdinOnce",
    "tty",
];

/// Annotations that would loosen a pod's confinement on clusters that still read
/// them (AppArmor and seccomp before their fields existed).
const CONFINEMENT_ANNOTATIONS: &[&str] = &[
    "apparmor.security.beta.kubernetes.io",
    "seccomp.security.alpha.kubernetes.io",
];

/// What a pod is made of besides the sandbox's spec.
pub(super) struct PodPlan<'a> {
    pub name: &'a str,
    pub id: &'a str,
    pub image: &'a str,
    /// The image the init container copies the agent from; `None` when `image` has
    /// the agent inside ([`sandlot_container::variant`]).
    pub agent_image: Option<&'a str>,
    /// `Never` where images are loaded into the node's engine, else `IfNotPresent`.
    pub pull_policy: &'a str,
    pub owner: &'a str,
    /// The backstop: the cluster kills the pod after this many seconds whatever
    /// happens to sandlot.
    pub deadline_seconds: u64,
}

/// Requests the cluster schedules by: small, so that a node fits many sandboxes (the
/// limits are what caps them); a template's requests win.
const CPU_REQUEST_MILLIS: u32 = 50;
const MEMORY_REQUEST: usize = 64 << 20;

/// The pod for `spec`.
pub(super) fn manifest(
    plan: &PodPlan<'_>,
    spec: &SandboxSpec<'_>,
    template: Option<&PodTemplate>,
) -> Result<Pod> {
    let policy = spec.policy;
    let workspace = Layout::WORKSPACE;
    let memory = spec.memory.to_string();
    let cpu = format!("{}m", policy.cpu_millis.max(1));
    let limits = json!({ "memory": memory, "cpu": cpu });
    let requests = json!({
        "memory": spec.memory.min(MEMORY_REQUEST).to_string(),
        "cpu": format!("{}m", policy.cpu_millis.clamp(1, CPU_REQUEST_MILLIS)),
    });
    let security = json!({
        "runAsUser": policy.uid,
        "runAsGroup": policy.gid,
        "runAsNonRoot": policy.uid != 0,
        "readOnlyRootFilesystem": policy.read_only_root,
        "allowPrivilegeEscalation": !policy.no_new_privileges,
        "privileged": false,
        "capabilities": if policy.drop_capabilities {
            json!({ "drop": ["ALL"] })
        } else {
            json!({})
        },
        // A setting this version does not know gets the engine's default filter,
        // never none.
        "seccompProfile": { "type": match policy.seccomp {
            Seccomp::Unconfined => "Unconfined",
            _ => "RuntimeDefault",
        }},
    });
    let network = match policy.network {
        Network::On => "on",
        _ => "off",
    };
    let ours = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": plan.name,
            "labels": {
                MANAGED.0: MANAGED.1,
                SANDBOX_LABEL: plan.id,
                LANGUAGE_LABEL: label_value(spec.language),
                NETWORK_LABEL: network,
            },
            "annotations": { OWNER_ANNOTATION: plan.owner },
        },
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": plan.deadline_seconds,
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": false,
            "enableServiceLinks": false,
            "hostNetwork": false,
            "hostPID": false,
            "hostIPC": false,
            "shareProcessNamespace": false,
            "securityContext": {
                "runAsUser": policy.uid,
                "runAsGroup": policy.gid,
                "runAsNonRoot": policy.uid != 0,
                "seccompProfile": security["seccompProfile"].clone(),
            },
            "initContainers": [{
                "name": AGENT_CONTAINER,
                "image": plan.agent_image.unwrap_or_default(),
                "imagePullPolicy": plan.pull_policy,
                "command": ["/sandlot-agent", "install", format!("{AGENT_DIR}/agent")],
                "securityContext": security.clone(),
                "resources": { "limits": { "memory": "64Mi", "cpu": "100m" },
                               "requests": { "memory": "16Mi", "cpu": "10m" } },
                "volumeMounts": [{ "name": "sandlot-agent", "mountPath": AGENT_DIR }],
            }],
            "containers": [{
                "name": SANDBOX_CONTAINER,
                "image": plan.image,
                "imagePullPolicy": plan.pull_policy,
                "command": [AGENT_PATH],
                "args": ["serve-attach", workspace],
                "workingDir": workspace,
                "stdin": true,
                // The agent's input closes when the host's attach connection does,
                // and then the agent stops everything and the pod ends.
                "stdinOnce": true,
                "tty": false,
                "securityContext": security,
                "resources": { "limits": limits, "requests": requests },
                "volumeMounts": [
                    { "name": "sandlot-agent", "mountPath": AGENT_DIR, "readOnly": true },
                    { "name": "workspace", "mountPath": workspace },
                    { "name": "tmp", "mountPath": "/tmp" },
                ],
            }],
            "volumes": [
                { "name": "sandlot-agent", "emptyDir": { "medium": "Memory", "sizeLimit": "16Mi" } },
                { "name": "workspace", "emptyDir": { "medium": "Memory", "sizeLimit": policy.workdir_size.to_string() } },
                { "name": "tmp", "emptyDir": { "medium": "Memory", "sizeLimit": policy.workdir_size.to_string() } },
            ],
        },
    });
    let mut ours = ours;
    if plan.agent_image.is_none() {
        // The image brings the agent: no init container, no volume to copy it to.
        let spec = &mut ours["spec"];
        if let Some(spec) = spec.as_object_mut() {
            spec.remove("initContainers");
        }
        let is_agent = |v: &Value| v["name"] == "sandlot-agent";
        if let Some(volumes) = spec["volumes"].as_array_mut() {
            volumes.retain(|v| !is_agent(v));
        }
        if let Some(mounts) = spec["containers"][0]["volumeMounts"].as_array_mut() {
            mounts.retain(|v| !is_agent(v));
        }
    }
    let mut pod = match template {
        Some(template) => {
            let mut base = template.value.clone();
            // Only the parts a template may shape are kept from it.
            if let Some(metadata) = base.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.retain(|key, _| key == "labels" || key == "annotations");
                if let Some(annotations) = metadata
                    .get_mut("annotations")
                    .and_then(Value::as_object_mut)
                {
                    annotations
                        .retain(|key, _| !CONFINEMENT_ANNOTATIONS.iter().any(|a| key.contains(a)));
                }
            }
            let theirs = base["spec"]["containers"]
                .as_array()
                .and_then(|c| c.first().cloned())
                .map(|mut theirs| {
                    // Whole: a merge would keep keys of theirs that ours leaves out
                    // (`capabilities.add`, `seLinuxOptions`, `procMount`).
                    if let Some(container) = theirs.as_object_mut() {
                        container.remove("securityContext");
                    }
                    theirs
                });
            if let Some(spec) = base.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("containers");
                spec.remove("securityContext");
            }
            merge(&mut base, ours);
            if let Some(theirs) = theirs {
                let their_requests = theirs["resources"]["requests"].clone();
                let container = &mut base["spec"]["containers"][0];
                let mut shaped = theirs;
                merge(&mut shaped, container.take());
                // Requests are only a scheduling guess of ours: theirs win (the API
                // refuses requests above the limits).
                if their_requests.is_object() {
                    let requests = &mut shaped["resources"]["requests"];
                    merge(requests, their_requests);
                }
                *container = shaped;
            }
            base
        }
        None => ours,
    };
    // Environment comes from the agent with each run; a template's extra variables
    // are kept, but nothing may replace the container's own.
    // The seccomp switch is the policy's alone: a template cannot turn the agent's
    // filter off.
    let unconfined = policy.seccomp == Seccomp::Unconfined;
    if let Some(env) = pod["spec"]["containers"][0]["env"].as_array_mut() {
        env.retain(|v| {
            v["name"] != "HOME"
                && v["name"] != "PATH"
                && v["name"] != sandlot_agent::SECCOMP_VARIABLE
        });
    }
    // The agent filters system calls itself, on top of the node's profile, unless the
    // policy asked for no filtering at all.
    if unconfined {
        let container = &mut pod["spec"]["containers"][0];
        if !container["env"].is_array() {
            container["env"] = json!([]);
        }
        if let Some(env) = container["env"].as_array_mut() {
            env.push(json!({ "name": sandlot_agent::SECCOMP_VARIABLE, "value": "unconfined" }));
        }
    }
    serde_json::from_value(pod).map_err(|e| Error::PodTemplate {
        path: template.map(|t| t.source.clone()).unwrap_or_default(),
        reason: format!("the merged pod is invalid: {e}"),
    })
}

/// Deep-merges `ours` into `base`: objects key by key, anything else replaced.
fn merge(base: &mut Value, ours: Value) {
    match (base, ours) {
        (Value::Object(base), Value::Object(ours)) => {
            for (key, value) in ours {
                merge(base.entry(key).or_insert(Value::Null), value);
            }
        }
        (base, ours) => *base = ours,
    }
}

/// `value` as a label value: at most 63 of `[A-Za-z0-9._-]`, starting and ending
/// alphanumeric.
pub(super) fn label_value(value: &str) -> String {
    let cleaned: String = value
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    cleaned
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

/// The labels of a pod, as a JSON map (for tests and listings).
#[cfg(test)]
fn labels(pod: &Pod) -> serde_json::Map<String, Value> {
    serde_json::to_value(&pod.metadata.labels)
        .unwrap()
        .as_object()
        .cloned()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandlot_core::policy::Policy;

    fn plan() -> PodPlan<'static> {
        PodPlan {
            name: "sandlot-abc",
            id: "abc",
            image: "sandlot/python:latest",
            agent_image: Some("sandlot/agent:0123"),
            pull_policy: "Never",
            owner: "boot:1:2:pid:[3]",
            deadline_seconds: 3600,
        }
    }

    fn pod_json(policy: &Policy, template: Option<&PodTemplate>) -> Value {
        let spec = SandboxSpec::new("python", "sandlot/python:latest", policy, 256 << 20);
        serde_json::to_value(manifest(&plan(), &spec, template).unwrap()).unwrap()
    }

    #[test]
    fn the_policy_becomes_the_pod() {
        let pod = pod_json(&Policy::default(), None);
        let spec = &pod["spec"];
        let sandbox = &spec["containers"][0];
        let security = &sandbox["securityContext"];
        assert_eq!(security["runAsUser"], 1000);
        assert_eq!(security["runAsGroup"], 1000);
        assert_eq!(security["runAsNonRoot"], true);
        assert_eq!(security["readOnlyRootFilesystem"], true);
        assert_eq!(security["allowPrivilegeEscalation"], false);
        assert_eq!(security["capabilities"]["drop"][0], "ALL");
        assert_eq!(security["seccompProfile"]["type"], "RuntimeDefault");
        assert_eq!(
            sandbox["resources"]["limits"]["memory"],
            (256 << 20).to_string()
        );
        assert_eq!(sandbox["resources"]["limits"]["cpu"], "1000m");
        assert_eq!(spec["automountServiceAccountToken"], false);
        assert_eq!(spec["hostNetwork"], false);
        assert_eq!(spec["activeDeadlineSeconds"], 3600);
        assert_eq!(spec["initContainers"][0]["securityContext"], *security);
        assert_eq!(
            spec["volumes"][1]["emptyDir"]["sizeLimit"],
            (1u64 << 30).to_string()
        );
        assert_eq!(pod["metadata"]["labels"][NETWORK_LABEL], "off");
        assert_eq!(
            pod["metadata"]["annotations"][OWNER_ANNOTATION],
            "boot:1:2:pid:[3]"
        );
        let open = pod_json(
            &Policy {
                network: Network::On,
                seccomp: Seccomp::Unconfined,
                ..Policy::default()
            },
            None,
        );
        assert_eq!(open["metadata"]["labels"][NETWORK_LABEL], "on");
        assert_eq!(
            open["spec"]["containers"][0]["securityContext"]["seccompProfile"]["type"],
            "Unconfined"
        );
    }

    #[test]
    fn an_image_with_the_agent_inside_needs_no_init_container() {
        let baked = PodPlan {
            agent_image: None,
            ..plan()
        };
        let policy = Policy::default();
        let pod = manifest(
            &baked,
            &SandboxSpec::new("python", "img", &policy, 1 << 20),
            None,
        )
        .unwrap();
        let pod = serde_json::to_value(&pod).unwrap();
        let spec = &pod["spec"];
        assert!(spec.get("initContainers").is_none(), "{spec}");
        let sandbox = &spec["containers"][0];
        assert_eq!(sandbox["command"][0], sandlot_container::BAKED_PATH);
        let names = |list: &Value| -> Vec<String> {
            list.as_array()
                .unwrap()
                .iter()
                .map(|v| v["name"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(names(&spec["volumes"]), ["workspace", "tmp"]);
        assert_eq!(names(&sandbox["volumeMounts"]), ["workspace", "tmp"]);
        // The guarantees do not depend on where the agent comes from.
        assert_eq!(sandbox["securityContext"]["readOnlyRootFilesystem"], true);
    }

    #[test]
    fn a_template_shapes_the_pod_but_cannot_turn_a_guarantee_off() {
        let template = PodTemplate::parse(
            r#"
metadata:
  name: not-this
  labels: { team: data, sandlot.dev/network: "on" }
  annotations:
    owner: data-team
    container.apparmor.security.beta.kubernetes.io/sandbox: unconfined
spec:
  hostNetwork: true
  hostPID: true
  automountServiceAccountToken: true
  nodeSelector: { pool: sandboxes }
  tolerations: [{ key: sandbox, operator: Exists }]
  securityContext: { runAsUser: 0 }
  containers:
  - name: sandbox
    image: evil/image
    securityContext:
      privileged: true
      runAsUser: 0
      readOnlyRootFilesystem: false
      capabilities: { add: [SYS_ADMIN] }
      seLinuxOptions: { type: spc_t }
    resources: { requests: { cpu: 250m }, limits: { memory: 100Gi } }
    env: [{ name: TEAM, value: data }, { name: PATH, value: /evil }]
"#,
            "t.yaml".as_ref(),
        )
        .unwrap();
        let pod = pod_json(&Policy::default(), Some(&template));
        let spec = &pod["spec"];
        let sandbox = &spec["containers"][0];
        assert_eq!(pod["metadata"]["name"], "sandlot-abc");
        assert_eq!(pod["metadata"]["labels"]["team"], "data");
        assert_eq!(pod["metadata"]["labels"][NETWORK_LABEL], "off");
        assert_eq!(spec["nodeSelector"]["pool"], "sandboxes");
        assert_eq!(spec["tolerations"][0]["key"], "sandbox");
        assert_eq!(spec["hostNetwork"], false);
        assert_eq!(spec["hostPID"], false);
        assert_eq!(spec["automountServiceAccountToken"], false);
        assert_eq!(spec["securityContext"]["runAsUser"], 1000);
        assert_eq!(sandbox["image"], "sandlot/python:latest");
        assert_eq!(sandbox["securityContext"]["privileged"], false);
        assert_eq!(sandbox["securityContext"]["runAsUser"], 1000);
        assert_eq!(sandbox["securityContext"]["readOnlyRootFilesystem"], true);
        assert!(sandbox["securityContext"]["capabilities"]["add"].is_null());
        assert!(sandbox["securityContext"]["seLinuxOptions"].is_null());
        let annotations = pod["metadata"]["annotations"].as_object().unwrap();
        assert_eq!(annotations["owner"], "data-team");
        assert!(
            annotations.keys().all(|k| !k.contains("apparmor")),
            "{annotations:?}"
        );
        assert_eq!(
            sandbox["resources"]["limits"]["memory"],
            (256 << 20).to_string()
        );
        assert_eq!(sandbox["resources"]["requests"]["cpu"], "250m");
        assert_eq!(
            sandbox["resources"]["requests"]["memory"],
            (64 << 20).to_string()
        );
        assert_eq!(sandbox["env"], json!([{ "name": "TEAM", "value": "data" }]));
    }

    #[test]
    fn a_template_that_reaches_the_host_or_adds_containers_is_refused() {
        for (text, says) in [
            (
                "spec:\n  volumes: [{ name: root, hostPath: { path: / } }]\n",
                "host path",
            ),
            (
                "spec:\n  containers: [{ name: sidecar, image: x }]\n",
                "`sidecar`",
            ),
            (
                "spec:\n  initContainers: [{ name: setup, image: x }]\n",
                "`spec.initContainers`",
            ),
            (
                "spec:\n  volumes: [{ name: data, emptyDir: {} }]\n",
                "adds volumes",
            ),
            (
                "spec:\n  containers: [{ name: sandbox, envFrom: [{ secretRef: { name: s } }] }]\n",
                "`envFrom`",
            ),
            (
                "spec:\n  containers: [{ name: sandbox, volumeMounts: [{ name: x, mountPath: /x }] }]\n",
                "`volumeMounts`",
            ),
            ("- 1\n- 2\n", "mapping"),
            ("spec:\n  containers: 3\n", "not a Pod"),
        ] {
            let error = PodTemplate::parse(text, "t.yaml".as_ref()).unwrap_err();
            let message = error.to_string();
            assert!(message.contains(says), "{message}");
            assert!(message.contains("t.yaml"), "{message}");
        }
    }

    #[test]
    fn label_values_are_made_valid() {
        assert_eq!(label_value("python"), "python");
        assert_eq!(label_value("c++"), "c");
        assert_eq!(label_value("my lang!"), "my-lang");
        assert_eq!(label_value(&"x".repeat(80)).len(), 63);
        let pod = manifest(
            &plan(),
            &SandboxSpec::new("c#", "img", &Policy::default(), 1 << 20),
            None,
        )
        .unwrap();
        assert_eq!(labels(&pod)[LANGUAGE_LABEL], "c");
    }
}
