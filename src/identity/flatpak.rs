//! Rule 1, Flatpak: the app id in `/proc/PID/root/.flatpak-info`, the file
//! Flatpak writes into the sandbox and bind-mounts read-only, read through
//! the process's own root as the portal's `xdp_app_info_from_flatpak` does.

use std::io;
use std::os::unix::ffi::OsStrExt;

use super::procfs::{ProcDir, open_at, read_limited};
use super::{IdentityError, Result, is_valid_app_id};

/// `.flatpak-info` is a few KiB; anything much larger is not one, and we
/// do not want a caller to make us read a file of any size.
const MAX_FLATPAK_INFO: usize = 256 * 1024;

/// `statfs` magic of FUSE, for the portal's toolbox exception.
const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;

impl ProcDir {
    /// Step 1, as the portal's `xdp_app_info_from_flatpak` does it: open
    /// the process's root, then `.flatpak-info` in it.
    pub(super) fn flatpak_id(&self) -> Result<Option<String>> {
        let root = match open_at(&self.dir, c"root", libc::O_DIRECTORY) {
            Ok(root) => root,
            // A root on FUSE (a toolbox container) refuses us even for our
            // own processes. A Flatpak root never is on FUSE, so the portal
            // treats this as "not a Flatpak" and so do we.
            Err(e) if e.raw_os_error() == Some(libc::EACCES) && self.root_is_fuse() => {
                tracing::debug!(pid = self.pid, "root is on FUSE: not a Flatpak");
                return Ok(None);
            }
            // Anything else (notably EACCES for another user's process) is
            // an error: we cannot tell whether the process is sandboxed.
            Err(e) => return Err(self.fail("root", e)),
        };
        let info_path = || self.path.join("root/.flatpak-info");
        // O_NOFOLLOW: a symlink here would be resolved in *our* root, not
        // the process's. O_NONBLOCK: a FIFO must not hang us.
        let file = match open_at(&root, c".flatpak-info", libc::O_NOFOLLOW | libc::O_NONBLOCK) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(IdentityError::Unreadable {
                    path: info_path(),
                    source: e,
                });
            }
        };
        let is_file = file
            .metadata()
            .map_err(|e| IdentityError::Unreadable {
                path: info_path(),
                source: e,
            })?
            .is_file();
        if !is_file {
            return Err(IdentityError::Malformed {
                path: info_path(),
                reason: "not a regular file",
            });
        }
        let contents =
            read_limited(file, MAX_FLATPAK_INFO).map_err(|e| IdentityError::Unreadable {
                path: info_path(),
                source: e,
            })?;
        let contents = String::from_utf8(contents).map_err(|_| IdentityError::Malformed {
            path: info_path(),
            reason: "not UTF-8",
        })?;
        let name = parse_flatpak_info(&contents)
            .ok_or_else(|| self.no_id("its .flatpak-info names no application".into()))?;
        if !is_valid_app_id(&name) {
            return Err(self.no_id(format!(
                "its .flatpak-info names an invalid app id {name:?}"
            )));
        }
        Ok(Some(name))
    }

    fn root_is_fuse(&self) -> bool {
        let Ok(path) = std::ffi::CString::new(self.path.join("root").as_os_str().as_bytes()) else {
            return false;
        };
        let mut buf = std::mem::MaybeUninit::<libc::statfs>::zeroed();
        // SAFETY: `path` is NUL-terminated and `buf` is writable memory of
        // the size statfs(2) fills in.
        if unsafe { libc::statfs(path.as_ptr(), buf.as_mut_ptr()) } != 0 {
            return false;
        }
        // SAFETY: statfs succeeded, so it initialised `buf` (and it was
        // zeroed before, which is a valid `statfs` anyway).
        let st = unsafe { buf.assume_init() };
        // f_type is i64, u32 or c_long depending on the target.
        #[allow(clippy::unnecessary_cast)]
        let magic = st.f_type as i64;
        magic == FUSE_SUPER_MAGIC
    }
}

