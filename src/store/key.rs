//! Where the database key comes from. See the module docs of `store`.

use std::fmt;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub use super::secret::{DbKey, KeyError};
use super::secret_service;

/// Which source gave the key; named in errors so that a wrong key can be
/// traced to where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    Credentials(PathBuf),
    SecretService,
    KeyFile(PathBuf),
}

impl fmt::Display for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeySource::Credentials(p) => write!(f, "the systemd credential {}", p.display()),
            KeySource::SecretService => f.write_str("the Secret Service item application=contextd"),
            KeySource::KeyFile(p) => write!(f, "the key file {}", p.display()),
        }
    }
}

fn io(path: &Path, error: std::io::Error) -> KeyError {
    KeyError::Io {
        path: path.display().to_string(),
        error,
    }
}

fn our_uid() -> u32 {
    // SAFETY: getuid(2) has no failure mode and touches no memory.
    unsafe { libc::getuid() }
}

/// Read a key file, refusing one that others can read.
fn read_key_file(path: &Path) -> Result<Option<DbKey>, KeyError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(path, e)),
    };
    let shown = path.display().to_string();
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(KeyError::TooOpen { path: shown, mode });
    }
    if meta.uid() != our_uid() {
        return Err(KeyError::WrongOwner {
            path: shown,
            owner: meta.uid(),
            us: our_uid(),
        });
    }
    let bytes = std::fs::read(path).map_err(|e| io(path, e))?;
    DbKey::parse(&bytes)
        .map(Some)
        .ok_or(KeyError::Malformed { path: shown })
}

/// Create a new key file with O_EXCL, 0600, in a 0700 directory.
fn create_key_file(path: &Path) -> Result<DbKey, KeyError> {
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| io(dir, e))?;
        // create_dir_all leaves an existing directory's mode alone; tighten
        // ours (it holds only our key).
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| io(dir, e))?;
    }
    let key = DbKey::random()?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| io(path, e))?;
    f.write_all(key.hex().as_bytes()).map_err(|e| io(path, e))?;
    f.write_all(b"\n").map_err(|e| io(path, e))?;
    f.sync_all().map_err(|e| io(path, e))?;
    Ok(key)
}

/// Put `key` in the key file at `path` in place of the old one: written
/// beside it (0600), synced, then renamed over it, so that the file holds
/// the old key or the new one, never half of either.
pub(crate) fn replace_key_file(path: &Path, key: &DbKey) -> Result<(), KeyError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".new");
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| io(&tmp, e))?;
    f.write_all(key.hex().as_bytes()).map_err(|e| io(&tmp, e))?;
    f.write_all(b"\n").map_err(|e| io(&tmp, e))?;
    f.sync_all().map_err(|e| io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| io(path, e))?;
    if let Some(dir) = path.parent()
        && let Ok(d) = std::fs::File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Find the key, in order: credentials, Secret Service, key file. A new key
/// is created only when the database does not exist yet.
pub(crate) async fn load(
    state_dir: &Path,
    db_path: &Path,
    session: Option<&zbus::Connection>,
) -> Result<(DbKey, KeySource), KeyError> {
    if let Some(dir) = std::env::var_os("CREDENTIALS_DIRECTORY").filter(|d| !d.is_empty()) {
        let path = PathBuf::from(dir).join("dbkey");
        if path.exists() {
            let bytes = std::fs::read(&path).map_err(|e| io(&path, e))?;
            let key = DbKey::parse(&bytes).ok_or_else(|| KeyError::Malformed {
                path: path.display().to_string(),
            })?;
            return Ok((key, KeySource::Credentials(path)));
        }
    }
    let db_exists = db_path.exists();
    if let Some(conn) = session
        && secret_service::running(conn).await
    {
        match secret_service::get_or_create(conn, !db_exists).await {
            Ok(Some(key)) => return Ok((key, KeySource::SecretService)),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!("the Secret Service did not give a key: {e}; trying the key file");
            }
        }
    }
    let path = state_dir.join("db.key");
    if let Some(key) = read_key_file(&path)? {
        return Ok((key, KeySource::KeyFile(path)));
    }
    if db_exists {
        return Err(KeyError::Missing {
            db: db_path.display().to_string(),
            tried: format!(
                "no $CREDENTIALS_DIRECTORY/dbkey, no Secret Service item, no {}",
                path.display()
            ),
        });
    }
    let key = create_key_file(&path)?;
    tracing::info!(path = %path.display(), "created a new database key");
    Ok((key, KeySource::KeyFile(path)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_raw_and_hex_and_refuses_open_files() {
        assert!(DbKey::parse(&[7u8; 32]).is_some());
        let k = DbKey::random().expect("random");
        assert_eq!(
            DbKey::parse(format!("{}\n", k.hex()).as_bytes()),
            Some(k.clone())
        );
        assert!(DbKey::parse(b"short").is_none());
        assert!(format!("{k:?}").contains(".."));

        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("state/db.key");
        let k1 = create_key_file(&p).expect("create");
        assert_eq!(read_key_file(&p).expect("read"), Some(k1));
        assert!(create_key_file(&p).is_err(), "O_EXCL: never overwrites");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert!(matches!(read_key_file(&p), Err(KeyError::TooOpen { .. })));
    }
}
