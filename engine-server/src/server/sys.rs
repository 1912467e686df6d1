//! The two process-level settings the server needs from the OS: the open-file limit and giving
//! freed heap back after a connection flood.

/// The soft limit SGLang's `set_ulimit` asks for (`resource.setrlimit(RLIMIT_NOFILE, ...)`).
const NOFILE_TARGET: u64 = 65_535;

/// Raises the soft open-file limit to `min(hard, 65535)`, as SGLang does at start: every
/// connection is a descriptor, and the common default soft limit (1,024) would make `accept`
/// fail long before the connection cap answers 503. Returns the soft limit in force afterwards
/// (`None` where it cannot be read).
#[allow(clippy::unnecessary_cast)] // `rlim_t` is 32 bits wide on 32-bit targets
pub fn raise_nofile_limit() -> Option<u64> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    let before = lim.rlim_cur as u64;
    let target = (lim.rlim_max as u64).min(NOFILE_TARGET);
    if before >= target {
        tracing::debug!("open-file limit {before} (hard {}); left as it is", lim.rlim_max);
        return Some(before);
    }
    let new = libc::rlimit { rlim_cur: target as libc::rlim_t, rlim_max: lim.rlim_max };
    // SAFETY: setrlimit reads the struct we own; lowering or raising the soft limit up to the hard
    // one needs no privilege.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) } != 0 {
        tracing::warn!("cannot raise the open-file limit from {before} to {target}: {}", std::io::Error::last_os_error());
        return Some(before);
    }
    tracing::info!("open-file limit raised from {before} to {target}");
    Some(target)
}

/// Hands the heap's free pages back to the OS. glibc keeps freed memory in its per-thread arenas:
/// after tens of thousands of connections (each with its read and write buffers) have come and
/// gone, the resident size otherwise stays at the flood's peak. Other allocators: nothing to do.
pub fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory; it is thread-safe in glibc.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Resident set size of this process in bytes (Linux; `None` elsewhere).
pub fn rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb = s.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.split_whitespace().next()?.parse::<u64>().ok()?;
    Some(kb * 1024)
}
