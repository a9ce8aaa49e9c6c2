//! CPU time, for the benches that report it per sandbox.
// getrusage(2), sysconf(3).
#![allow(unsafe_code)]
// Each bench that includes this uses what it reports.
#![allow(dead_code)]

use std::time::Duration;

/// CPU time of this process and its reaped children.
pub fn own_cpu() -> Duration {
    let time = |who| {
        // SAFETY: getrusage fills the struct it is given.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(who, &mut usage) };
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
        };
        tv(usage.ru_utime) + tv(usage.ru_stime)
    };
    time(libc::RUSAGE_SELF) + time(libc::RUSAGE_CHILDREN)
}

/// CPU time the whole machine spent busy (every field of `/proc/stat`'s `cpu` line
/// but idle and iowait).
pub fn machine_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let fields: Vec<u64> = stat
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap())
        .collect();
    let busy: u64 = fields
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, v)| v)
        .sum();
    // SAFETY: sysconf with a constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_micros(busy * 1_000_000 / ticks)
}
