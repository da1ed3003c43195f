//! Opening below a directory handle without following any symlink, and the directory operations
//! (mkdir, unlink, rename, remove a tree) done on the handle of the directory that holds the name.
//!
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` where the kernel has
//! it; where it does not (ENOSYS on an old kernel, EPERM from a seccomp filter), a walk from the
//! handle one component at a time with `openat(O_NOFOLLOW)`, which keeps the same rule. Relative
//! paths given here must be plain names (no `.`, `..` or leading `/`): they come from paths
//! already resolved under a root.

use std::{
    ffi::{CStr, CString, OsStr, OsString},
    fs::File,
    io,
    os::{
        fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd},
        unix::ffi::OsStrExt,
    },
    path::{Component, Path},
    sync::atomic::{AtomicBool, Ordering},
};

/// Set once `openat2` turns out to be unavailable: a fact about the kernel (or the sandbox),
/// the same for every handle in the process.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// How a file is opened for writing. Every mode creates the file when it is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// Emptied when it exists (`O_TRUNC`).
    Truncate,
    /// Written at its end (`O_APPEND`).
    Append,
    /// Must not exist yet (`O_EXCL`), created with this mode (before the umask).
    New { mode: u32 },
}

impl Write {
    fn flags(self) -> (libc::c_int, u32) {
        let base = libc::O_WRONLY | libc::O_CREAT | libc::O_NONBLOCK | libc::O_NOCTTY;
        match self {
            Write::Truncate => (base | libc::O_TRUNC, 0o666),
            Write::Append => (base | libc::O_APPEND, 0o666),
            Write::New { mode } => (base | libc::O_EXCL, mode),
        }
    }
}

/// A directory handle (`O_PATH`) that names are opened below, never above, never through a link.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
}

/// Opens a root: the one place a directory is opened by absolute name (it was just resolved).
pub(super) fn open_root(canonical: &Path) -> io::Result<Dir> {
    let name = c_path(canonical.as_os_str())?;
    // SAFETY: `name` is NUL-terminated; the descriptor returned is owned below.
    let fd = unsafe {
        libc::open(
            name.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    Ok(Dir {
        fd: owned(fd as libc::c_long)?,
    })
}

impl Dir {
    /// Opens `rel` below this directory with `open(2)` `flags` (`O_CLOEXEC` is added; `mode` is
    /// used only with `O_CREAT`). A symlink anywhere on the way, the last component included,
    /// fails with `ELOOP`.
    pub fn open(&self, rel: &Path, flags: libc::c_int, mode: u32) -> io::Result<File> {
        let fd = if NO_OPENAT2.load(Ordering::Relaxed) {
            open_walking(self.fd.as_fd(), rel, flags, mode)?
        } else {
            match open_resolving(self.fd.as_fd(), rel, flags, mode) {
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {
                    // EPERM is also what a read-only file gives; only a kernel (or sandbox)
                    // without openat2 gives it for a plain open of this directory.
                    if open_resolving(self.fd.as_fd(), Path::new(""), libc::O_PATH, 0).is_err_and(
                        |e| matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)),
                    ) {
                        NO_OPENAT2.store(true, Ordering::Relaxed);
                        open_walking(self.fd.as_fd(), rel, flags, mode)?
                    } else {
                        return Err(e);
                    }
                }
                other => other?,
            }
        };
        Ok(File::from(fd))
    }

    /// The directory `rel` below this one (`rel` empty: this directory again).
    pub fn open_dir(&self, rel: &Path) -> io::Result<Dir> {
        let file = self.open(rel, libc::O_PATH | libc::O_DIRECTORY, 0)?;
        Ok(Dir {
            fd: OwnedFd::from(file),
        })
    }

    /// A regular file below this one, opened for reading. `O_NONBLOCK`: opening a FIFO must not
    /// wait for a writer; the caller checks what it opened before reading.
    pub fn open_read(&self, rel: &Path) -> io::Result<File> {
        self.open(rel, libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY, 0)
    }

    /// A file below this one, opened (created) for writing as `how` says.
    pub fn open_write(&self, rel: &Path, how: Write) -> io::Result<File> {
        let (flags, mode) = how.flags();
        self.open(rel, flags, mode)
    }

    /// The directory holding `rel`, and `rel`'s last name.
    pub fn parent_of<'a>(&self, rel: &'a Path) -> io::Result<(Dir, &'a OsStr)> {
        let name = match rel.components().next_back() {
            Some(Component::Normal(name)) => name,
            _ => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
        };
        let parent = rel.parent().unwrap_or(Path::new(""));
        Ok((self.open_dir(parent)?, name))
    }

    /// Creates `rel` and every missing directory above it (`mode` before the umask), each made
    /// in, and then opened from, the handle of the one above: never through a link.
    pub fn create_dir_all(&self, rel: &Path, mode: u32) -> io::Result<Dir> {
        let mut current = self.open_dir(Path::new(""))?;
        for part in rel.components() {
            let Component::Normal(name) = part else {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            };
            let name = Path::new(name);
            current = match current.open_dir(name) {
                Ok(dir) => dir,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    match current.mkdir(name.as_os_str(), mode) {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                        Err(e) => return Err(e),
                    }
                    current.open_dir(name)?
                }
                Err(e) => return Err(e),
            };
        }
        Ok(current)
    }

    /// Makes the directory `name` in this one.
    pub fn mkdir(&self, name: &OsStr, mode: u32) -> io::Result<()> {
        let name = c_name(name)?;
        // SAFETY: a live directory descriptor and a NUL-terminated name.
        check(unsafe { libc::mkdirat(self.fd.as_raw_fd(), name.as_ptr(), mode) })
    }

    /// Removes the file or symlink `name` from this directory (never what a link points at).
    pub fn unlink(&self, name: &OsStr) -> io::Result<()> {
        self.unlink_flags(name, 0)
    }

    /// Removes the empty directory `name` from this directory.
    pub fn rmdir(&self, name: &OsStr) -> io::Result<()> {
        self.unlink_flags(name, libc::AT_REMOVEDIR)
    }

    fn unlink_flags(&self, name: &OsStr, flags: libc::c_int) -> io::Result<()> {
        let name = c_name(name)?;
        // SAFETY: a live directory descriptor and a NUL-terminated name.
        check(unsafe { libc::unlinkat(self.fd.as_raw_fd(), name.as_ptr(), flags) })
    }

    /// Renames `name` in this directory to `to_name` in `to` (replacing what is there, a symlink
    /// as a link).
    pub fn rename(&self, name: &OsStr, to: &Dir, to_name: &OsStr) -> io::Result<()> {
        let (from, dest) = (c_name(name)?, c_name(to_name)?);
        // SAFETY: live directory descriptors and NUL-terminated names.
        check(unsafe {
            libc::renameat(
                self.fd.as_raw_fd(),
                from.as_ptr(),
                to.fd.as_raw_fd(),
                dest.as_ptr(),
            )
        })
    }

    /// Makes `to_name` in `to` a hard link to the entry `name` in this directory (a symlink
    /// is linked as a link, never followed).
    pub fn hard_link(&self, name: &OsStr, to: &Dir, to_name: &OsStr) -> io::Result<()> {
        let (from, dest) = (c_name(name)?, c_name(to_name)?);
        // SAFETY: live directory descriptors and NUL-terminated names.
        check(unsafe {
            libc::linkat(
                self.fd.as_raw_fd(),
                from.as_ptr(),
                to.fd.as_raw_fd(),
                dest.as_ptr(),
                0,
            )
        })
    }

    /// Makes `name` in this directory a symlink whose text is `target`.
    pub fn symlink(&self, target: &Path, name: &OsStr) -> io::Result<()> {
        let (target, name) = (c_path(target.as_os_str())?, c_name(name)?);
        // SAFETY: a live directory descriptor and NUL-terminated strings.
        check(unsafe { libc::symlinkat(target.as_ptr(), self.fd.as_raw_fd(), name.as_ptr()) })
    }

    /// What `name` in this directory is, the entry itself (a symlink is not followed).
    pub fn entry_kind(&self, name: &OsStr) -> io::Result<libc::mode_t> {
        let name = c_name(name)?;
        // SAFETY: stat is plain integers; a live descriptor and a NUL-terminated name.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        check(unsafe {
            libc::fstatat(
                self.fd.as_raw_fd(),
                name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        })?;
        Ok(st.st_mode & libc::S_IFMT)
    }

    /// Removes `name` from this directory, and everything below it when it is a directory,
    /// each entry from the handle of the directory that holds it.
    pub fn remove_tree(&self, name: &OsStr) -> io::Result<()> {
        if self.entry_kind(name)? != libc::S_IFDIR {
            return self.unlink(name);
        }
        let listed = self.open(Path::new(name), libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        let child = Dir {
            fd: OwnedFd::from(listed.try_clone()?),
        };
        for entry in list(listed)? {
            child.remove_tree(&entry)?;
        }
        self.rmdir(name)
    }

    /// The bytes free for an unprivileged writer on this directory's filesystem (`fstatvfs`).
    pub fn free_bytes(&self) -> io::Result<u64> {
        // SAFETY: statvfs is plain integers; `fd` is live.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        check(unsafe { libc::fstatvfs(self.fd.as_raw_fd(), &mut st) })?;
        Ok(st.f_bavail.saturating_mul(st.f_frsize))
    }

    /// The names in this directory (without `.` and `..`).
    pub fn names(&self) -> io::Result<Vec<OsString>> {
        list(self.open(Path::new(""), libc::O_RDONLY | libc::O_DIRECTORY, 0)?)
    }
}

/// The entries of an open directory (`O_RDONLY`), read through `fdopendir`.
fn list(dir: File) -> io::Result<Vec<OsString>> {
    let fd = OwnedFd::from(dir);
    // SAFETY: fdopendir takes over the descriptor (closedir closes it), which is released here.
    let stream = unsafe { libc::fdopendir(std::os::fd::IntoRawFd::into_raw_fd(fd)) };
    if stream.is_null() {
        return Err(io::Error::last_os_error());
    }
    let mut names = Vec::new();
    loop {
        // SAFETY: errno is thread-local; `stream` is a live DIR*.
        unsafe { *libc::__errno_location() = 0 };
        let entry = unsafe { libc::readdir(stream) };
        if entry.is_null() {
            let errno = io::Error::last_os_error();
            // SAFETY: the stream was opened above and is closed once.
            unsafe { libc::closedir(stream) };
            return match errno.raw_os_error() {
                Some(0) | None => Ok(names),
                _ => Err(errno),
            };
        }
        // SAFETY: readdir returned a live dirent whose d_name is NUL-terminated.
        let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) };
        let bytes = name.to_bytes();
        if bytes != b"." && bytes != b".." {
            names.push(OsStr::from_bytes(bytes).to_os_string());
        }
    }
}

/// One `openat2` call, refusing links and any step out of `dir`.
fn open_resolving(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: libc::c_int,
    mode: u32,
) -> io::Result<OwnedFd> {
    let name = c_path(relative_or_dot(rel))?;
    // SAFETY: open_how is plain integers, for which zero is a valid value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    if flags & libc::O_CREAT != 0 {
        how.mode = u64::from(mode);
    }
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    loop {
        // SAFETY: `name` is NUL-terminated and `how` is a live open_how of the size passed.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                name.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        match owned(fd) {
            // EAGAIN: a rename raced the lookup; the kernel asks for a retry.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN)) => continue,
            other => return other,
        }
    }
}

/// The same rule without `openat2`: every directory on the way opened with `O_NOFOLLOW` from the
/// one before and checked to be a directory, the last component opened with `O_NOFOLLOW`.
pub(super) fn open_walking(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: libc::c_int,
    mode: u32,
) -> io::Result<OwnedFd> {
    let mut names = Vec::new();
    for part in rel.components() {
        match part {
            Component::Normal(name) => names.push(name),
            // A plain name only: nothing may climb out of `dir`.
            _ => return Err(io::Error::from_raw_os_error(libc::EXDEV)),
        }
    }
    let last = names.pop().unwrap_or(OsStr::new("."));
    let mut current: Option<OwnedFd> = None;
    for name in names {
        let at = current.as_ref().map_or(dir, |fd| fd.as_fd());
        let next = openat(at, name, libc::O_PATH | libc::O_NOFOLLOW, 0)?;
        match kind(&next)? {
            libc::S_IFDIR => {}
            libc::S_IFLNK => return Err(io::Error::from_raw_os_error(libc::ELOOP)),
            _ => return Err(io::Error::from_raw_os_error(libc::ENOTDIR)),
        }
        current = Some(next);
    }
    let at = current.as_ref().map_or(dir, |fd| fd.as_fd());
    if flags & libc::O_PATH == 0 {
        return openat(at, last, flags | libc::O_NOFOLLOW, mode);
    }
    // With O_PATH, O_NOFOLLOW opens a link itself rather than failing: refuse it here, and
    // only then ask whether it is a directory (so a link is refused as a link).
    let fd = openat(
        at,
        last,
        (flags & !libc::O_DIRECTORY) | libc::O_NOFOLLOW,
        mode,
    )?;
    match kind(&fd)? {
        libc::S_IFLNK => Err(io::Error::from_raw_os_error(libc::ELOOP)),
        libc::S_IFDIR => Ok(fd),
        _ if flags & libc::O_DIRECTORY != 0 => Err(io::Error::from_raw_os_error(libc::ENOTDIR)),
        _ => Ok(fd),
    }
}

fn openat(dir: BorrowedFd<'_>, name: &OsStr, flags: libc::c_int, mode: u32) -> io::Result<OwnedFd> {
    let name = c_name(name)?;
    loop {
        // SAFETY: a live directory descriptor and a NUL-terminated name.
        let fd = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                name.as_ptr(),
                flags | libc::O_CLOEXEC,
                mode as libc::c_uint,
            )
        };
        match owned(fd as libc::c_long) {
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            other => return other,
        }
    }
}

/// The file type bits of an open descriptor.
fn kind(fd: &OwnedFd) -> io::Result<libc::mode_t> {
    // SAFETY: stat is plain integers; `fd` is live.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(st.st_mode & libc::S_IFMT)
}

fn relative_or_dot(rel: &Path) -> &OsStr {
    if rel.as_os_str().is_empty() {
        OsStr::new(".")
    } else {
        rel.as_os_str()
    }
}

fn owned(fd: libc::c_long) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel has just returned this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

fn check(ret: libc::c_int) -> io::Result<()> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn c_path(path: &OsStr) -> io::Result<CString> {
    CString::new(path.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// One name inside a directory: no `/`, not `.` or `..`.
fn c_name(name: &OsStr) -> io::Result<CString> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.contains(&b'/') || bytes == b".." {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    c_path(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `check` once through openat2 and once through the O_NOFOLLOW walk.
    fn both_ways(check: impl Fn(&dyn Fn(&Dir, &Path, libc::c_int) -> io::Result<OwnedFd>)) {
        check(&|d, rel, flags| open_resolving(d.fd.as_fd(), rel, flags, 0o600));
        check(&|d, rel, flags| open_walking(d.fd.as_fd(), rel, flags, 0o600));
    }

    #[test]
    fn links_and_climbing_are_refused_both_ways() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir(r.join("sub")).unwrap();
        std::fs::write(r.join("sub/a.txt"), b"inside").unwrap();
        std::fs::write(outside.path().join("secret"), b"outside").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), r.join("to-file")).unwrap();
        std::os::unix::fs::symlink(outside.path(), r.join("to-dir")).unwrap();
        std::os::unix::fs::symlink("sub", r.join("to-sub")).unwrap();
        let dir = open_root(&std::fs::canonicalize(r).unwrap()).unwrap();
        both_ways(|open| {
            let read = |rel: &str| open(&dir, Path::new(rel), libc::O_RDONLY);
            let mut text = String::new();
            std::io::Read::read_to_string(&mut File::from(read("sub/a.txt").unwrap()), &mut text)
                .unwrap();
            assert_eq!(text, "inside");
            assert!(read("").is_ok(), "the directory itself");
            for refused in ["to-file", "to-dir/secret", "to-sub/a.txt"] {
                let e = read(refused).unwrap_err();
                assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{refused}: {e}");
            }
            let e = read("../escape").unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EXDEV), "{e}");
            assert_eq!(
                read("sub/missing").unwrap_err().kind(),
                io::ErrorKind::NotFound
            );
            // A directory handle through a link is refused too (O_PATH opens links otherwise).
            let e = open(&dir, Path::new("to-dir"), libc::O_PATH | libc::O_DIRECTORY).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
            // Creating through a link, at the end or on the way, never creates its target.
            let create = libc::O_WRONLY | libc::O_CREAT;
            for refused in ["to-file", "to-dir/new"] {
                let e = open(&dir, Path::new(refused), create).unwrap_err();
                assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{refused}: {e}");
            }
            assert!(open(&dir, Path::new("sub/new"), create).is_ok());
            std::fs::remove_file(r.join("sub/new")).unwrap();
        });
        assert_eq!(
            std::fs::read(outside.path().join("secret")).unwrap(),
            b"outside"
        );
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
    }

    #[test]
    fn directory_operations_act_on_names_not_on_what_links_point_at() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::write(outside.path().join("keep"), b"x").unwrap();
        std::os::unix::fs::symlink(outside.path(), r.join("out")).unwrap();
        let dir = open_root(&std::fs::canonicalize(r).unwrap()).unwrap();
        let made = dir.create_dir_all(Path::new("a/b/c"), 0o755).unwrap();
        drop(
            made.open_write(Path::new("f"), Write::New { mode: 0o600 })
                .unwrap(),
        );
        assert!(r.join("a/b/c/f").is_file());
        assert_eq!(
            dir.create_dir_all(Path::new("out/x"), 0o755)
                .unwrap_err()
                .raw_os_error(),
            Some(libc::ELOOP)
        );
        // Removing a tree that holds a link removes the link, not what it points at.
        std::os::unix::fs::symlink(outside.path(), r.join("a/b/link")).unwrap();
        dir.remove_tree(OsStr::new("a")).unwrap();
        assert!(!r.join("a").exists());
        dir.remove_tree(OsStr::new("out")).unwrap();
        assert!(outside.path().join("keep").is_file());
        let (parent, name) = dir.parent_of(Path::new("n")).unwrap();
        drop(parent.open_write(Path::new(name), Write::Truncate).unwrap());
        parent.rename(name, &dir, OsStr::new("m")).unwrap();
        assert_eq!(dir.names().unwrap(), vec![OsString::from("m")]);
    }
}
