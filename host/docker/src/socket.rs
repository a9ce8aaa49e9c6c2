//! Unix sockets a container reaches through a bind-mounted directory: the agent's,
//! and an egress proxy's.

use std::path::Path;

/// Makes `dir` and the socket in it reachable by the container's user `uid:gid` and
/// by nobody else: another local user who could connect first would be taken for the
/// agent. When sandlot cannot give files away (it is not root), the directory is
/// opened to every user instead, which is all an unprivileged host can do.
pub(super) fn open_to_container(
    dir: &Path,
    socket: &Path,
    uid: u32,
    gid: u32,
) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
    };
    let given = std::os::unix::fs::chown(dir, Some(uid), Some(gid))
        .and_then(|()| std::os::unix::fs::chown(socket, Some(uid), Some(gid)));
    if given.is_ok() {
        mode(dir, 0o700)?;
        mode(socket, 0o600)
    } else {
        mode(dir, 0o755)?;
        mode(socket, 0o666)
    }
}
