//! Facts about the file system a path lives on: the free space the embedded store's
//! free-disk alarm and the RabbitMQ-named disk metric report.

#![allow(unsafe_code, reason = "statvfs is a libc call")]

use std::path::Path;

/// Bytes an unprivileged process may still write on `dir`'s file system (`statvfs`'s
/// `f_bavail`); `None` when it cannot be read.
pub fn available_bytes(dir: &Path) -> Option<u64> {
    space(dir).map(|s| s.available)
}

/// The size of a file system and what is left of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space {
    /// Its size in bytes (`f_blocks`).
    pub total: u64,
    /// Bytes an unprivileged process may still write (`f_bavail`).
    pub available: u64,
}

/// The size and free space of `dir`'s file system (`statvfs`); `None` when it cannot be
/// read.
pub fn space(dir: &Path) -> Option<Space> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: an all-zero statvfs is a valid value for statvfs to overwrite.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and `stat` is writable.
    let ok = unsafe { libc::statvfs(path.as_ptr(), &mut stat) } == 0;
    #[allow(
        clippy::useless_conversion,
        reason = "the fields' widths differ by platform"
    )]
    let frsize = u64::from(stat.f_frsize);
    #[allow(
        clippy::useless_conversion,
        reason = "the fields' widths differ by platform"
    )]
    let (blocks, bavail) = (u64::from(stat.f_blocks), u64::from(stat.f_bavail));
    ok.then(|| Space {
        total: blocks.saturating_mul(frsize),
        available: bavail.saturating_mul(frsize),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_temporary_directory_has_free_space_and_a_missing_one_has_none() {
        assert!(available_bytes(&std::env::temp_dir()).is_some_and(|b| b > 0));
        assert_eq!(available_bytes(Path::new("/no/such/dir/for/ferry")), None);
        let space = space(&std::env::temp_dir()).unwrap();
        assert!(
            space.total >= space.available && space.total > 0,
            "{space:?}"
        );
    }
}
