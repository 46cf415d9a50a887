//! `contextctl privacy`: the user's never-share rules, kept in
//! `privacy.toml` beside `config.toml`. A file the user owns, edited
//! whole and renamed into place; the daemon watches the directory and
//! puts the rules in force at once (`config::follow::load_privacy`). Needs no
//! daemon and no bus: what is never shared is the user's to say even
//! while contextd is not running.

use crate::cli::{PrivacyCommand, RuleKind};
use crate::config::{ConfigFile, Paths, PrivacyFile};
use crate::model::privacy::{PrivacySettings, SENSITIVE_APPS};

/// Run `contextctl privacy COMMAND`: what it printed, or why it failed.
pub fn command(command: PrivacyCommand, json: bool) -> Result<String, String> {
    let paths = Paths::from_env().map_err(|e| e.to_string())?;
    let path = paths.privacy_file();
    let mut file = PrivacyFile::load(&path).map_err(|e| e.to_string())?;
    let (what, pattern, add) = match command {
        PrivacyCommand::List => return list(&paths, &file.privacy, json),
        PrivacyCommand::Add { what, pattern } => (what, pattern, true),
        PrivacyCommand::Remove { what, pattern } => (what, pattern, false),
    };
    let pattern = pattern.trim().to_owned();
    if pattern.is_empty() || pattern.chars().any(char::is_control) {
        return Err("a pattern is one line of text, not empty".into());
    }
    let (list, name) = match what {
        RuleKind::App => (&mut file.privacy.apps, "app"),
        RuleKind::Title => (&mut file.privacy.titles, "title"),
    };
    let at = list.iter().position(|p| p.eq_ignore_ascii_case(&pattern));
    let said = match (add, at) {
        (true, Some(_)) => return Ok(format!("Already never shared: {name} {pattern}")),
        (true, None) => {
            list.push(pattern.clone());
            format!("Never shared from now on: {name} {pattern}")
        }
        (false, Some(i)) => {
            list.remove(i);
            format!(
                "Removed: {name} {pattern} (a title it hid shows again when its window next changes it)"
            )
        }
        (false, None) => {
            let in_config = ConfigFile::load(&paths.config_file())
                .map(|c| c.privacy_rules().0)
                .unwrap_or_default();
            let there = match what {
                RuleKind::App => &in_config.apps,
                RuleKind::Title => &in_config.titles,
            };
            return Err(if there.iter().any(|p| p.eq_ignore_ascii_case(&pattern)) {
                format!(
                    "{name} {pattern} is in {}; remove it there",
                    paths.config_file().display()
                )
            } else {
                format!("no rule {name} {pattern}")
            });
        }
    };
    file.save(&path).map_err(|e| e.to_string())?;
    Ok(said)
}

fn list(paths: &Paths, mine: &PrivacySettings, json: bool) -> Result<String, String> {
    let config = ConfigFile::load(&paths.config_file())
        .map_err(|e| e.to_string())?
        .privacy_rules()
        .0;
    if json {
        return Ok(serde_json::json!({
            "built_in": {
                "apps": SENSITIVE_APPS,
                "private_windows": "title markers and app ids of private browser windows (README: What is never shared)",
                "codes": "one-time codes, verification codes, PINs and card numbers in notifications",
            },
            "config": config,
            "privacy_toml": mine,
        })
        .to_string());
    }
    let mut out = String::from(
        "Built in: private and incognito browser windows, one-time codes and card numbers in notifications, and these apps:\n",
    );
    out.push_str(&format!("  {}\n", SENSITIVE_APPS.join(", ")));
    for (label, rules) in [
        (format!("{}", paths.config_file().display()), &config),
        (format!("{}", paths.privacy_file().display()), mine),
    ] {
        out.push_str(&format!("\nYour rules in {label}:\n"));
        if rules.apps.is_empty() && rules.titles.is_empty() {
            out.push_str("  none\n");
        }
        for a in &rules.apps {
            out.push_str(&format!("  app   {}\n", super::ctl::printable(a)));
        }
        for t in &rules.titles {
            out.push_str(&format!("  title {}\n", super::ctl::printable(t)));
        }
    }
    Ok(out)
}
