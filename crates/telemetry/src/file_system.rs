//! Facts about the file system a path lives on: the free space the embedded store's
//! free-disk alarm and the RabbitMQ-named disk metric report.

#![allow(unsafe_code, reason = "statvfs is a libc call")]

use std::path::Path;

/// Bytes an unprivileged process may still write on `dir`'s file system (`statvfs`'s
/// `f_bavail`); `None` when it cannot be read.
pub fn available_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: an all-zero statvfs is a valid value for statvfs to overwrite.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and `stat` is writable.
    let ok = unsafe { libc::statvfs(path.as_ptr(), &mut stat) } == 0;
    ok.then(|| stat.f_bavail * stat.f_frsize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_temporary_directory_has_free_space_and_a_missing_one_has_none() {
        assert!(available_bytes(&std::env::temp_dir()).is_some_and(|b| b > 0));
        assert_eq!(available_bytes(Path::new("/no/such/dir/for/ferry")), None);
    }
}
