//! Who made a sandbox: every backend labels what it creates with the host process that
//! created it, so `gc` can tell what a crashed or killed host left behind.

use std::time::{SystemTime, UNIX_EPOCH};

/// A fresh, unguessable-enough id for a sandbox.
pub fn sandbox_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    hasher.write_u32(std::process::id());
    format!("{:016x}", hasher.finish())
}

/// `boot-id:pid:start-time:pid-namespace` of this process: unique on this machine
/// across restarts, and telling apart hosts in different PID namespaces (a sandlot
/// inside a container that shares the engine).
pub fn owner_tag() -> String {
    let pid = std::process::id();
    format!(
        "{}:{pid}:{}:{}",
        boot_id(),
        start_time(pid).unwrap_or(0),
        pid_namespace()
    )
}

/// The process id in an owner tag.
pub fn owner_pid(tag: &str) -> Option<u32> {
    tag.split(':').nth(1).and_then(|p| p.parse().ok())
}

fn pid_namespace() -> String {
    std::fs::read_link("/proc/self/ns/pid")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Field 22 of `/proc/PID/stat`: when the process started, in clock ticks after boot.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses; fields resume after the last `)`.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(19)?.parse().ok()
}

/// `pid.start-time` of this process: stamped into the names of host files that must
/// not outlive it, so a later process can tell whose they were.
pub fn owner_stamp() -> String {
    let pid = std::process::id();
    format!("{pid}.{}", start_time(pid).unwrap_or(0))
}

/// Whether the process a stamp of [`owner_stamp`] names still runs (in this PID
/// namespace).
pub fn stamp_alive(stamp: &str) -> bool {
    let Some((pid, start)) = stamp.split_once('.') else {
        return false;
    };
    match (pid.parse::<u32>(), start.parse::<u64>()) {
        (Ok(pid), Ok(start)) => start_time(pid) == Some(start),
        _ => false,
    }
}

/// Removes the entries of the temp dir named `<prefix><owner stamp>-...` whose
/// process is gone (killed before it could remove them); returns their paths. No link
/// inside one is followed.
pub fn sweep_temp_dirs(prefix: &str) -> Vec<std::path::PathBuf> {
    left_by_the_gone(&std::env::temp_dir(), prefix)
        .into_iter()
        .filter(|path| std::fs::remove_dir_all(path).is_ok())
        .collect()
}

/// The entries of `dir` named `<prefix><owner stamp>-...` whose process is gone: what
/// a host killed before it could clean up left there.
pub fn left_by_the_gone(dir: &std::path::Path, prefix: &str) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            name.strip_prefix(prefix)
                .and_then(|rest| rest.split('-').next())
                .is_some_and(|stamp| !stamp_alive(stamp))
        })
        .map(|entry| entry.path())
        .collect()
}

/// Whether an owner tag names a process of this machine's current boot: only such an
/// owner can be looked up here.
pub fn this_boot(tag: &str) -> bool {
    tag.split(':').next() == Some(boot_id().as_str())
}

/// Whether the process that made a sandbox is still running. A tag from another boot
/// counts as dead: after a reboot none of its processes exist. (An engine shared by
/// several machines should therefore be collected with `sandlot gc` on one of them
/// only when their sessions are idle.)
pub fn owner_alive(tag: &str) -> bool {
    // The namespace (`pid:[inode]`) holds a colon itself: it is the rest of the tag.
    let mut parts = tag.splitn(4, ':');
    let (Some(boot), Some(pid), Some(start)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    if boot != boot_id() {
        return false;
    }
    // Made by a process in another PID namespace: its pid means nothing here, so it
    // is left alone.
    if parts.next().is_some_and(|ns| ns != pid_namespace()) {
        return true;
    }
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
        return false;
    };
    start_time(pid) == Some(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_dead_one_is_not() {
        assert!(owner_alive(&owner_tag()));
        assert_eq!(owner_pid(&owner_tag()), Some(std::process::id()));
        let pid = std::process::id();
        assert!(!owner_alive(&format!("{}:{pid}:1", boot_id())));
        assert!(!owner_alive(&format!(
            "{}:{pid}:1:{}",
            boot_id(),
            pid_namespace()
        )));
        // Another PID namespace's process cannot be looked up here: left alone.
        assert!(owner_alive(&format!("{}:{pid}:1:pid:[1]", boot_id())));
        assert!(!owner_alive("garbage"));
        assert!(this_boot(&owner_tag()));
        assert!(!this_boot("another-boot:1:2"));
        assert!(stamp_alive(&owner_stamp()));
        assert!(!stamp_alive(&format!("{pid}.1")));
        assert!(!stamp_alive("garbage"));
    }
}
