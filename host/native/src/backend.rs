//! The native backend: what it can do and enforce here, its sandboxes (each a jail),
//! what `sandlot doctor` says of it, and collecting what killed hosts left.

use crate::dir::{data_dir_error, STATE_PREFIX};
use crate::jail::Bwrap;
use crate::rootfs::{Rootfs, RootfsStore};
use crate::{cgroup, jail, seccomp, spawn};
use sandlot_container::recipe::Recipe;
use sandlot_core::backend::{
    check_capabilities, Backend, BackendName, Capabilities, Capability, Check, Needs, Sandbox,
    SandboxSpec, Unsuitable,
};
use sandlot_core::error::{Error, Result};
use sandlot_core::policy::{Policy, PolicyField, Seccomp};
use sandlot_core::toolchain::Toolchain;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The native backend.
pub struct NativeBackend {
    pub(crate) bwrap: Bwrap,
    store: RootfsStore,
    /// Where the agent executable is written, for sandboxes to mount.
    agent_dir: PathBuf,
    /// Whether sandlot runs as root (each sandbox then gets a host uid of its own).
    pub(crate) root: bool,
    pub(crate) cgroups: Option<cgroup::Cgroups>,
    /// Why there are no cgroups, for `doctor`.
    no_cgroups: Option<String>,
    pub(crate) spawner: spawn::Spawner,
    /// Egress proxies and tool calls.
    pub(crate) runtime: Arc<tokio::runtime::Runtime>,
    /// What each image's Debian package database holds, read once.
    packages: Mutex<std::collections::HashMap<String, Option<Toolchain>>>,
    /// Whether what a killed host left was collected already.
    collected: Mutex<bool>,
}

impl std::fmt::Debug for NativeBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeBackend")
            .field("bwrap", &self.bwrap)
            .field("store", &self.store.dir())
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

/// A sandbox of this backend, as [`NativeBackend::sandboxes`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SandboxInfo {
    /// `sandlot-<sandbox id>`.
    pub name: String,
    /// Whether the process that opened it still runs.
    pub owner_alive: bool,
    /// Its host directory.
    pub dir: PathBuf,
}

impl NativeBackend {
    /// Finds bubblewrap and the cgroups this process may make, with root filesystems
    /// in `dir` (see [`default_dir`]).
    pub fn connect(dir: &Path) -> Result<NativeBackend> {
        let bwrap = Bwrap::find()?;
        let root = spawn::is_root();
        let (cgroups, no_cgroups) = match cgroup::Cgroups::detect() {
            Ok(cgroups) => (Some(cgroups), None),
            Err(why) => (None, Some(why)),
        };
        let unavailable = |reason: String| Error::EngineUnavailable {
            engine: "native".into(),
            endpoint: bwrap.path.display().to_string(),
            reason,
            hint: "see `sandlot doctor`".into(),
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("sandlot-native")
            .enable_all()
            .build()
            .map_err(|e| unavailable(format!("cannot start an I/O runtime: {e}")))?;
        let spawner = spawn::Spawner::start()
            .map_err(|e| unavailable(format!("cannot start the spawner thread: {e}")))?;
        Ok(NativeBackend {
            store: RootfsStore::at(dir.join("rootfs")),
            agent_dir: dir.join("agent"),
            bwrap,
            root,
            cgroups,
            no_cgroups,
            spawner,
            runtime: Arc::new(runtime),
            packages: Mutex::new(Default::default()),
            collected: Mutex::new(false),
        })
    }

    /// The root filesystems.
    pub fn store(&self) -> &RootfsStore {
        &self.store
    }

    /// The bubblewrap it jails with.
    pub fn bwrap(&self) -> &Bwrap {
        &self.bwrap
    }

    /// Makes `recipe`'s root filesystem: its tarball (built with mmdebstrap into
    /// `cache_dir` unless Docker or Podman built it already), unpacked into the store.
    pub fn build_image(
        &self,
        recipe: &Recipe,
        cache_dir: &Path,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Rootfs> {
        self.store.prepare()?;
        let tar = recipe.rootfs_tar(cache_dir, progress)?;
        let rootfs = self.store.unpack(recipe, &tar, progress)?;
        progress(&format!("built {} for native", recipe.image));
        Ok(rootfs)
    }

    /// The tree a sandbox of `spec` runs on.
    pub(crate) fn rootfs_of(&self, spec: &SandboxSpec<'_>) -> Result<Rootfs> {
        let missing = || Error::ImageMissing {
            engine: "native".into(),
            image: spec.image.into(),
            language: spec.language.into(),
        };
        let recipe = Recipe::all()
            .into_iter()
            .find(|r| r.image == spec.image)
            .ok_or_else(missing)?;
        self.store.find(&recipe).ok_or_else(missing)
    }

    pub(crate) fn agent_file(&self) -> Result<PathBuf> {
        let file = sandlot_container::executable_file_in(&self.agent_dir).map_err(|e| match e {
            Error::Io {
                context, source, ..
            } => data_dir_error(context, source),
            e => e,
        })?;
        // The sandboxes' uids must get to it.
        for dir in [self.agent_dir.parent(), Some(self.agent_dir.as_path())]
            .into_iter()
            .flatten()
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755));
        }
        Ok(file)
    }

    /// The sandboxes of this machine's native backends, open or left by a killed
    /// host (their host directories).
    pub fn sandboxes(&self) -> Vec<SandboxInfo> {
        let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                let rest = name.strip_prefix(STATE_PREFIX)?;
                let mut parts = rest.split('-');
                let (stamp, id) = (parts.next()?, parts.next()?);
                Some(SandboxInfo {
                    name: format!("sandlot-{id}"),
                    owner_alive: sandlot_core::backend::owner::stamp_alive(stamp),
                    dir: entry.path(),
                })
            })
            .collect()
    }

    /// Removes what hosts killed before they closed their sandboxes left: host
    /// directories and cgroups (their jails died with them). Returns the names of the
    /// sandboxes removed.
    pub fn gc(&self) -> Vec<String> {
        let gone: Vec<SandboxInfo> = self
            .sandboxes()
            .into_iter()
            .filter(|s| !s.owner_alive)
            .collect();
        sandlot_core::backend::owner::sweep_temp_dirs(STATE_PREFIX);
        if let Some(cgroups) = &self.cgroups {
            cgroups.sweep();
        }
        gone.into_iter().map(|s| s.name).collect()
    }
}

