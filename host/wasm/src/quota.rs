//! The disk quota of a wasm sandbox's workspace (the policy's `workdir_size`).
//!
//! A workspace is a directory of the host, and nothing in a plain directory bounds
//! it. So each workspace is a tmpfs of its own, `workdir_size` large: the kernel
//! counts every write, the interpreter's and the host's alike, and refuses one past
//! the limit with `ENOSPC`, as a full disk does; the program can handle it and the
//! interpreter goes on. It is what the container backends give their workspaces.
//!
//! The tmpfs is mounted by a short-lived child in a user and mount namespace of its
//! own (no privilege needed where the kernel allows unprivileged user namespaces;
//! root needs only the mount namespace). The child hands the host a descriptor of the
//! tmpfs's root and exits; its namespace goes with it, which detaches the mount from
//! every tree, so no path leads to it: the host reaches it only through that
//! descriptor (as `/proc/self/fd/N`), and it is freed when the descriptor closes. The
//! host's mount table never changes.
//!
//! Where no namespace can be made, workspaces are plain directories and the backend
//! reports `workdir_size` unenforced ([`available`] says why).
// clone(2), unshare(2), mount(2) and SCM_RIGHTS have no safe wrapper in std.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::Path;

/// What can go wrong in the child, by its exit status.
const STEPS: [&str; 7] = [
    "",
    "cannot make a mount namespace",
    "cannot map the user into the new user namespace",
    "cannot make the mounts private",
    "cannot mount the tmpfs",
    "cannot open the tmpfs",
    "cannot hand over the tmpfs",
];

/// Whether workspaces can have a quota here: `Err` says why not, and what to do.
/// Tried once per process.
pub(crate) fn available() -> Result<(), String> {
    static PROBE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    PROBE
        .get_or_init(|| {
            let dir = tempfile::tempdir().map_err(|e| format!("no temporary directory: {e}"))?;
            tmpfs(dir.path(), 1 << 20).map(drop).map_err(|e| {
                format!(
                    "a size-limited tmpfs cannot be mounted for a workspace ({e}); allow \
                     unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, \
                     user.max_user_namespaces > 0) or run as root"
                )
            })
        })
        .clone()
}

/// A tmpfs of `limit` bytes (and a proportionate number of files), its root a
/// directory only the caller's user may enter, mounted over `mountpoint` in a mount
/// namespace that ends at once: the returned descriptor is the only way to it.
pub(crate) fn tmpfs(mountpoint: &Path, limit: u64) -> io::Result<OwnedFd> {
    // Everything the child needs is made before it starts: it shares this process's
    // memory, which other threads keep using, so it may only make system calls.
    let target = CString::new(mountpoint.as_os_str().as_bytes())?;
    // An inode costs kernel memory the size does not count: one per 4 KiB, at least
    // 1,024, so a flood of empty files stops too.
    let inodes = (limit / 4096).clamp(1024, 1 << 20);
    let options = CString::new(format!("size={limit},nr_inodes={inodes},mode=0700"))?;
    // SAFETY: getuid(2) and getgid(2) cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let uid_map = format!("0 {uid} 1");
    let gid_map = format!("0 {gid} 1");
    let (parent, child) = UnixStream::pair()?;
    let work = ChildWork {
        target: &target,
        options: &options,
        uid_map: &uid_map,
        gid_map: &gid_map,
        socket: child.as_raw_fd(),
    };
    let pid = spawn(&work)?;
    drop(child);
    let received = receive_fd(&parent);
    let mut status = 0;
    // SAFETY: waitpid(2) on the child just started.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    match received {
        Some(fd) => Ok(fd),
        None => {
            let step = if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status) as usize
            } else {
                0
            };
            Err(io::Error::other(
                STEPS
                    .get(step)
                    .filter(|s| !s.is_empty())
                    .copied()
                    .unwrap_or("the helper that mounts it failed"),
            ))
        }
    }
}

/// What the child is given, prepared before it starts.
struct ChildWork<'a> {
    target: &'a CString,
    options: &'a CString,
    uid_map: &'a str,
    gid_map: &'a str,
    socket: i32,
}

/// The child's stack: it makes system calls only.
const CHILD_STACK: usize = 64 << 10;