/// The app id in the contents of a `.flatpak-info` file.
///
/// It is a GKeyFile; the id is `name` in `[Application]`, except that,
/// like the portal, we use `[Runtime]` when that group exists (Flatpak
/// writes it instead of `[Application]` when a runtime itself is run).
/// Keys of other groups (`[Instance]`, `[Context]`, ...) are ignored.
/// Validity of the id is checked by the caller.
pub(crate) fn parse_flatpak_info(contents: &str) -> Option<String> {
    let mut group: Option<&str> = None;
    let mut app_name = None;
    let mut runtime_name = None;
    let mut has_runtime_group = false;
    for line in contents.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(header) = line.strip_prefix('[') {
            group = header.strip_suffix(']');
            has_runtime_group |= group == Some("Runtime");
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if key.trim_end() != "name" {
            continue;
        }
        // GKeyFile: the last of duplicate keys wins.
        match group {
            Some("Application") => app_name = Some(value.trim()),
            Some("Runtime") => runtime_name = Some(value.trim()),
            _ => {}
        }
    }
    let name = if has_runtime_group {
        runtime_name
    } else {
        app_name
    };
    name.filter(|n| !n.is_empty()).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::IdentitySource;
    use crate::identity::test_support::{FakeProc, user_unit};

    const CALCULATOR_INFO: &str = "[Application]\n\
        name=org.gnome.Calculator\n\
        runtime=runtime/org.gnome.Platform/x86_64/46\n\
        \n\
        [Instance]\n\
        instance-id=1843036357\n\
        instance-path=/home/user/.var/app/org.gnome.Calculator\n\
        app-path=/var/lib/flatpak/app/org.gnome.Calculator/x86_64/stable/0a1b2c/files\n\
        app-commit=0a1b2c3d4e5f\n\
        app-extensions=\n\
        runtime-path=/var/lib/flatpak/runtime/org.gnome.Platform/x86_64/46/3d4e5f/files\n\
        runtime-commit=3d4e5f6a7b8c\n\
        runtime-extensions=org.freedesktop.Platform.GL.default=4a5b6c;org.gnome.Platform.Locale=7d8e9f\n\
        branch=stable\n\
        arch=x86_64\n\
        flatpak-version=1.14.6\n\
        session-bus-proxy=true\n\
        system-bus-proxy=true\n\
        devel=false\n\
        \n\
        [Context]\n\
        shared=network;ipc;\n\
        sockets=x11;wayland;pulseaudio;fallback-x11;\n\
        devices=dri;\n\
        \n\
        [Session Bus Policy]\n\
        org.gnome.SearchProvider=own\n";

    #[test]
    fn flatpak_info_real() {
        assert_eq!(
            parse_flatpak_info(CALCULATOR_INFO).as_deref(),
            Some("org.gnome.Calculator")
        );
    }

    #[test]
    fn flatpak_info_variants() {
        assert_eq!(
            parse_flatpak_info("# comment\n  [Application]  \n  name =  org.example.App  \r\n")
                .as_deref(),
            Some("org.example.App")
        );
        assert_eq!(
            parse_flatpak_info(
                "[Runtime]\nname=org.gnome.Platform\nruntime=runtime/org.gnome.Platform/x86_64/46\n"
            )
            .as_deref(),
            Some("org.gnome.Platform")
        );
        // Other groups' `name` keys never count.
        assert_eq!(parse_flatpak_info("[Instance]\nname=org.evil.App\n"), None);
        assert_eq!(
            parse_flatpak_info(
                "[Application]\nruntime=runtime/x/y/z\n[Instance]\nname=org.evil.App\n"
            ),
            None
        );
        assert_eq!(parse_flatpak_info("name=org.evil.App\n"), None);
        assert_eq!(parse_flatpak_info("[Application]\nname=\n"), None);
        assert_eq!(
            parse_flatpak_info("[Application]\nname[de]=org.evil.App\n"),
            None
        );
        assert_eq!(
            parse_flatpak_info("[Application\nname=org.evil.App\n"),
            None
        );
        assert_eq!(parse_flatpak_info(""), None);
        assert_eq!(parse_flatpak_info("\u{0}[]=\n[=\n"), None);
    }

    #[test]
    fn fake_flatpak() {
        let proc = FakeProc::new();
        let dir = proc.process(
            100,
            &user_unit("app-flatpak-org.gnome.Calculator-1843036357.scope"),
            "/app/bin/gnome-calculator",
        );
        std::fs::write(dir.join("root/.flatpak-info"), CALCULATOR_INFO).unwrap();
        let id = proc.resolve(100).unwrap();
        assert_eq!(id.app_id.as_str(), "org.gnome.Calculator");
        assert_eq!(id.source, IdentitySource::Flatpak);
        assert_eq!(id.pid, 100);
    }

    #[test]
    fn fake_flatpak_without_usable_name_is_an_error() {
        let proc = FakeProc::new();
        let dir = proc.process(
            102,
            &user_unit("app-gnome-org.gnome.Terminal-1.scope"),
            "/usr/bin/bash",
        );
        std::fs::write(
            dir.join("root/.flatpak-info"),
            "[Instance]\nname=org.evil.App\n",
        )
        .unwrap();
        let err = proc.resolve(102).unwrap_err();
        assert!(
            matches!(err, IdentityError::NoUsableId { pid: 102, .. }),
            "{err}"
        );

        std::fs::write(dir.join("root/.flatpak-info"), "[Application]\nname=evil\n").unwrap();
        let err = proc.resolve(102).unwrap_err();
        assert!(
            matches!(err, IdentityError::NoUsableId { pid: 102, .. }),
            "{err}"
        );

        std::fs::write(
            dir.join("root/.flatpak-info"),
            b"[Application]\nname=org.x.\xff\n",
        )
        .unwrap();
        let err = proc.resolve(102).unwrap_err();
        assert!(matches!(err, IdentityError::Malformed { .. }), "{err}");
    }

    #[test]
    fn fake_flatpak_info_symlink_dir_or_fifo_is_an_error() {
        let proc = FakeProc::new();
        let dir = proc.process(103, "0::/\n", "/usr/bin/true");
        let info = dir.join("root/.flatpak-info");
        let elsewhere = proc.dir.path().join("elsewhere");
        std::fs::write(&elsewhere, CALCULATOR_INFO).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &info).unwrap();
        let err = proc.resolve(103).unwrap_err();
        assert!(matches!(err, IdentityError::Unreadable { .. }), "{err}");

        std::fs::remove_file(&info).unwrap();
        std::fs::create_dir(&info).unwrap();
        let err = proc.resolve(103).unwrap_err();
        assert!(matches!(err, IdentityError::Malformed { .. }), "{err}");

        std::fs::remove_dir(&info).unwrap();
        let c_info = std::ffi::CString::new(info.as_os_str().as_bytes()).unwrap();
        // SAFETY: NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_info.as_ptr(), 0o600) }, 0);
        let err = proc.resolve(103).unwrap_err();
        assert!(matches!(err, IdentityError::Malformed { .. }), "{err}");
    }

    #[test]
    fn fake_flatpak_info_too_large() {
        let proc = FakeProc::new();
        let dir = proc.process(104, "0::/\n", "/usr/bin/true");
        let big = format!(
            "[Application]\nname=org.x.Y\n#{}\n",
            "x".repeat(MAX_FLATPAK_INFO)
        );
        std::fs::write(dir.join("root/.flatpak-info"), big).unwrap();
        let err = proc.resolve(104).unwrap_err();
        assert!(matches!(err, IdentityError::Unreadable { .. }), "{err}");
    }
}
