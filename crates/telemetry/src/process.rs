//! The running process's own resources, read from `/proc` and libc: resident memory, open
//! file descriptors and their limit, the memory the machine (or the cgroup the process runs
//! in) has, and raising the descriptor limit at start so many connections fit.

#![allow(
    unsafe_code,
    reason = "sysconf, getrlimit and setrlimit are libc calls"
)]

use tracing::{info, warn};

/// Resident memory (`/proc/self/statm`'s second field, in pages).
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf reads a constant of the running system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

/// File descriptors open now (the entries of `/proc/self/fd`).
pub fn open_fds() -> Option<u64> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count() as u64)
}

/// Sockets open now (the entries of `/proc/self/fd` that link to `socket:[…]`): listeners,
/// client connections and connections to other brokers.
pub fn open_sockets() -> Option<u64> {
    let entries = std::fs::read_dir("/proc/self/fd").ok()?;
    let sockets = entries
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter(|target| {
            target
                .as_os_str()
                .as_encoded_bytes()
                .starts_with(b"socket:")
        })
        .count();
    Some(sockets as u64)
}

/// The soft limit on open file descriptors.
pub fn max_fds() -> Option<u64> {
    fd_limit().map(|l| l.rlim_cur)
}

fn fd_limit() -> Option<libc::rlimit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    ok.then_some(limit)
}

/// Raises the soft limit on open file descriptors to the hard limit, as servers that hold
/// many connections do (the shell's default soft limit, often 1024, would refuse the
/// 1025th client); returns the limit in force afterwards.
pub fn raise_fd_limit() -> Option<u64> {
    let mut limit = fd_limit()?;
    if limit.rlim_cur >= limit.rlim_max {
        return Some(limit.rlim_cur);
    }
    let before = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    // SAFETY: setrlimit reads the struct it is given.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } == 0 {
        info!(
            from = before,
            to = limit.rlim_max,
            "raised the open file limit"
        );
        Some(limit.rlim_max)
    } else {
        warn!(limit = before, error = %std::io::Error::last_os_error(), "cannot raise the open file limit");
        Some(before)
    }
}

/// The memory this process may use: the cgroup's limit (`memory.max` of cgroup v2) when it
/// has one below the machine's memory, else the machine's (`MemTotal` of `/proc/meminfo`).
pub fn available_memory_bytes() -> Option<u64> {
    let machine = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| mem_total(&m));
    let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|m| m.trim().parse::<u64>().ok());
    match (machine, cgroup) {
        (Some(m), Some(c)) => Some(m.min(c)),
        (m, c) => m.or(c),
    }
}

/// `MemTotal` of a `/proc/meminfo` text, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_measurable() {
        assert!(resident_bytes().is_some_and(|b| b > 0));
        assert!(open_fds().is_some_and(|n| n >= 3));
        assert!(max_fds().is_some_and(|n| n > 0));
        assert!(available_memory_bytes().is_some_and(|b| b > resident_bytes().unwrap()));
    }

    #[test]
    fn a_listening_socket_is_counted() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(open_sockets().is_some_and(|n| n >= 1));
        drop(listener);
    }

    #[test]
    fn mem_total_is_read_in_bytes() {
        let meminfo = "MemTotal:       24596352 kB\nMemFree:         1000 kB\n";
        assert_eq!(mem_total(meminfo), Some(24_596_352 * 1024));
        assert_eq!(mem_total("MemFree: 1 kB\n"), None);
    }

    #[test]
    fn the_fd_limit_is_raised_to_the_hard_limit() {
        let raised = raise_fd_limit().unwrap();
        assert_eq!(Some(raised), fd_limit().map(|l| l.rlim_max));
    }
}
