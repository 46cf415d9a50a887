//! Prompts, and `completion/complete` for their arguments and for the
//! window template.

use std::future::Future;
use std::pin::Pin;

use rmcp::model::{CompleteRequestParams, CompleteResult, GetPromptResult, Reference};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::Broker;
use super::consent::{Mode, Subject};
use super::error::{Error, wire};
use super::output::{self, Output};
use super::render::{data, is_plain, json_line, seal};
use super::resources::{self, Res};
use crate::core::read;

/// What a prompt is built for: the host, how consent is asked, the broker.
pub(crate) struct Cx<'a> {
    pub(crate) broker: &'a Broker,
    pub(crate) subject: &'a Subject,
    pub(crate) mode: Mode,
}

/// One MCP prompt, declared once: its `arguments` (name, title,
/// description, required) are read off the JSON Schema of `Args`, the
/// values `completion/complete` offers are the `enum` of each argument's
/// type, and the arguments of `prompts/get` are parsed into `Args` by
/// serde (all prompt arguments are strings in MCP: `Args`' fields are
/// strings or string enums).
pub(crate) trait Prompt {
    const NAME: &'static str;
    const TITLE: &'static str;
    const DESCRIPTION: &'static str;
    type Args: DeserializeOwned + JsonSchema + Send;
    fn get(
        cx: Cx<'_>,
        args: Self::Args,
    ) -> impl Future<Output = Result<GetPromptResult, Error>> + Send + '_;
}

type Building<'a> = Pin<Box<dyn Future<Output = Result<GetPromptResult, Error>> + Send + 'a>>;

/// A declared prompt with its types erased, as the registry holds it.
pub(crate) struct Declared {
    pub(crate) name: &'static str,
    describe: fn() -> Value,
    /// The JSON Schema of the arguments (completion reads its `enum`s).
    args: fn() -> Value,
    build: for<'a> fn(Cx<'a>, Option<Map<String, Value>>) -> Building<'a>,
}

const fn declare<P: Prompt>() -> Declared {
    Declared {
        name: P::NAME,
        describe: describe::<P>,
        args: super::schema::input::<P::Args>,
        build: build::<P>,
    }
}

fn describe<P: Prompt>() -> Value {
    let schema = super::schema::input::<P::Args>();
    let required = |k: &str| {
        schema["required"]
            .as_array()
            .is_some_and(|r| r.iter().any(|x| x == k))
    };
    let arguments: Vec<Value> = schema["properties"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, p)| {
            json!({
                "name": k,
                "title": p["title"],
                "description": p["description"],
                "required": required(k),
            })
        })
        .collect();
    json!({
        "name": P::NAME,
        "title": P::TITLE,
        "description": P::DESCRIPTION,
        "arguments": arguments,
    })
}

fn build<'a, P: Prompt>(cx: Cx<'a>, args: Option<Map<String, Value>>) -> Building<'a> {
    Box::pin(async move {
        let args = super::schema::parse::<P::Args>(args).map_err(Error::InvalidParams)?;
        P::get(cx, args).await
    })
}

/// Every prompt, in the order `prompts/list` shows them.
pub(crate) static REGISTRY: &[Declared] = &[
    declare::<WhatAmIDoing>(),
    declare::<PrivacyReport>(),
    declare::<WhatsNext>(),
];

/// The prompts, as `prompts/list` shows them.
pub(crate) fn catalog() -> Vec<Value> {
    REGISTRY.iter().map(|p| (p.describe)()).collect()
}

#[cfg(test)]
pub(crate) fn prompts() -> Result<Vec<rmcp::model::Prompt>, Error> {
    catalog().into_iter().map(wire).collect()
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
    if let Some(p) = REGISTRY.iter().find(|p| p.name == name) {
        let cx = Cx {
            broker,
            subject,
            mode,
        };
        return (p.build)(cx, args).await;
    }
    Err(Error::InvalidParams(format!(
        "unknown prompt '{}'; prompts/list names the prompts",
        name.chars().take(64).collect::<String>()
    )))
}

