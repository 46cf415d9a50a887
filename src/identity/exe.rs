//! Rule 4, the executable: `readlink /proc/PID/exe`, the fallback every
//! process has.

use super::procfs::{ProcDir, read_link_at};
use super::{Identity, Result};
use crate::model::{AppId, IdentitySource};

/// What the kernel appends to `/proc/PID/exe` when the file was unlinked
/// (typically: the package was upgraded while the app ran).
const DELETED_MARKER: &[u8] = b" (deleted)";

impl ProcDir {
    /// Step 4: the executable. A name the process has no say in, but only
    /// as good as the file system (see the `identity` module docs).
    pub(super) fn executable_id(&self) -> Result<Identity> {
        let path = self.executable()?;
        let app_id = AppId::from_exe(&path)
            .map_err(|e| self.no_id(format!("executable path {path:?}: {e}")))?;
        Ok(Identity {
            app_id,
            source: IdentitySource::Executable,
            pid: self.pid,
            executable: Some(path.into()),
        })
    }

    /// The path of the executable, as `/proc/PID/exe` says it.
    pub(super) fn executable(&self) -> Result<String> {
        let mut target = read_link_at(&self.dir, c"exe").map_err(|e| self.fail("exe", e))?;
        // A file replaced since the process started (an upgrade) keeps its
        // identity. Claiming a path P this way needs a file "P (deleted)"
        // next to P, i.e. write access to P's directory, which could
        // replace P itself anyway.
        if target.ends_with(DELETED_MARKER) {
            target.truncate(target.len() - DELETED_MARKER.len());
        }
        // Not lossy: two different paths must never share an id.
        String::from_utf8(target).map_err(|_| self.no_id("its executable path is not UTF-8".into()))
    }
}

#[cfg(test)]
mod tests {
    use crate::identity::test_support::{FakeProc, test_process_is_plain, user_unit};
    use crate::identity::{IdentityError, resolve_pid};
    use crate::model::IdentitySource;

    #[test]
    fn resolve_self() {
        if !test_process_is_plain() {
            return;
        }
        let me = resolve_pid(std::process::id()).unwrap();
        let exe = std::env::current_exe().unwrap();
        assert_eq!(me.source, IdentitySource::Executable);
        assert_eq!(me.app_id.as_str(), format!("exe:{}", exe.display()));
        assert_eq!(me.pid, std::process::id());
    }

    #[test]
    fn fake_executable() {
        let proc = FakeProc::new();
        proc.process(
            400,
            "0::/user.slice/user-1000.slice/session-2.scope\n",
            "/usr/bin/foo (deleted)",
        );
        let id = proc.resolve(400).unwrap();
        assert_eq!(id.app_id.as_str(), "exe:/usr/bin/foo");
        assert_eq!(id.source, IdentitySource::Executable);
        assert_eq!(
            id.executable.as_deref(),
            Some(std::path::Path::new("/usr/bin/foo"))
        );

        proc.process(401, &user_unit("app-foo-123.scope"), "/opt/foo/bin/foo");
        assert_eq!(
            proc.resolve(401).unwrap().app_id.as_str(),
            "exe:/opt/foo/bin/foo"
        );

        let long = format!("/{}", "d/".repeat(2000));
        proc.process(402, "0::/\n", &long);
        assert_eq!(
            proc.resolve(402).unwrap().app_id.as_str(),
            format!("exe:{long}")
        );

        proc.process(403, "0::/\n", "/tmp/evil\nexe:/usr/bin/firefox");
        let err = proc.resolve(403).unwrap_err();
        assert!(matches!(err, IdentityError::NoUsableId { .. }), "{err}");
    }
}
