//! Keeping a worker to one core (`sched_setaffinity(2)`).
#![allow(unsafe_code)] // the CPU sets of sched_getaffinity(2) and sched_setaffinity(2)

/// The core for the worker in `slot`: the slot-th, in turn, of those this process
/// may use; `None` if they cannot be read.
pub(super) fn cpu_for(slot: usize) -> Option<usize> {
    // SAFETY: a zeroed cpu_set_t is an empty set; the call fills at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let read =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if read != 0 {
        return None;
    }
    // SAFETY: CPU_ISSET reads the set within its size.
    let allowed: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect();
    if allowed.is_empty() {
        return None;
    }
    Some(allowed[slot % allowed.len()])
}

/// Keeps the calling thread, and every thread it starts from now on, to `cpu`.
/// A core that cannot be had (a cgroup took it away since) leaves things as they were.
pub(super) fn keep_to(cpu: usize) {
    if cpu >= libc::CPU_SETSIZE as usize {
        return;
    }
    // SAFETY: as above; CPU_SET writes within the set's size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}
