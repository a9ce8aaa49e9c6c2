//! Memory, process and CPU limits through cgroup v1, where this process may make
//! cgroups: as root, or as a user root has delegated a cgroup to. Each sandbox gets one
//! cgroup per controller, under this process's own (so a limit on the host process
//! still holds its sandboxes), named after this process so that `gc` can remove what a
//! killed host left.
//!
//! ```text
//! /sys/fs/cgroup/memory/<this process's cgroup>/sandlot/<owner stamp>-<sandbox id>/
//! /sys/fs/cgroup/memory/<this process's cgroup>/sandlot-<uid>/<...>/   (not root)
//! ```
//!
//! Delegation on v1 is a directory root makes and gives the user (`chown`): the kernel
//! then gives the user every cgroup made under it, with its limit files, and lets the
//! user's own processes move in. Limits set there hold as root's do: the user's
//! sandboxes cannot raise them (they have no access to the hierarchy at all), and the
//! directory's own limits stay root's.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The controllers a sandbox is limited by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Controller {
    Memory,
    Pids,
    Cpu,
}

impl Controller {
    const ALL: [Controller; 3] = [Controller::Memory, Controller::Pids, Controller::Cpu];

    fn name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Pids => "pids",
            Controller::Cpu => "cpu",
        }
    }
}

/// Where this process makes its sandboxes' cgroups.
#[derive(Debug, Clone)]
pub(crate) struct Cgroups {
    /// One parent directory per controller.
    parents: Vec<(Controller, PathBuf)>,
}

/// What a sandbox may use.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub memory: u64,
    pub pids: u32,
    pub cpu_millis: u32,
}

impl Cgroups {
    /// The parents under this process's own cgroups: as root, made if need be; as
    /// another user, the ones root delegated to it. `Err` says why there are none
    /// (cgroup v2 only, a controller missing, nothing delegated) and what to do.
    pub(crate) fn detect() -> Result<Cgroups, String> {
        let uid = crate::spawn::euid();
        let mut parents = Vec::new();
        let mut missing = Vec::new();
        for (controller, parent) in Cgroups::parents(uid)? {
            if uid == 0 {
                std::fs::create_dir_all(&parent)
                    .map_err(|e| format!("cannot make {} ({e})", parent.display()))?;
            } else if !delegated(&parent, uid) {
                missing.push(parent);
                continue;
            }
            parents.push((controller, parent));
        }
        if !missing.is_empty() {
            return Err(format!(
                "no cgroup is delegated to uid {uid} (as root: {})",
                delegation_commands(&missing, uid)
            ));
        }
        Ok(Cgroups { parents })
    }

    /// Where `uid`'s sandboxes' cgroups go, one parent per controller.
    fn parents(uid: u32) -> Result<Vec<(Controller, PathBuf)>, String> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
        let own = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
        let name = match uid {
            0 => "sandlot".to_string(),
            uid => format!("sandlot-{uid}"),
        };
        Controller::ALL
            .into_iter()
            .map(|controller| {
                let mount = v1_mount(&mountinfo, controller.name()).ok_or_else(|| {
                    format!(
                        "no cgroup v1 `{}` hierarchy is mounted (cgroup v2 is not supported \
                         yet)",
                        controller.name()
                    )
                })?;
                let path = own_path(&own, controller.name()).unwrap_or_else(|| "/".into());
                Ok((
                    controller,
                    mount.join(path.trim_start_matches('/')).join(&name),
                ))
            })
            .collect()
    }

    /// Whether every controller's v1 hierarchy is mounted: what [`Cgroups::detect`]
    /// needs before it makes anything, read without making anything.
    pub(crate) fn mounted() -> bool {
        std::fs::read_to_string("/proc/self/mountinfo").is_ok_and(|mountinfo| {
            Controller::ALL
                .iter()
                .all(|c| v1_mount(&mountinfo, c.name()).is_some())
        })
    }

    /// Where the controllers' parents are, for `doctor`.
    pub(crate) fn describe(&self) -> String {
        self.parents
            .iter()
            .map(|(c, p)| format!("{} at {}", c.name(), p.display()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Makes the cgroups of one sandbox, with its limits written.
    pub(crate) fn make(&self, name: &str, limits: Limits) -> io::Result<Slot> {
        let mut slot = Slot {
            dirs: Vec::new(),
            memory: None,
        };
        for (controller, parent) in &self.parents {
            let dir = parent.join(name);
            std::fs::create_dir(&dir)?;
            slot.dirs.push(dir.clone());
            let write = |file: &str, value: String| {
                std::fs::write(dir.join(file), &value).map_err(|e| {
                    io::Error::new(e.kind(), format!("{}/{file} = {value}: {e}", dir.display()))
                })
            };
            match controller {
                Controller::Memory => {
                    write("memory.limit_in_bytes", limits.memory.to_string())?;
                    // Swap would turn the cap into a slowdown, as Docker's
                    // `memory_swap = memory`.
                    if dir.join("memory.memsw.limit_in_bytes").exists() {
                        write("memory.memsw.limit_in_bytes", limits.memory.to_string())?;
                    }
                    slot.memory = Some(dir.clone());
                }
                Controller::Pids => write("pids.max", limits.pids.to_string())?,
                Controller::Cpu => {
                    write("cpu.cfs_period_us", "100000".into())?;
                    write(
                        "cpu.cfs_quota_us",
                        (u64::from(limits.cpu_millis.max(1)) * 100).to_string(),
                    )?;
                }
            }
        }
        Ok(slot)
    }

    /// Removes the cgroups of sandboxes whose host process is gone.
    pub(crate) fn sweep(&self) -> Vec<PathBuf> {
        let mut removed = Vec::new();
        for (_, parent) in &self.parents {
            for dir in sandlot_core::backend::owner::left_by_the_gone(parent, "") {
                kill_all(&dir);
                if std::fs::remove_dir(&dir).is_ok() {
                    removed.push(dir);
                }
            }
        }
        removed
    }
}

/// The cgroups of one sandbox.
#[derive(Debug)]
pub(crate) struct Slot {
    dirs: Vec<PathBuf>,
    memory: Option<PathBuf>,
}

impl Slot {
    /// The memory cgroup's directory.
    pub(crate) fn memory(&self) -> Option<&Path> {
        self.memory.as_deref()
    }

    /// The `cgroup.procs` files a process writes itself into to join.
    pub(crate) fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.join("cgroup.procs")).collect()
    }

    /// Removes the cgroups, killing what is left in them first; waits up to
    /// `within` for the kernel to see the processes gone. `false` if one could not
    /// be removed by then (`gc` removes it later).
    pub(crate) fn remove(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        self.dirs.retain(|dir| {
            kill_all(dir);
            loop {
                match std::fs::remove_dir(dir) {
                    Ok(()) => return false,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => return false,
                    Err(_) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(2))
                    }
                    Err(_) => return true,
                }
            }
        });
        self.dirs.is_empty()
    }
}

