//! What `sandlot doctor` learns from a Docker or Podman engine: its version, and
//! whether seccomp, user namespaces and the cgroup controllers sandlot's limits rely
//! on are in force.

use crate::backend::ContainerBackend;
use crate::engine::Engine;
use crate::images::Recipe;
use sandlot_core::backend::{Backend, Check, SandboxSpec};

impl ContainerBackend {
    /// The engine's version and isolation, as [`sandlot_core::backend::Backend::checks`]
    /// reports them.
    pub(super) fn engine_checks(&self) -> Vec<Check> {
        let docker = self.docker.clone();
        let info = match self.wait(
            "reading the engine's info",
            async move { docker.info().await },
        ) {
            Ok(info) => info,
            Err(e) => {
                return vec![Check::gap(
                    "engine",
                    format!("{} does not answer: {e}", self.engine().name()),
                    "start the engine, or point sandlot at it (DOCKER_HOST, sandlot.toml)",
                )]
            }
        };
        let docker = self.docker.clone();
        let api = self
            .wait("reading the engine's version", async move {
                docker.version().await
            })
            .ok()
            .and_then(|v| v.api_version)
            .unwrap_or_else(|| "?".into());
        let version = info.server_version.clone().unwrap_or_else(|| "?".into());
        let mut checks = vec![Check::ok(
            "engine",
            format!(
                "{} {version} (API {api}) at {}",
                self.engine().name(),
                self.endpoint()
            ),
        )];
        let options = info.security_options.clone().unwrap_or_default();
        let option = |name: &str| {
            options
                .iter()
                .find(|o| o.split(',').any(|part| part == format!("name={name}")))
        };
        checks.push(match option("seccomp") {
            Some(seccomp) => {
                let profile = seccomp
                    .split(',')
                    .find_map(|part| part.strip_prefix("profile="))
                    .unwrap_or("default");
                Check::ok("seccomp", format!("on, profile {profile}"))
            }
            None => Check::gap(
                "seccomp",
                "off: system calls such as mount, bpf and kexec_load are not filtered",
                "run the engine with seccomp support (a kernel with CONFIG_SECCOMP and an \
                 engine built with libseccomp)",
            ),
        });
        let rootless = option("rootless").is_some();
        checks.push(if option("userns").is_some() || rootless {
            Check::ok(
                "user namespaces",
                if rootless {
                    "rootless engine: root in a container is an unprivileged user outside"
                } else {
                    "userns-remap on: uids in containers map to unprivileged host uids"
                },
            )
        } else {
            let fix = match self.engine() {
                Engine::Docker => {
                    "set \"userns-remap\": \"default\" in /etc/docker/daemon.json, or run \
                     rootless Docker"
                }
                Engine::Podman => "run Podman rootless, as an unprivileged user",
            };
            Check::gap(
                "user namespaces",
                "off: a sandbox's uid 1000 is the host's uid 1000 (sandlot never runs code \
                 as root, and drops every capability)",
                fix,
            )
        });
        let cgroup = format!(
            "cgroup {} ({})",
            info.cgroup_version
                .map(|v| v.to_string())
                .unwrap_or_else(|| "?".into()),
            info.cgroup_driver
                .map(|d| d.to_string())
                .unwrap_or_else(|| "?".into()),
        );
        let missing: Vec<&str> = [
            ("memory", info.memory_limit),
            ("pids", info.pids_limit),
            ("cpu", info.cpu_cfs_quota),
        ]
        .into_iter()
        // Podman's answer leaves some out: only a `false` is a gap.
        .filter(|(_, supported)| *supported == Some(false))
        .map(|(name, _)| name)
        .collect();
        checks.push(if missing.is_empty() {
            Check::ok("limits", format!("{cgroup}: memory, pids and cpu limits"))
        } else {
            Check::gap(
                "limits",
                format!("{cgroup}: no {} limit", missing.join(", ")),
                "enable the cgroup controllers the engine reports missing (kernel boot \
                 options such as cgroup_enable=memory, or cgroup v2)",
            )
        });
        checks.push(self.probe_check());
        checks
    }

    /// What a sandbox of this engine may do of the calls a jail must refuse, probed in
    /// one (see [`sandlot_container::probe_system_calls`]): engines' profiles
    /// differ, and labels say nothing of what a filter refuses.
    fn probe_check(&self) -> Check {
        let Some(image) = Recipe::all()
            .into_iter()
            .map(|recipe| recipe.image)
            .find(|image| self.has_image(image))
        else {
            return Check::gap(
                "system calls",
                "not probed: no sandlot image is in this engine to probe in",
                format!("sandlot images build --engine {}", self.engine().name()),
            );
        };
        let policy = sandlot_core::Policy {
            network: sandlot_core::Network::Off,
            ..sandlot_core::Policy::default()
        };
        let spec = SandboxSpec::new("python", &image, &policy, 256 << 20);
        match Backend::open(self, &spec) {
            Ok(mut sandbox) => {
                sandlot_container::probe_system_calls(&mut *sandbox, crate::container::AGENT_PATH)
            }
            Err(e) => Check::gap(
                "system calls",
                format!("not probed: a sandbox did not open: {e}"),
                "see the engine checks above",
            ),
        }
    }
}
