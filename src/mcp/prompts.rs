//! Prompts, and `completion/complete` for their arguments and for the
//! window template.

use rmcp::model::{CompleteRequestParams, CompleteResult, GetPromptResult, Reference};
use serde_json::{Map, Value, json};

use super::Broker;
use super::consent::{Mode, Subject};
use super::error::{Error, wire};
use super::output;
use super::render::{data, is_plain, json_line, seal};
use super::resources::{self, Res};
use crate::core::read;

const DETAILS: [&str; 2] = ["brief", "full"];
const PERIODS: [&str; 2] = ["24h", "7d"];

/// The prompts, as `prompts/list` shows them.
pub(crate) fn catalog() -> Vec<Value> {
    let mut v = vec![
        json!({
            "name": "what_am_i_doing",
            "title": "What am I doing?",
            "description": "A prompt built from what the user allowed this host to see right now (focused window, open windows, media, session, and what apps publish: the open document, the current task, the selection, an event), asking the model to describe the user's current activity.",
            "arguments": [{
                "name": "detail",
                "title": "Detail",
                "description": "brief (default): a summary; full: also the complete JSON snapshot",
                "required": false
            }]
        }),
        json!({
            "name": "privacy_report",
            "title": "Privacy report",
            "description": "Which apps used the microphone, camera or screen recently (needs media.capture; 7d, and the timeline for 24h, need history), as a prompt asking the model to explain it to the user.",
            "arguments": [{
                "name": "period",
                "title": "Period",
                "description": "How far back: 24h (the default) or 7d",
                "required": false
            }]
        }),
    ];
    #[cfg(feature = "conformance")]
    if super::fixtures_on() {
        v.extend(super::conformance::prompts());
    }
    v.shrink_to_fit();
    v
}

#[cfg(test)]
pub(crate) fn prompts() -> Result<Vec<rmcp::model::Prompt>, Error> {
    catalog().into_iter().map(wire).collect()
}

fn arg<'a>(args: &'a Option<Map<String, Value>>, k: &str) -> Result<Option<&'a str>, Error> {
    match args.as_ref().and_then(|a| a.get(k)) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(Error::InvalidParams(format!(
            "argument '{k}' must be a string"
        ))),
    }
}

fn check_args(args: &Option<Map<String, Value>>, allowed: &[&str]) -> Result<(), Error> {
    if let Some(k) = args
        .iter()
        .flat_map(|a| a.keys())
        .find(|k| !allowed.contains(&k.as_str()))
    {
        return Err(Error::InvalidParams(format!(
            "unknown argument '{}'; this prompt takes: {}",
            k.chars().take(64).collect::<String>(),
            allowed.join(", ")
        )));
    }
    Ok(())
}

fn user_text(description: &str, text: String) -> Value {
    json!({
        "resultType": "complete",
        "description": description,
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}]
    })
}

/// Build prompt `name`. Unknown names and bad arguments are -32602.
pub(crate) async fn get(
    broker: &Broker,
    subject: &Subject,
    name: &str,
    args: Option<Map<String, Value>>,
    mode: Mode,
) -> Result<GetPromptResult, Error> {
    match name {
        "what_am_i_doing" => {
            check_args(&args, &["detail"])?;
            let full = match arg(&args, "detail")? {
                None | Some("brief") => false,
                Some("full") => true,
                Some(_) => {
                    return Err(Error::InvalidParams(
                        "argument 'detail' must be brief or full".into(),
                    ));
                }
            };
            let snap = resources::read(broker, subject, &Res::Snapshot, mode).await?;
            let mut text = format!(
                "Here is what my desktop shows right now, as reported by contextd (only what I allowed this assistant to see):\n\n{}",
                snap.markdown
            );
            if full {
                // Its strings are the same third-party text: the JSON goes
                // in one fence (one line, nothing in it can close it).
                text.push_str(&format!(
                    "\nThe complete snapshot as JSON:\n\n{}\n",
                    data("snapshot as JSON", None, &json_line(&snap.json))
                ));
            }
            text.push_str("\nIn two or three sentences, what am I most likely doing right now? Do not guess beyond what the data shows.");
            wire(user_text(
                "What the user is doing, from the allowed snapshot",
                seal(text),
            ))
        }
        "privacy_report" => {
            check_args(&args, &["period"])?;
            let (days, said) = match arg(&args, "period")? {
                None | Some("24h") => (1, "24 hours"),
                Some("7d") => (7, "7 days"),
                Some(_) => {
                    return Err(Error::InvalidParams(
                        "argument 'period' must be 24h or 7d".into(),
                    ));
                }
            };
            let since = broker.core.now() - chrono::Duration::days(days);
            let c = broker
                .core
                .read(subject, read::Captures { since }, mode)
                .await?;
            let whence = if c.from_timeline {
                "from the timeline contextd keeps"
            } else {
                "as contextd saw it since it started"
            };
            let mut lines: Vec<String> = c.sessions.iter().map(output::capture_line).collect();
            if c.more {
                lines.push(format!("… and more after the first {}", read::MAX_CAPTURES));
            }
            let mut text = format!(
                "Here is who used my microphone, camera or screen in the last {said}, {whence}:\n\n"
            );
            if lines.is_empty() {
                text.push_str("Nobody.\n");
            }
            for l in &lines {
                text.push_str(&format!("- {l}\n"));
            }
            text.push_str("\nExplain this to me briefly and point out anything unusual.");
            wire(user_text(
                "Recent use of microphone, camera and screen",
                seal(text),
            ))
        }
        _ => {
            #[cfg(feature = "conformance")]
            if super::fixtures_on()
                && let Some(r) = super::conformance::prompt(name, &args)
            {
                return r;
            }
            Err(Error::InvalidParams(format!(
                "unknown prompt '{}'; prompts/list names the prompts",
                name.chars().take(64).collect::<String>()
            )))
        }
    }
}