impl NativeBackend {
    /// What a jail here may do of the calls a jail must refuse, probed in one (see
    /// [`sandlot_container::probe_system_calls`]): this also proves a jail opens.
    fn probe_check(&self) -> Check {
        let Some(image) = Recipe::all()
            .into_iter()
            .find(|r| self.store.find(r).is_some())
            .map(|r| r.image)
        else {
            return Check::gap(
                "system calls",
                "not probed: no root filesystem is built to probe in",
                "sandlot images build --engine native python",
            );
        };
        let policy = Policy {
            network: sandlot_core::Network::Off,
            ..Policy::default()
        };
        let spec = SandboxSpec::new("python", &image, &policy, 256 << 20);
        match Backend::open(self, &spec) {
            Ok(mut sandbox) => {
                sandlot_container::probe_system_calls(&mut *sandbox, "/.sandlot/agent")
            }
            Err(e) => Check::gap(
                "system calls",
                format!("not probed: a jail did not open: {e}"),
                "see the jail and users checks above; the kernel must allow user namespaces",
            ),
        }
    }
}

impl Backend for NativeBackend {
    fn name(&self) -> BackendName {
        BackendName::NATIVE
    }

    fn capabilities(&self, _language: &str) -> Capabilities {
        let mut capabilities = Capabilities::new([
            Capability::RunsPlans,
            Capability::Kernels,
            Capability::Shell,
            Capability::InstallLibraries,
            Capability::NetworkControl,
            Capability::Images,
            Capability::Tools,
        ]);
        if self.cgroups.is_some() {
            capabilities.insert(Capability::MemoryLimit);
        }
        capabilities
    }

    /// What the capabilities allow, in a root filesystem that is unpacked here: the
    /// image the session names, else the recipe of its language.
    fn supports(&self, needs: &Needs<'_>) -> std::result::Result<(), Unsuitable> {
        check_capabilities(needs, &self.capabilities(needs.language))?;
        let recipes = Recipe::all();
        let recipe = match needs.image {
            Some(image) => recipes
                .into_iter()
                .find(|r| r.image == image)
                .ok_or_else(|| {
                    Unsuitable(format!(
                        "it runs sandlot's own images only (`sandlot images list`), not `{image}`"
                    ))
                })?,
            None => match recipes
                .into_iter()
                .find(|r| r.languages.iter().any(|l| l == needs.language))
            {
                Some(recipe) => recipe,
                // No recipe: the session's image comes from sandlot.toml's [images],
                // which open() checks.
                None => return Ok(()),
            },
        };
        match self.store.find(&recipe) {
            Some(_) => Ok(()),
            None => Err(Unsuitable(format!(
                "`{}` is not unpacked here: `sandlot images build --engine native {}`",
                recipe.image, recipe.name
            ))),
        }
    }

    fn open(&self, spec: &SandboxSpec<'_>) -> Result<Box<dyn Sandbox>> {
        {
            let mut collected = self.collected.lock().unwrap_or_else(|e| e.into_inner());
            if !*collected {
                *collected = true;
                self.gc();
            }
        }
        Ok(Box::new(self.open_jail(spec)?))
    }

