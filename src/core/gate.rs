//! The consent gate: `decide(subject, category) -> Allow | Deny | Ask`.
//!
//! Every read of context, every signal carrying context and every MCP
//! resource or tool goes through here. A decision costs no I/O: the policy
//! is held in memory and swapped whole when the file changes.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use tokio::sync::watch;

use super::clock::Clock;
use super::error::Error;
use super::policy::{Policy, PolicyError};
use crate::model::{AppId, Category};

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Allow,
    /// Not allowed; the error explains why and how to grant.
    Deny(Error),
    /// The user has not decided; ask them.
    Ask,
}

impl Decision {
    pub fn is_allow(&self) -> bool {
        matches!(self, Decision::Allow)
    }
}

#[derive(Debug)]
pub struct Gate {
    policy: RwLock<Arc<Policy>>,
    policy_path: PathBuf,
    clock: Arc<dyn Clock>,
    /// Bumped whenever what any app may see could have changed (policy
    /// reloaded, a grant expired), so that publishers re-check live
    /// subscriptions at once.
    generation: watch::Sender<u64>,
}

impl Gate {
    pub fn new(policy_path: PathBuf, clock: Arc<dyn Clock>) -> Self {
        let (generation, _) = watch::channel(0);
        Gate {
            policy: RwLock::new(Arc::new(Policy::default())),
            policy_path,
            clock,
            generation,
        }
    }

    pub fn policy_path(&self) -> &Path {
        &self.policy_path
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    pub fn policy(&self) -> Arc<Policy> {
        self.policy
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Re-read the policy file. On error the previous policy stays.
    pub fn reload(&self) -> Result<(), PolicyError> {
        let p = Policy::load(&self.policy_path)?;
        let changed = {
            let mut cur = self.policy.write().unwrap_or_else(|e| e.into_inner());
            let changed = **cur != p;
            *cur = Arc::new(p);
            changed
        };
        if changed {
            self.bump();
        }
        Ok(())
    }

    /// Tell publishers that decisions may have changed.
    pub fn bump(&self) {
        self.generation.send_modify(|g| *g += 1);
    }

    pub fn watch_generation(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    pub fn decide(&self, app: &AppId, category: &Category) -> Decision {
        let now = self.clock.now();
        if self.policy().allows(app, category, now) {
            return Decision::Allow;
        }
        Decision::Deny(Error::NotAllowed {
            app: app.clone(),
            category: category.clone(),
            hint: self.grant_hint(app, category),
        })
    }

    /// `Ok` when allowed; the typed error otherwise.
    pub fn check(&self, app: &AppId, category: &Category) -> Result<(), Error> {
        match self.decide(app, category) {
            Decision::Allow => Ok(()),
            Decision::Deny(e) => Err(e),
            Decision::Ask => Err(Error::Pending {
                app: app.clone(),
                category: category.clone(),
            }),
        }
    }

    pub fn allows(&self, app: &AppId, category: &Category) -> bool {
        self.decide(app, category).is_allow()
    }

    fn grant_hint(&self, app: &AppId, category: &Category) -> String {
        format!(
            "{} ({}). To allow it, add to {}: [[grant]] app = \"{}\" categories = [\"{}\"]",
            category,
            category.description(),
            self.policy_path.display(),
            app.as_str().replace('\\', "\\\\").replace('"', "\\\""),
            category
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::clock::ManualClock;

    #[test]
    fn deny_names_app_category_and_how_to_grant_and_expiry_uses_the_clock() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("policy.toml");
        let clock = ManualClock::new("2026-01-01T00:00:00Z".parse().expect("date"));
        let gate = Gate::new(path.clone(), clock.clone());
        let app = AppId::new("org.example.App").expect("id");
        let Decision::Deny(e) = gate.decide(&app, &Category::Windows) else {
            panic!("must deny")
        };
        let msg = e.to_string();
        assert!(
            msg.contains("org.example.App")
                && msg.contains("windows")
                && msg.contains("policy.toml"),
            "{msg}"
        );

        std::fs::write(
            &path,
            "[[grant]]\napp = \"org.example.App\"\ncategories = [\"windows\"]\nexpires = \"2026-01-01T00:00:02Z\"\n",
        )
        .expect("write");
        let mut gen_rx = gate.watch_generation();
        gate.reload().expect("reload");
        assert!(gen_rx.has_changed().expect("watch"));
        gen_rx.mark_unchanged();
        assert!(gate.allows(&app, &Category::Windows));
        clock.advance(chrono::Duration::seconds(2));
        assert!(!gate.allows(&app, &Category::Windows));

        // A broken file keeps the last good policy.
        std::fs::write(&path, "[[grant]\n").expect("write");
        assert!(gate.reload().is_err());
        clock.advance(chrono::Duration::seconds(-1));
        assert!(gate.allows(&app, &Category::Windows));
        assert!(!gen_rx.has_changed().expect("watch"));
    }
}