/// Whether root gave `dir` to `uid`: it is a directory `uid` owns.
fn delegated(dir: &Path, uid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(dir).is_ok_and(|m| m.is_dir() && m.uid() == uid)
}

/// The shell commands with which root delegates `dirs` to `uid`.
fn delegation_commands(dirs: &[PathBuf], uid: u32) -> String {
    let dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    format!(
        "`mkdir -p {dirs} && chown {uid} {dirs}`",
        dirs = dirs.join(" ")
    )
}

/// Sends SIGKILL to every process in the cgroup at `dir`.
fn kill_all(dir: &Path) {
    let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) else {
        return;
    };
    for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
        crate::spawn::kill(pid);
    }
}

/// The mount point of the v1 hierarchy that holds `controller`.
fn v1_mount(mountinfo: &str, controller: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        // `id parent major:minor root mount-point options ... - fstype source super-options`
        let (before, after) = line.split_once(" - ")?;
        let mut after = after.split(' ');
        if after.next()? != "cgroup" {
            return None;
        }
        let options = after.nth(1)?;
        if !options.split(',').any(|o| o == controller) {
            return None;
        }
        before.split(' ').nth(4).map(PathBuf::from)
    })
}

/// This process's cgroup in the v1 hierarchy holding `controller`, from
/// `/proc/self/cgroup` (`id:controllers:path`).
fn own_path(cgroup: &str, controller: &str) -> Option<String> {
    cgroup.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == controller)
            .then(|| path.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hierarchies_and_own_cgroups_are_read_from_proc() {
        let mountinfo = "\
30 23 0:26 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw,mode=755
33 30 0:29 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,memory
34 30 0:30 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct
35 30 0:31 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw";
        assert_eq!(
            v1_mount(mountinfo, "memory"),
            Some(PathBuf::from("/sys/fs/cgroup/memory"))
        );
        assert_eq!(
            v1_mount(mountinfo, "cpu"),
            Some(PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"))
        );
        assert_eq!(v1_mount(mountinfo, "pids"), None);
        let cgroup = "12:pids:/\n4:memory:/process_api/7\n3:cpu,cpuacct:/\n0::/";
        assert_eq!(
            own_path(cgroup, "memory").as_deref(),
            Some("/process_api/7")
        );
        assert_eq!(own_path(cgroup, "cpu").as_deref(), Some("/"));
        assert_eq!(own_path(cgroup, "blkio"), None);
    }

    #[test]
    fn delegation_is_a_directory_the_user_owns_and_the_error_says_how() {
        let dir = tempfile::tempdir().unwrap();
        let me = crate::spawn::euid();
        assert!(delegated(dir.path(), me));
        assert!(!delegated(dir.path(), me + 1));
        assert!(!delegated(&dir.path().join("absent"), me));
        let commands = delegation_commands(
            &[
                "/sys/fs/cgroup/memory/sandlot-1001".into(),
                "/sys/fs/cgroup/pids/sandlot-1001".into(),
            ],
            1001,
        );
        assert_eq!(
            commands,
            "`mkdir -p /sys/fs/cgroup/memory/sandlot-1001 /sys/fs/cgroup/pids/sandlot-1001 \
             && chown 1001 /sys/fs/cgroup/memory/sandlot-1001 /sys/fs/cgroup/pids/sandlot-1001`"
        );
    }
}
