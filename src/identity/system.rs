//! Which program files are the system's: installed by the package manager
//! in the system's directories, and writable by nobody but root.
//!
//! Two decisions rest on it: an `exe:` id gets a desktop entry's name and
//! icon only when its file is the system's (a copy of `gdbus` called
//! `chromium` in a directory of its own must not be announced as
//! "Chromium Web Browser"), and an interpreter given by its name in
//! `[identity] interpreters` (`node`, `python3*`) is recognised only there.
//!
//! What it proves: the file at that path was put there by root (the
//! package manager) and the user cannot replace it. What it does not: that
//! the process running it was not started with `LD_PRELOAD` or is not being
//! ptraced by other code of the same user (see the README's threat model).

use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path};

/// The system's directories for programs. `/usr/lib*` is every directory
/// of `/usr` whose name starts with `lib` (`lib`, `lib64`, `libexec`, …).
/// `/bin` and `/sbin` are symlinks into `/usr` on merged-`/usr` systems,
/// where the kernel reports the `/usr` path anyway.
const SYSTEM_DIRS: &[&str] = &[
    "/usr/bin",
    "/usr/sbin",
    "/usr/games",
    "/usr/local/bin",
    "/bin",
    "/sbin",
];

/// Whether `path` (absolute, as the kernel gives it for `/proc/PID/exe`:
/// no symlink, `.` or `..` in it) is a system program: below one of the
/// system's directories, a regular file, and it and every directory above
/// it owned by root and writable by neither group nor others.
///
/// When contextd itself runs as root, root is the user, and such a file is
/// "the user's" as much as "the system's"; the directory rule still holds.
pub fn is_system_executable(path: &Path) -> bool {
    is_system_path(path) && root_owned_all_the_way(path)
}

/// The lexical half of [`is_system_executable`]: where the file is.
pub(crate) fn is_system_path(path: &Path) -> bool {
    let mut components = path.components();
    if components.next() != Some(Component::RootDir) {
        return false;
    }
    let rest: Vec<&str> = match components
        .map(|c| match c {
            Component::Normal(n) => n.to_str(),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
    {
        Some(r) => r,
        None => return false,
    };
    // A file below the directory, not the directory itself.
    let under = |dir: &str| {
        let parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
        rest.len() > parts.len() && rest.iter().zip(&parts).all(|(a, b)| a == b)
    };
    if SYSTEM_DIRS.iter().any(|d| under(d)) {
        return true;
    }
    matches!(rest.as_slice(), ["usr", lib, _, ..] if lib.starts_with("lib"))
}

fn root_owned_all_the_way(path: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return false;
    };
    if !meta.is_file() || !trusted(&meta) {
        return false;
    }
    path.ancestors()
        .skip(1)
        .all(|dir| std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir() && trusted(&m)))
}

/// Whether `dir` (absolute) and every directory above it are owned by root
/// and writable by neither group nor others (symlinks followed): a place
/// whose files only root can have put there, as a D-Bus service directory
/// that decides which program is trusted (`dbus::portal`).
pub(crate) fn is_system_dir(dir: &Path) -> bool {
    dir.is_absolute()
        && dir
            .ancestors()
            .all(|d| std::fs::metadata(d).is_ok_and(|m| m.is_dir() && trusted(&m)))
}

/// Owned by root, and neither its group nor others may write it.
fn trusted(meta: &std::fs::Metadata) -> bool {
    meta.uid() == 0 && meta.mode() & 0o022 == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory a user could write (or one above it) is no system
    /// directory; the system's own is.
    #[test]
    fn a_system_dir_is_roots_all_the_way_up() {
        assert!(is_system_dir(Path::new("/usr/share")));
        assert!(!is_system_dir(Path::new("usr/share")));
        let tmp = tempfile::tempdir().expect("tmp");
        let mine = tmp.path().join("dbus-1/services");
        std::fs::create_dir_all(&mine).expect("mkdir");
        assert!(!is_system_dir(&mine));
        assert!(!is_system_dir(Path::new("/nonexistent/dbus-1/services")));
    }

    #[test]
    fn system_paths() {
        for ok in [
            "/usr/bin/node",
            "/usr/bin/python3.11",
            "/usr/sbin/x",
            "/usr/libexec/gnome-shell-portal-helper",
            "/usr/lib/x86_64-linux-gnu/libexec/kf5/x",
            "/usr/lib64/firefox/firefox",
            "/usr/games/sl",
            "/usr/local/bin/tool",
            "/bin/true",
        ] {
            assert!(is_system_path(Path::new(ok)), "{ok}");
        }
        for bad in [
            "/usr/bin",
            "/usr/lib",
            "/tmp/chromium",
            "/home/u/.local/bin/chromium",
            "/opt/google/chrome/chrome",
            "/usr/local/lib/x",
            "/usr/bin/../../tmp/x",
            "usr/bin/x",
            "/usr/binx/y",
            "/usr/share/x",
        ] {
            assert!(!is_system_path(Path::new(bad)), "{bad}");
        }
    }

    #[test]
    fn a_copy_elsewhere_is_not_the_system_s() {
        // Debian's own programs are; a copy of one in a directory of our
        // own is not, whatever its name.
        let Some(real) = ["/usr/bin/true", "/bin/true"]
            .into_iter()
            .map(Path::new)
            .find(|p| p.exists())
            .and_then(|p| std::fs::canonicalize(p).ok())
        else {
            return;
        };
        assert!(is_system_executable(&real), "{}", real.display());
        let dir = tempfile::tempdir().expect("tempdir");
        let copy = dir.path().join("chromium");
        std::fs::copy(&real, &copy).expect("copy");
        assert!(!is_system_executable(&copy));
        assert!(!is_system_executable(Path::new("/usr/bin/no-such-program")));
    }
}
