//! The user's files, followed while the daemon runs: `policy.toml`
//! reloaded into the gate, and the never-share rules of `config.toml`
//! and `privacy.toml` put in force, at start and whenever one changes.
//!
//! Why here: what the files say is config's to read; what it means
//! (the grants, what nobody shares) is the core's, which these functions
//! hand it. The daemon only wires them (issue 50: `daemon.rs` only
//! wires).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use inotify::{Inotify, WatchMask};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{ConfigFile, Paths, PrivacyFile};
use crate::core::SourceEvent;
use crate::core::gate::Gate;
use crate::core::manage::Manage;

/// Load policy.toml and report its health as the `policy` source
/// (`Gate::reload_reported`).
pub(crate) async fn load_policy(gate: &Gate, tx: &mpsc::Sender<SourceEvent>) {
    let _ = tx.send(gate.reload_reported()).await;
}

/// Watch the config directory for [`follow`] (made before it runs, so
/// that no change after the start is missed); `None`, said in the log,
/// when it cannot be watched.
pub(crate) fn watch_dir(dir: &Path) -> Option<Inotify> {
    let setup = || -> std::io::Result<Inotify> {
        std::fs::create_dir_all(dir)?;
        let ino = Inotify::init()?;
        ino.watches().add(
            dir,
            WatchMask::CLOSE_WRITE
                | WatchMask::MOVED_TO
                | WatchMask::MOVED_FROM
                | WatchMask::CREATE
                | WatchMask::DELETE,
        )?;
        Ok(ino)
    };
    match setup() {
        Ok(i) => Some(i),
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot watch the config directory; policy.toml changes need a restart");
            None
        }
    }
}

/// Put the never-share rules in force: `[privacy]` of `config.toml`
/// (`file`, or read again when `None`: it changed), the deprecated
/// `[history]` exclude lists merged in (said once in the log), and
/// `privacy.toml`, which `contextctl privacy` edits. A file that cannot
/// be read keeps the rules it gave before: a typo never shares more.
pub(crate) fn load_privacy(manage: &Manage, paths: &Paths, file: Option<&ConfigFile>) {
    let reread;
    let (config_rules, old_keys) = match file {
        Some(f) => f.privacy_rules(),
        None => match ConfigFile::load(&paths.config_file()) {
            Ok(f) => {
                reread = f;
                reread.privacy_rules()
            }
            Err(e) => {
                tracing::warn!(error = %e, "config.toml changed but cannot be read; the never-share rules stay as they were");
                return;
            }
        },
    };
    if !old_keys.is_empty() && file.is_some() {
        tracing::warn!(
            keys = ?old_keys,
            "deprecated: {} now hold back from every reader, not only the timeline; use [privacy] apps and titles (or contextctl privacy add) instead",
            old_keys.join(" and ")
        );
    }
    let extra = match PrivacyFile::load(&paths.privacy_file()) {
        Ok(f) => f.privacy,
        Err(e) => {
            tracing::warn!(error = %e, "privacy.toml cannot be read; the never-share rules stay as they were");
            if file.is_none() {
                return;
            }
            manage.privacy_rules()
        }
    };
    if manage.set_privacy(config_rules.merged(&extra)) {
        tracing::info!("never-share rules in force");
    }
}

/// Reload the policy when its file changes, and the never-share rules
/// when `config.toml` or `privacy.toml` does, until `cancel`. `inotify`
/// from [`watch_dir`]; without it (or once it fails) nothing is followed
/// until a restart.
pub(crate) async fn follow(
    (gate, manage): (Arc<Gate>, Manage),
    tx: mpsc::Sender<SourceEvent>,
    inotify: Option<Inotify>,
    paths: Paths,
    cancel: CancellationToken,
) {
    let file_name = gate
        .policy_path()
        .file_name()
        .map(PathBuf::from)
        .unwrap_or_default();
    let Some(mut stream) = inotify.and_then(|i| i.into_event_stream(vec![0u8; 4096]).ok()) else {
        return;
    };
    loop {
        let ev = tokio::select! {
            _ = cancel.cancelled() => break,
            ev = stream.next() => ev,
        };
        match ev {
            Some(Ok(ev)) if ev.name.as_deref().map(PathBuf::from) == Some(file_name.clone()) => {
                // Editors write in several steps; let them finish.
                tokio::time::sleep(Duration::from_millis(30)).await;
                load_policy(&gate, &tx).await;
            }
            Some(Ok(ev))
                if ev
                    .name
                    .as_deref()
                    .is_some_and(|n| n == "privacy.toml" || n == "config.toml") =>
            {
                tokio::time::sleep(Duration::from_millis(30)).await;
                load_privacy(&manage, &paths, None);
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                tracing::warn!(error = %e, "inotify failed; policy.toml changes need a restart");
                break;
            }
            None => break,
        }
    }
}
