//! The disk quota of a wasm sandbox's workspace (the policy's `workdir_size`).
//!
//! A workspace is a directory of the host, and nothing in a plain directory bounds
//! it. So each workspace is a tmpfs of its own, `workdir_size` large: the kernel
//! counts every write, the interpreter's and the host's alike, and refuses one past
//! the limit with `ENOSPC`, as a full disk does; the program can handle it and the
//! interpreter goes on. It is what the container backends give their workspaces.
//!
//! The tmpfs is made with the kernel's mount API (`fsopen`, `fsconfig`, `fsmount`,
//! Linux 5.2): `fsmount` hands back a descriptor of a mount that is attached to no
//! tree, so no path leads to it: the host reaches it only through that descriptor (as
//! `/proc/self/fd/N`), and it is freed when the descriptor closes. The host's mount
//! table never changes. A process that may mount (root) makes it itself. Any other
//! needs a user namespace in which it is root and a mount namespace that namespace
//! owns: a short-lived child makes both once, and they are kept by descriptors of
//! them; for each tmpfs a short-lived child enters them, makes it and hands back its
//! descriptor. Making fresh namespaces for each tmpfs, as sandlot did before, cost a
//! sandbox about 1 ms of waiting and 0.2 ms of processor time, mostly in tearing the
//! copied mount table down again.
//!
//! Where no tmpfs can be made, workspaces are plain directories and the backend
//! reports `workdir_size` unenforced ([`available`] says why).
// clone(2), unshare(2), setns(2), the mount API and SCM_RIGHTS have no safe wrapper
// in std.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::OnceLock;

/// What can go wrong in a child, by its exit status.
const STEPS: [&str; 8] = [
    "",
    "cannot make a user and mount namespace",
    "cannot map the user into the new user namespace",
    "cannot hand over the namespaces",
    "cannot enter the namespaces",
    "cannot make the tmpfs",
    "cannot hand over the tmpfs",
    "cannot start the helper process",
];

/// How this process makes a tmpfs, found once.
enum Mounter {
    /// It may mount: it makes them itself.
    Here,
    /// A user namespace in which this process's user is root and a mount namespace
    /// it owns, kept alive by these descriptors; a child enters both for each tmpfs.
    Namespaces { user: OwnedFd, mount: OwnedFd },
}

/// The way to make a tmpfs here, or why there is none. Found once per process.
fn mounter() -> &'static Result<Mounter, String> {
    static MOUNTER: OnceLock<Result<Mounter, String>> = OnceLock::new();
    MOUNTER.get_or_init(|| {
        let options = Options::new(1 << 20);
        let here = make(&options);
        let mounter = match here {
            Ok(fd) => {
                drop(fd);
                Mounter::Here
            }
            Err(Failure { errno, .. }) if errno == libc::ENOSYS => {
                return Err(
                    "this kernel has no mount API (fsopen, Linux 5.2 and later); upgrade \
                     the kernel"
                        .into(),
                )
            }
            Err(_) => {
                let (user, mount) = namespaces().map_err(|e| {
                    format!(
                        "a size-limited tmpfs cannot be made for a workspace ({e}); allow \
                         unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, \
                         user.max_user_namespaces > 0) or run as root"
                    )
                })?;
                let mounter = Mounter::Namespaces { user, mount };
                mounter.make(&options).map(drop).map_err(|e| {
                    format!("a size-limited tmpfs cannot be made for a workspace: {e}")
                })?;
                mounter
            }
        };
        Ok(mounter)
    })
}

/// Whether workspaces can have a quota here: `Err` says why not, and what to do.
/// Tried once per process.
pub(crate) fn available() -> Result<(), String> {
    mounter().as_ref().map(drop).map_err(Clone::clone)
}

/// A tmpfs of `limit` bytes (and a proportionate number of files), its root a
/// directory only the caller's user may enter, attached to no tree: the returned
/// descriptor is the only way to it.
pub(crate) fn tmpfs(limit: u64) -> io::Result<OwnedFd> {
    match mounter() {
        Ok(mounter) => mounter.make(&Options::new(limit)),
        Err(why) => Err(io::Error::other(why.clone())),
    }
}

/// A tmpfs's options as `fsconfig` takes them, prepared before a child starts (it
/// may only make system calls).
struct Options {
    size: CString,
    inodes: CString,
}

impl Options {
    fn new(limit: u64) -> Options {
        // An inode costs kernel memory the size does not count: one per 4 KiB, at
        // least 1,024, so a flood of empty files stops too.
        let inodes = (limit / 4096).clamp(1024, 1 << 20);
        // Decimal digits hold no NUL.
        let number = |n: u64| CString::new(n.to_string()).unwrap_or_default();
        Options {
            size: number(limit),
            inodes: number(inodes),
        }
    }
}

