//! TEMPORARY placeholder until the real resolver lands (same API).
use crate::model::{AppId, IdentitySource};

#[derive(Debug, Clone)]
pub struct Identity {
    pub app_id: AppId,
    pub source: IdentitySource,
    pub pid: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("process {0} is gone")]
    Gone(u32),
}

pub fn resolve_pid(pid: u32) -> Result<Identity, IdentityError> {
    let exe =
        std::fs::read_link(format!("/proc/{pid}/exe")).map_err(|_| IdentityError::Gone(pid))?;
    Ok(Identity {
        app_id: AppId::from_exe(&exe.to_string_lossy()).map_err(|_| IdentityError::Gone(pid))?,
        source: IdentitySource::Executable,
        pid,
    })
}

pub fn resolve_pidfd(_fd: std::os::fd::BorrowedFd<'_>) -> Result<Identity, IdentityError> {
    Err(IdentityError::Gone(0))
}