    /// Without cgroups, the CPU limit (processes and each process's memory are
    /// limited by rlimits instead); Docker's system call profile where it is not written out for the
    /// machine's architecture.
    fn unenforced(&self, policy: &Policy) -> Vec<PolicyField> {
        let mut fields = Vec::new();
        if self.cgroups.is_none() {
            fields.push(PolicyField::CpuMillis);
        }
        if !seccomp::WRITTEN_OUT && policy.seccomp == Seccomp::EngineDefault {
            fields.push(PolicyField::Seccomp);
        }
        fields
    }

    fn checks(&self) -> Vec<Check> {
        let mut checks = vec![if self.bwrap.setuid {
            Check::gap(
                "jail",
                format!(
                    "{} ({}) is setuid root",
                    self.bwrap.path.display(),
                    self.bwrap.version
                ),
                "install a bubblewrap that is not setuid: a setuid one refuses the options \
                 sandlot needs",
            )
        } else {
            Check::ok(
                "jail",
                format!("{} at {}", self.bwrap.version, self.bwrap.path.display()),
            )
        }];
        checks.push(match jail::user_namespaces_refused() {
            Some(why) => Check::gap(
                "user namespaces",
                "every jail is made in user namespaces, and this kernel refuses them",
                why,
            ),
            None => Check::ok("user namespaces", "allowed"),
        });
        checks.push(Check::ok(
            "users",
            if self.root {
                "root: each sandbox runs as a host uid of its own, from 2000000000 up"
            } else {
                "not root: sandboxes run as this user, in user namespaces of their own"
            },
        ));
        checks.push(match (&self.cgroups, &self.no_cgroups) {
            (Some(cgroups), _) => Check::ok("limits", format!("cgroup v1: {}", cgroups.describe())),
            (None, why) => Check::gap(
                "limits",
                format!(
                    "no cgroups ({}): the CPU limit is not enforced, and memory is \
                     capped per process (RLIMIT_DATA), not per sandbox; each sandbox's \
                     processes are limited by RLIMIT_NPROC",
                    why.as_deref().unwrap_or("unknown")
                ),
                if self.root {
                    "run sandlot on a host with cgroup v1 hierarchies mounted"
                } else {
                    "delegate a cgroup as said above, or run sandlot as root"
                },
            ),
        });
        checks.push(self.probe_check());
        checks.push(if seccomp::WRITTEN_OUT {
            Check::ok(
                "seccomp",
                format!(
                    "Docker's default profile ({}; x86_64 calls only, no io_uring), loaded \
                     by bwrap, and sandlot's own filter over it",
                    seccomp::PROFILE
                ),
            )
        } else {
            Check::gap(
                "seccomp",
                format!(
                    "sandlot's own filter only: Docker's profile is written out for x86_64, \
                     not {}",
                    std::env::consts::ARCH
                ),
                "use docker or podman where the engine's profile is required",
            )
        });
        for recipe in Recipe::all() {
            let state = match self.store.find(&recipe) {
                Some(rootfs) if rootfs.recipe_hash == recipe.hash => Check::ok(
                    "root filesystem",
                    format!("{}: {}", recipe.image, rootfs.path.display()),
                ),
                Some(_) => Check::gap(
                    "root filesystem",
                    format!("{}: built from an older recipe", recipe.image),
                    format!("sandlot images build --engine native {}", recipe.name),
                ),
                None => Check::gap(
                    "root filesystem",
                    format!("{}: not built", recipe.image),
                    format!("sandlot images build --engine native {}", recipe.name),
                ),
            };
            checks.push(state);
        }
        checks.push(sandlot_container::proxy::bound_secrets_check(None));
        checks
    }

    /// Read from the tree's Debian package database, once per image.
    fn toolchain(&self, language: &str, image: &str) -> Result<Option<Toolchain>> {
        let key = format!("{language}\0{image}");
        let mut known = self.packages.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(toolchain) = known.get(&key) {
            return Ok(toolchain.clone());
        }
        let Some(rootfs) = Recipe::all()
            .into_iter()
            .find(|r| r.image == image)
            .and_then(|r| self.store.find(&r))
        else {
            return Ok(None);
        };
        let status = rootfs
            .path
            .join(sandlot_container::toolchain::DPKG_STATUS.trim_start_matches('/'));
        let text = std::fs::read_to_string(&status).map_err(|source| Error::Io {
            context: format!("cannot read {}", status.display()),
            source,
        })?;
        let packages = sandlot_container::toolchain::installed_packages(&text);
        let toolchain = sandlot_container::toolchain::of_image(language, image, &packages);
        known.insert(key, toolchain.clone());
        Ok(toolchain)
    }
}