/// `completion/complete`: prompt arguments, the `{id}` of the window
/// template (window ids only when the host may see windows), the `app`
/// of the history template (app ids only with the `history` grant) and the
/// `{kind}` of the provided template (the seed kinds, and the kinds apps
/// publish now that the host may see).
pub(crate) async fn complete(
    broker: &Broker,
    subject: &Subject,
    req: &CompleteRequestParams,
) -> Result<CompleteResult, Error> {
    let prefix = req.argument.value.as_str();
    let candidates: Vec<String> = match &req.r#ref {
        Reference::Prompt(p) => match (p.name.as_str(), req.argument.name.as_str()) {
            ("what_am_i_doing", "detail") => DETAILS.iter().map(|s| s.to_string()).collect(),
            ("privacy_report", "period") => PERIODS.iter().map(|s| s.to_string()).collect(),
            #[cfg(feature = "conformance")]
            (name, argname) if super::fixtures_on() && super::conformance::completes(name) => {
                super::conformance::complete(name, argname, prefix)
            }
            ("what_am_i_doing" | "privacy_report", a) => {
                return Err(Error::InvalidParams(format!(
                    "prompt '{}' has no argument '{}'",
                    p.name,
                    a.chars().take(64).collect::<String>()
                )));
            }
            (n, _) => {
                return Err(Error::InvalidParams(format!(
                    "unknown prompt '{}'",
                    n.chars().take(64).collect::<String>()
                )));
            }
        },
        Reference::Resource(r)
            if r.uri == super::timeline::HISTORY_TEMPLATE && req.argument.name == "app" =>
        {
            super::timeline::app_ids(broker, subject).await
        }
        Reference::Resource(r)
            if r.uri == resources::PROVIDED_TEMPLATE && req.argument.name == "kind" =>
        {
            resources::provided_kinds(broker, subject).await
        }
        Reference::Resource(r) => {
            if r.uri != resources::WINDOW_TEMPLATE || req.argument.name != "id" {
                return Err(Error::InvalidParams(format!(
                    "nothing to complete for {} argument '{}'",
                    r.uri.chars().take(128).collect::<String>(),
                    req.argument.name.chars().take(64).collect::<String>()
                )));
            }
            match broker.core.read(subject, read::Windows, Mode::Look).await {
                Ok(v) => v.windows.into_iter().map(|w| w.id).collect(),
                Err(_) => Vec::new(),
            }
        }
        _ => {
            return Err(Error::InvalidParams(
                "completion/complete takes a ref/prompt or ref/resource reference".into(),
            ));
        }
    };
    // A value hosts may show or hand to the model as it is: only plain
    // identifiers (an app id a client chose can be any text).
    let mut values: Vec<String> = candidates
        .into_iter()
        .filter(|c| c.starts_with(prefix) && is_plain(c))
        .collect();
    let total = values.len();
    values.truncate(100);
    wire(json!({
        "resultType": "complete",
        "completion": {"values": values, "total": total, "hasMore": total > 100}
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_parses() {
        let p = prompts().expect("prompts parse");
        assert!(p.iter().any(|p| p.name == "what_am_i_doing"));
        let r: Result<GetPromptResult, Error> = wire(user_text("d", "t".into()));
        assert!(r.is_ok());
        let c: Result<CompleteResult, Error> =
            wire(json!({"completion": {"values": ["a"], "total": 1, "hasMore": false}}));
        assert!(c.is_ok());
    }
}