/// Starts the child that runs `work` and returns its pid, once it has ended.
///
/// It shares this process's memory (`CLONE_VM`) and this thread waits while it runs
/// (`CLONE_VFORK`), as `posix_spawn` does: a `fork` would copy the page tables of the
/// whole process first, which in a host holding large interpreters (a data session,
/// its forks) cost more than the rest of opening a sandbox.
fn spawn(work: &ChildWork<'_>) -> io::Result<libc::pid_t> {
    extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the `ChildWork` the parent keeps alive while it waits.
        let work = unsafe { &*(arg as *const ChildWork<'_>) };
        let status = mount_in_child(
            work.target,
            work.options,
            work.uid_map,
            work.gid_map,
            work.socket,
        );
        // SAFETY: _exit(2) ends this child alone (it is a process of its own, not a
        // thread), without running anything of the parent's.
        unsafe { libc::_exit(status) }
    }
    let mut stack = vec![0u8; CHILD_STACK];
    // SAFETY: within the allocation; the stack grows down from its 16-byte-aligned top.
    let top = unsafe { stack.as_mut_ptr().add(CHILD_STACK) };
    let top = (top as usize & !15) as *mut libc::c_void;
    // No signal handler may run in the child, on memory it shares with this process:
    // every signal is blocked across the clone (the child inherits the mask) and the
    // mask restored after.
    // SAFETY: sigfillset(3) and pthread_sigmask(3) on local sets.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    // SAFETY: clone(2) with a stack of our own; the child runs `child`, which makes
    // system calls on memory prepared before it started and ends with _exit(2), and
    // CLONE_VFORK holds this thread (so `work` and `stack` live) until it has.
    let pid = unsafe {
        libc::clone(
            child,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            work as *const ChildWork<'_> as *mut libc::c_void,
        )
    };
    let error = io::Error::last_os_error();
    // SAFETY: restores the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    drop(stack);
    if pid < 0 {
        return Err(error);
    }
    Ok(pid)
}

/// The child's work: namespaces, the tmpfs, its descriptor sent to the parent.
/// Returns the exit status (an index of [`STEPS`]). System calls only.
fn mount_in_child(
    target: &CString,
    options: &CString,
    uid_map: &str,
    gid_map: &str,
    socket: i32,
) -> i32 {
    // SAFETY (the whole function): system calls on NUL-terminated strings and buffers
    // that live on this stack or were prepared before it started.
    unsafe {
        let user = libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) == 0;
        if !user && (libc::geteuid() != 0 || libc::unshare(libc::CLONE_NEWNS) != 0) {
            return 1;
        }
        if user {
            let wrote = write_file(c"/proc/self/setgroups", b"deny")
                && write_file(c"/proc/self/uid_map", uid_map.as_bytes())
                && write_file(c"/proc/self/gid_map", gid_map.as_bytes());
            if !wrote {
                return 2;
            }
        }
        // Nothing mounted here may reach the host's namespace through a shared mount.
        let root = c"/";
        if libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return 3;
        }
        let tmpfs = c"tmpfs";
        if libc::mount(
            tmpfs.as_ptr(),
            target.as_ptr(),
            tmpfs.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            options.as_ptr().cast(),
        ) != 0
        {
            return 4;
        }
        let fd = libc::open(
            target.as_ptr(),
            libc::O_DIRECTORY | libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return 5;
        }
        if !send_fd(socket, fd) {
            return 6;
        }
        0
    }
}

/// Writes `bytes` to `path`, opened for writing; system calls only.
unsafe fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> bool {
    // SAFETY: the caller's: open(2), write(2), close(2) on a valid path and buffer.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        libc::close(fd);
        written == bytes.len() as isize
    }
}

/// The room a message with one descriptor needs for its control data.
const CONTROL: usize = 64;

/// The one data byte a descriptor travels with (a message must carry some data).
fn one_byte(byte: &mut [u8; 1]) -> libc::iovec {
    libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    }
}

/// A message header over `iov` with room for `control`; the pointers it holds are
/// valid as long as both borrows are.
fn with_control(iov: &mut libc::iovec, control: &mut [u8; CONTROL]) -> libc::msghdr {
    // SAFETY: msghdr is plain data, all-zero is its empty value.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = iov;
    message.msg_iovlen = 1;
    message.msg_control = control.as_mut_ptr().cast();
    message.msg_controllen = control.len() as _;
    message
}

/// Sends `fd` over `socket` (SCM_RIGHTS); system calls only.
unsafe fn send_fd(socket: i32, fd: i32) -> bool {
    // SAFETY: the caller's: sendmsg(2) with buffers on this stack, sized for one
    // descriptor (CMSG_SPACE of an int is well under CONTROL).
    unsafe {
        let mut byte = [0u8; 1];
        let mut iov = one_byte(&mut byte);
        let mut control = [0u8; CONTROL];
        let mut message = with_control(&mut iov, &mut control);
        message.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<i32>() as u32) as _;
        let header = libc::CMSG_FIRSTHDR(&message);
        if header.is_null() {
            return false;
        }
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<i32>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(header).cast::<i32>(), fd);
        libc::sendmsg(socket, &message, 0) == 1
    }
}

/// The descriptor the child sent, if it sent one.
fn receive_fd(socket: &UnixStream) -> Option<OwnedFd> {
    // SAFETY: recvmsg(2) with buffers on this stack; a descriptor received is owned
    // from here on.
    unsafe {
        let mut byte = [0u8; 1];
        let mut iov = one_byte(&mut byte);
        let mut control = [0u8; CONTROL];
        let mut message = with_control(&mut iov, &mut control);
        if libc::recvmsg(socket.as_raw_fd(), &mut message, libc::MSG_CMSG_CLOEXEC) != 1 {
            return None;
        }
        let header = libc::CMSG_FIRSTHDR(&message);
        if header.is_null()
            || (*header).cmsg_level != libc::SOL_SOCKET
            || (*header).cmsg_type != libc::SCM_RIGHTS
        {
            return None;
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(header).cast::<i32>());
        (fd >= 0).then(|| OwnedFd::from_raw_fd(fd))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workspace_tmpfs_holds_its_size_and_is_reached_only_through_its_descriptor() {
        if let Err(why) = available() {
            panic!("this machine allows user namespaces or runs as root: {why}");
        }
        let mountpoint = tempfile::tempdir().unwrap();
        let fd = tmpfs(mountpoint.path(), 256 << 10).unwrap();
        let root = std::path::PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        std::fs::write(root.join("a.bin"), vec![1u8; 100 << 10]).unwrap();
        let full = std::fs::write(root.join("b.bin"), vec![1u8; 200 << 10]).unwrap_err();
        assert_eq!(full.raw_os_error(), Some(libc::ENOSPC), "{full}");
        // The mount point is an empty directory for everyone else.
        assert_eq!(std::fs::read_dir(mountpoint.path()).unwrap().count(), 0);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&root).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        std::fs::remove_file(root.join("a.bin")).unwrap();
        std::fs::write(root.join("b.bin"), vec![1u8; 200 << 10]).unwrap();
    }
}