/// A system call that failed: at which step, with which `errno`.
struct Failure {
    step: usize,
    errno: i32,
}

impl Mounter {
    fn make(&self, options: &Options) -> io::Result<OwnedFd> {
        match self {
            Mounter::Here => make(options).map_err(|f| {
                io::Error::other(format!(
                    "{}: {}",
                    STEPS[f.step],
                    io::Error::from_raw_os_error(f.errno)
                ))
            }),
            Mounter::Namespaces { user, mount } => {
                let (parent, child) = UnixStream::pair()?;
                let work = Enter {
                    user: user.as_raw_fd(),
                    mount: mount.as_raw_fd(),
                    options,
                    socket: child.as_raw_fd(),
                };
                let pid = spawn(enter, &work)?;
                drop(child);
                let received = receive_fd(&parent);
                finish(pid, received)
            }
        }
    }
}

/// Waits for the child `pid` and gives the descriptor it sent, or says at which
/// step it failed.
fn finish(pid: libc::pid_t, received: Option<OwnedFd>) -> io::Result<OwnedFd> {
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
                    .unwrap_or("the helper that makes it failed"),
            ))
        }
    }
}

/// Makes a tmpfs with `options` and returns its mount's descriptor. System calls
/// only: a child runs it.
fn make(options: &Options) -> Result<OwnedFd, Failure> {
    let failed = |step| Failure {
        step,
        errno: io::Error::last_os_error().raw_os_error().unwrap_or(0),
    };
    // SAFETY (the whole function): the mount API's system calls on NUL-terminated
    // strings that outlive them; every descriptor made is owned at once.
    unsafe {
        let fs = libc::syscall(libc::SYS_fsopen, c"tmpfs".as_ptr(), libc::FSOPEN_CLOEXEC);
        if fs < 0 {
            return Err(failed(5));
        }
        let fs = OwnedFd::from_raw_fd(fs as RawFd);
        let set = |key: &CStr, value: &CStr| {
            libc::syscall(
                libc::SYS_fsconfig,
                fs.as_raw_fd(),
                libc::FSCONFIG_SET_STRING,
                key.as_ptr(),
                value.as_ptr(),
                0,
            ) == 0
        };
        let configured = set(c"size", &options.size)
            && set(c"nr_inodes", &options.inodes)
            && set(c"mode", c"0700");
        let null = std::ptr::null::<libc::c_char>();
        if !configured
            || libc::syscall(
                libc::SYS_fsconfig,
                fs.as_raw_fd(),
                libc::FSCONFIG_CMD_CREATE,
                null,
                null,
                0,
            ) != 0
        {
            return Err(failed(5));
        }
        let mount = libc::syscall(
            libc::SYS_fsmount,
            fs.as_raw_fd(),
            libc::FSMOUNT_CLOEXEC,
            libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV,
        );
        if mount < 0 {
            return Err(failed(5));
        }
        Ok(OwnedFd::from_raw_fd(mount as RawFd))
    }
}

/// A user namespace in which this process's user is root and a mount namespace it
/// owns, made by a child that hands over descriptors of both and exits.
fn namespaces() -> io::Result<(OwnedFd, OwnedFd)> {
    // SAFETY: getuid(2) and getgid(2) cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let uid_map = format!("0 {uid} 1");
    let gid_map = format!("0 {gid} 1");
    let (parent, child) = UnixStream::pair()?;
    let work = Unshare {
        uid_map: &uid_map,
        gid_map: &gid_map,
        socket: child.as_raw_fd(),
    };
    let pid = spawn(unshare, &work)?;
    drop(child);
    let user = receive_fd(&parent);
    let mount = receive_fd(&parent);
    let user = finish(pid, user)?;
    let mount = mount.ok_or_else(|| io::Error::other(STEPS[3]))?;
    Ok((user, mount))
}

/// What the child that makes the namespaces is given.
struct Unshare<'a> {
    uid_map: &'a str,
    gid_map: &'a str,
    socket: RawFd,
}

/// What a child that makes a tmpfs in the namespaces is given.
struct Enter<'a> {
    user: RawFd,
    mount: RawFd,
    options: &'a Options,
    socket: RawFd,
}

/// The child's stack: it makes system calls only.
const CHILD_STACK: usize = 64 << 10;

