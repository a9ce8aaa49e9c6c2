//! `SCM_RIGHTS`: descriptors sent beside the bytes of a Unix stream. Its own room
//! because it is the wire format's only unsafe code, kept to the two system calls.
#![allow(unsafe_code)] // sendmsg(2) and recvmsg(2) with control messages

use std::io::{self, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

/// Room for the control messages of a few descriptors, aligned as `cmsghdr` is.
const SPACE: usize = 64;

#[repr(C, align(8))]
struct Control([u8; SPACE]);

/// Sends some of `bytes` (returns how many), never raising `SIGPIPE`: a worker
/// that went away is an error here, not the end of the application.
pub(super) fn send(stream: &UnixStream, bytes: &[u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `bytes` is a live buffer of its own length.
        let sent = unsafe {
            libc::send(
                stream.as_raw_fd(),
                bytes.as_ptr().cast(),
                bytes.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if sent >= 0 {
            return Ok(sent as usize);
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// Sends `bytes` (some of them: returns how many) with `fd` attached.
pub(super) fn send_with(
    stream: &UnixStream,
    bytes: &[u8],
    fd: BorrowedFd<'_>,
) -> io::Result<usize> {
    let mut control = Control([0; SPACE]);
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: a zeroed msghdr is valid; every pointer set below points into
    // buffers that live across the call, with their true lengths.
    let sent = unsafe {
        let mut header: libc::msghdr = std::mem::zeroed();
        header.msg_iov = &mut iov;
        header.msg_iovlen = 1;
        header.msg_control = control.0.as_mut_ptr().cast();
        header.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&header);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd.as_raw_fd());
        libc::sendmsg(stream.as_raw_fd(), &header, libc::MSG_NOSIGNAL)
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sent as usize)
}

/// Reads some bytes into `buf`, and keeps the descriptors that came with them.
pub(super) fn receive(
    stream: &UnixStream,
    buf: &mut [u8],
    fds: &mut std::collections::VecDeque<OwnedFd>,
) -> io::Result<usize> {
    let mut control = Control([0; SPACE]);
    let mut iov = [IoSliceMut::new(buf)];
    loop {
        // SAFETY: as in `send_with`; the kernel writes at most `msg_controllen`
        // bytes of control messages, each descriptor in them new to this process
        // and owned here from now on.
        let (read, header) = unsafe {
            let mut header: libc::msghdr = std::mem::zeroed();
            header.msg_iov = iov.as_mut_ptr().cast();
            header.msg_iovlen = 1;
            header.msg_control = control.0.as_mut_ptr().cast();
            header.msg_controllen = SPACE as _;
            let read = libc::recvmsg(stream.as_raw_fd(), &mut header, libc::MSG_CMSG_CLOEXEC);
            (read, header)
        };
        if read < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        // SAFETY: walks the control messages the kernel wrote into `control`,
        // within the length it reported.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&header);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                    let count = ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize)
                        / std::mem::size_of::<RawFd>();
                    for i in 0..count {
                        fds.push_back(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&header, cmsg);
            }
        }
        if header.msg_flags & libc::MSG_CTRUNC != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "more descriptors came than there was room for",
            ));
        }
        return Ok(read as usize);
    }
}