/// The values `completion/complete` offers for argument `arg` of a
/// declared prompt: its type's `enum`; `None` when it has no such
/// argument.
fn choices(p: &Declared, arg: &str) -> Option<Vec<String>> {
    let schema = (p.args)();
    let prop = schema["properties"].get(arg)?;
    Some(
        prop["enum"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
    )
}

/// `what_am_i_doing`'s `detail`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Detail {
    #[default]
    Brief,
    Full,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DoingArgs {
    #[schemars(
        title = "Detail",
        description = "brief (default): a summary; full: also the complete JSON snapshot"
    )]
    detail: Option<Detail>,
}

pub(crate) struct WhatAmIDoing;
impl Prompt for WhatAmIDoing {
    const NAME: &'static str = "what_am_i_doing";
    const TITLE: &'static str = "What am I doing?";
    const DESCRIPTION: &'static str = "A prompt built from what the user allowed this host to see right now (focused window, open windows, media, session, and what apps publish: the open document, the current task, the selection, an event), asking the model to describe the user's current activity.";
    type Args = DoingArgs;
    async fn get(cx: Cx<'_>, args: DoingArgs) -> Result<GetPromptResult, Error> {
        let full = args.detail.unwrap_or_default() == Detail::Full;
        let snap = resources::read(cx.broker, cx.subject, &Res::Snapshot, cx.mode).await?;
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
}

/// `privacy_report`'s `period`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
pub(crate) enum Period {
    #[default]
    #[serde(rename = "24h")]
    Day,
    #[serde(rename = "7d")]
    Week,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PrivacyArgs {
    #[schemars(
        title = "Period",
        description = "How far back: 24h (the default) or 7d"
    )]
    period: Option<Period>,
}

pub(crate) struct PrivacyReport;
impl Prompt for PrivacyReport {
    const NAME: &'static str = "privacy_report";
    const TITLE: &'static str = "Privacy report";
    const DESCRIPTION: &'static str = "Which apps used the microphone, camera or screen recently (needs media.capture; 7d, and the timeline for 24h, need history), as a prompt asking the model to explain it to the user.";
    type Args = PrivacyArgs;
    async fn get(cx: Cx<'_>, args: PrivacyArgs) -> Result<GetPromptResult, Error> {
        let (days, said) = match args.period.unwrap_or_default() {
            Period::Day => (1, "24 hours"),
            Period::Week => (7, "7 days"),
        };
        let since = cx.broker.core.manage.now() - chrono::Duration::days(days);
        let c = cx
            .broker
            .core
            .reads
            .read(cx.subject, read::Captures { since }, cx.mode)
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
}

/// `whats_next`'s `about`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum About {
    /// The events and the tasks.
    #[default]
    Both,
    Events,
    Tasks,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NextArgs {
    #[schemars(
        title = "About",
        description = "both (default): the upcoming events and the open tasks; events or tasks: only those"
    )]
    about: Option<About>,
}