/// Starts a child that runs `run(work)` and returns its pid, once it has ended; the
/// child's exit status is what `run` returns (an index of [`STEPS`]).
///
/// It shares this process's memory (`CLONE_VM`) and this thread waits while it runs
/// (`CLONE_VFORK`), as `posix_spawn` does: a `fork` would copy the page tables of the
/// whole process first, which in a host holding large interpreters (a data session,
/// its forks) cost more than the rest of opening a sandbox.
fn spawn<W>(run: fn(&W) -> i32, work: &W) -> io::Result<libc::pid_t> {
    struct Call<'a, W> {
        run: fn(&W) -> i32,
        work: &'a W,
    }
    extern "C" fn child<W>(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the `Call` the parent keeps alive while it waits.
        let call = unsafe { &*(arg as *const Call<'_, W>) };
        let status = (call.run)(call.work);
        // SAFETY: _exit(2) ends this child alone (it is a process of its own, not a
        // thread), without running anything of the parent's.
        unsafe { libc::_exit(status) }
    }
    let call = Call { run, work };
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
    // SAFETY: clone(2) with a stack of our own; the child runs `run`, which makes
    // system calls on memory prepared before it started, and ends with _exit(2), and
    // CLONE_VFORK holds this thread (so `call` and `stack` live) until it has.
    let pid = unsafe {
        libc::clone(
            child::<W>,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &call as *const Call<'_, W> as *mut libc::c_void,
        )
    };
    let error = io::Error::last_os_error();
    // SAFETY: restores the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    drop(stack);
    if pid < 0 {
        return Err(io::Error::other(format!("{}: {error}", STEPS[7])));
    }
    Ok(pid)
}

/// The child that makes the namespaces: unshares, maps its user to root and hands
/// over descriptors of both. System calls only.
fn unshare(work: &Unshare<'_>) -> i32 {
    // SAFETY (the whole function): system calls on NUL-terminated strings and buffers
    // prepared before the child started.
    unsafe {
        if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) != 0 {
            return 1;
        }
        let mapped = write_file(c"/proc/self/setgroups", b"deny")
            && write_file(c"/proc/self/uid_map", work.uid_map.as_bytes())
            && write_file(c"/proc/self/gid_map", work.gid_map.as_bytes());
        if !mapped {
            return 2;
        }
        for namespace in [c"/proc/self/ns/user", c"/proc/self/ns/mnt"] {
            let fd = libc::open(namespace.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            if fd < 0 || !send_fd(work.socket, fd) {
                return 3;
            }
        }
        0
    }
}

/// The child that makes one tmpfs: enters the namespaces, makes it and hands it
/// over. System calls only.
fn enter(work: &Enter<'_>) -> i32 {
    // SAFETY: setns(2) on descriptors the parent holds open while it waits.
    let entered = unsafe {
        libc::setns(work.user, libc::CLONE_NEWUSER) == 0
            && libc::setns(work.mount, libc::CLONE_NEWNS) == 0
    };
    if !entered {
        return 4;
    }
    match make(work.options) {
        // SAFETY: sendmsg(2) on the socket the parent holds open while it waits.
        Ok(fd) => match unsafe { send_fd(work.socket, fd.as_raw_fd()) } {
            true => 0,
            false => 6,
        },
        Err(failure) => failure.step as i32,
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

    /// Writes 100 KiB and then 200 KiB into a 256 KiB tmpfs reached through `fd`:
    /// the second write fails as a full disk does, and fits once the first is gone.
    fn holds_its_size(fd: &OwnedFd) {
        let root = std::path::PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        std::fs::write(root.join("a.bin"), vec![1u8; 100 << 10]).unwrap();
        let full = std::fs::write(root.join("b.bin"), vec![1u8; 200 << 10]).unwrap_err();
        assert_eq!(full.raw_os_error(), Some(libc::ENOSPC), "{full}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&root).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        std::fs::remove_file(root.join("a.bin")).unwrap();
        std::fs::write(root.join("b.bin"), vec![1u8; 200 << 10]).unwrap();
    }

    #[test]
    fn a_workspace_tmpfs_holds_its_size_and_is_on_no_path() {
        if let Err(why) = available() {
            panic!("this machine allows user namespaces or runs as root: {why}");
        }
        let fd = tmpfs(256 << 10).unwrap();
        holds_its_size(&fd);
        // Attached to no tree: the host's mount table does not list it.
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let id = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd()))
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("mnt_id:").map(|v| v.trim().to_string()))
            .unwrap();
        assert!(
            !mounts
                .lines()
                .any(|l| l.split(' ').next() == Some(id.as_str())),
            "mount {id} is in the mount table:\n{mounts}"
        );
    }

    #[test]
    fn a_process_that_may_not_mount_makes_its_tmpfs_in_namespaces_of_its_own() {
        // Root takes this way only where it may not mount; the test takes it always.
        let (user, mount) = namespaces().unwrap();
        let mounter = Mounter::Namespaces { user, mount };
        for _ in 0..3 {
            holds_its_size(&mounter.make(&Options::new(256 << 10)).unwrap());
        }
    }
}