/// The calendar as a prompt: what `get_upcoming_events` and `list_tasks`
/// return (their Markdown, from the same read under the same consent),
/// and the question what comes next.
pub(crate) struct WhatsNext;
impl Prompt for WhatsNext {
    const NAME: &'static str = "whats_next";
    const TITLE: &'static str = "What's next?";
    const DESCRIPTION: &'static str = "The user's upcoming events of the next 14 days and open tasks (needs calendar; titles, places and attendees need calendar.details), as a prompt asking the model what comes next and what to prepare.";
    type Args = NextArgs;
    async fn get(cx: Cx<'_>, args: NextArgs) -> Result<GetPromptResult, Error> {
        let about = args.about.unwrap_or_default();
        let mut text = String::from(
            "Here is my calendar, as reported by contextd (only what I allowed this assistant to see):\n\n",
        );
        // One read for both lists: one question to the user, one use of
        // a one-time grant.
        let cal = cx
            .broker
            .core
            .reads
            .read(cx.subject, read::Calendar, cx.mode)
            .await?;
        if about != About::Tasks {
            text.push_str(&output::EventsOut::of(cal.clone()).markdown());
            text.push('\n');
        }
        if about != About::Events {
            text.push_str(&output::TasksOut::of(cal).markdown());
            text.push('\n');
        }
        text.push_str("\nWhat is next for me, and what should I prepare or do first? Times are in UTC; say them in my local time if you know it. Do not guess beyond what the data shows.");
        wire(user_text(
            "The user's upcoming events and open tasks",
            seal(text),
        ))
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
        Reference::Prompt(p) => {
            let theirs =
                super::extension::get().and_then(|e| e.complete(&p.name, &req.argument.name));
            if let Some(v) = theirs {
                return finish_completion(v, prefix);
            }
            let Some(declared) = REGISTRY.iter().find(|d| d.name == p.name) else {
                return Err(Error::InvalidParams(format!(
                    "unknown prompt '{}'",
                    p.name.chars().take(64).collect::<String>()
                )));
            };
            choices(declared, &req.argument.name).ok_or_else(|| {
                Error::InvalidParams(format!(
                    "prompt '{}' has no argument '{}'",
                    p.name,
                    req.argument.name.chars().take(64).collect::<String>()
                ))
            })?
        }
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
        // Event ids only when the host may see the calendar.
        Reference::Resource(r)
            if r.uri == resources::EVENT_TEMPLATE && req.argument.name == "id" =>
        {
            match broker
                .core
                .reads
                .read(subject, read::Calendar, Mode::Look)
                .await
            {
                Ok(v) => v.events.into_iter().map(|e| e.id).collect(),
                Err(_) => Vec::new(),
            }
        }
        Reference::Resource(r) => {
            if r.uri != resources::WINDOW_TEMPLATE || req.argument.name != "id" {
                return Err(Error::InvalidParams(format!(
                    "nothing to complete for {} argument '{}'",
                    r.uri.chars().take(128).collect::<String>(),
                    req.argument.name.chars().take(64).collect::<String>()
                )));
            }
            match broker
                .core
                .reads
                .read(subject, read::Windows, Mode::Look)
                .await
            {
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
    finish_completion(candidates, prefix)
}

/// The candidates that start with `prefix`, as the completion result.
fn finish_completion(candidates: Vec<String>, prefix: &str) -> Result<CompleteResult, Error> {
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

    /// A prompt's arguments, their parsing and the values completion
    /// offers all come from its `Args` type.
    #[test]
    fn prompt_arguments_and_choices_come_from_their_types() {
        let find = |n: &str| REGISTRY.iter().find(|p| p.name == n).expect("declared");
        let doing = find("what_am_i_doing");
        let brief_full = Some(vec!["brief".to_string(), "full".to_string()]);
        assert_eq!(choices(doing, "detail"), brief_full);
        assert_eq!(choices(doing, "period"), None);
        let report = find("privacy_report");
        let periods = Some(vec!["24h".to_string(), "7d".to_string()]);
        assert_eq!(choices(report, "period"), periods);
        let args = |v: Value| v.as_object().cloned();
        let p = super::super::schema::parse::<PrivacyArgs>(args(json!({"period": "7d"})));
        assert!(p.is_ok_and(|p| p.period == Some(Period::Week)));
        for bad in [
            json!({"detail": "loud"}),
            json!({"detail": 5}),
            json!({"period": "7d"}),
        ] {
            let e = super::super::schema::parse::<DoingArgs>(args(bad.clone())).err();
            assert!(
                e.is_some_and(|e| e.starts_with("invalid argument '")),
                "{bad}"
            );
        }
        let described = (doing.describe)();
        assert_eq!(described["arguments"][0]["name"], "detail");
        assert_eq!(described["arguments"][0]["required"], false);
    }
}
