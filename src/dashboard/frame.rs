//! What every page of the dashboard shares: the frame (`layout`: the
//! navigation, the pause switch, what the user must know on every page),
//! the links between the session's pages (relative, one level down for a
//! category's or an app's page, an app id as one encoded path segment),
//! an app's label, a time as the pages show it, and the categories the
//! pages list. A floor below the pages (`pages`, `detail`), which both
//! use and which uses neither.

use maud::{DOCTYPE, Markup, html};

use super::Handles;
use crate::model::Category;

/// The grid's columns: every fixed category, the seed kinds apps publish,
/// and any other published kind someone decided about.
pub(super) fn columns(core: &Handles) -> Vec<Category> {
    let mut v: Vec<Category> = Category::fixed().to_vec();
    let extra = crate::core::vocabulary::seed_kinds()
        .map(str::to_owned)
        .chain(
            core.manage
                .grants()
                .into_iter()
                .filter_map(|g| g.category.strip_prefix("provided.").map(str::to_owned)),
        );
    for k in extra {
        if let Ok(c) = Category::provided(&k)
            && !v.contains(&c)
        {
            v.push(c);
        }
    }
    v
}

/// Every page of a session is at `/s/CAP/PAGE`: links and form actions
/// are relative, so no page needs to know its capability and none names
/// a path another session (or port) could use. `here` is the page's name
/// (`/`, `/now`, `/timeline`), as forms send it back in `back`.
pub(super) fn layout(title: &str, here: &str, csrf: &str, core: &Handles, body: Markup) -> Markup {
    let up = up(here);
    let paused = core.manage.paused();
    // What the user must know on every page: a broker running degraded
    // (store::recovery) and revocations the disk has not taken yet
    // (core::pending), as `contextctl status` says them.
    let recovery = core.manage.recovery();
    let waiting = core.manage.waiting_revocations();
    let nav = [
        ("/", "./", "Apps"),
        ("/categories", "categories", "Categories"),
        ("/now", "now", "Now"),
        ("/timeline", "timeline", "Timeline"),
    ];
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="csrf" content=(csrf);
                title { (title) " — contextd" }
                link rel="stylesheet" href="/assets/dashboard.css";
                script src="/assets/dashboard.js" defer {}
            }
            body {
                header {
                    p.brand { "contextd" }
                    nav aria-label="Dashboard pages" {
                        ul {
                            @for (page, href, name) in nav {
                                li {
                                    @let href = if up.is_empty() { href.to_owned() } else if href == "./" { up.to_owned() } else { format!("{up}{href}") };
                                    @if page == here {
                                        a href=(href) aria-current="page" { (name) }
                                    } @else {
                                        a href=(href) { (name) }
                                    }
                                }
                            }
                        }
                    }
                    form.pause method="post" action=(format!("{up}pause")) data-fetch {
                        input type="hidden" name="csrf" value=(csrf);
                        input type="hidden" name="back" value=(here);
                        input type="hidden" name="paused" value=(if paused { "false" } else { "true" });
                        @if paused {
                            p.paused role="status" { "Sharing is paused: no app gets anything." }
                            button type="submit" { "Resume sharing" }
                        } @else {
                            button type="submit" { "Pause all sharing" }
                        }
                    }
                }
                @if let Some(reason) = &recovery {
                    section.alert.recovery role="alert" aria-labelledby="recovery-h" {
                        h2 id="recovery-h" { "Your database could not be used" }
                        p { (reason) }
                        p {
                            "Undecided access is denied, never asked, until you act: restore a backup ("
                            code { "contextctl import FILE" }
                            ") or accept the new database ("
                            code { "contextctl recovery dismiss" }
                            ")."
                        }
                    }
                }
                @if waiting > 0 {
                    section.alert.revocations role="alert" aria-labelledby="revocations-h" {
                        h2 id="revocations-h" { "Revocations not stored yet" }
                        p {
                            (waiting) " revocation(s) are in force but the disk has not taken them (it is full or read-only); contextd retries every few seconds. Free some space or make the disk writable: until then they last until you log out."
                        }
                    }
                }
                main id="main" data-page=(here) {
                    h1 { (title) }
                    (body)
                }
                div id="status" role="status" aria-live="polite" {}
            }
        }
    }
}

/// What leads from a page back to the session's root: `../` for the
/// pages one level down (`/category/NAME`, `/app/ID`), else nothing.
pub(super) fn up(here: &str) -> &'static str {
    if here.trim_start_matches('/').contains('/') {
        "../"
    } else {
        ""
    }
}

/// The characters an app id keeps in a page's path; everything else
/// (`:`, `/` of `exe:/usr/bin/x`) is percent-encoded, so an id is one
/// path segment.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'.')
    .remove(b'-')
    .remove(b'_');

/// An app id as one path segment.
pub(super) fn segment(id: &str) -> String {
    percent_encoding::utf8_percent_encode(id, SEGMENT).to_string()
}

/// The link to an app's page from a page at `here`.
pub(super) fn app_href(here: &str, id: &str) -> String {
    let up = up(here);
    let up = if up.is_empty() { "./" } else { up };
    format!("{up}app/{}", segment(id))
}

/// The link to a category's page from a page at `here`.
pub(super) fn category_href(here: &str, c: &str) -> String {
    let up = up(here);
    let up = if up.is_empty() { "./" } else { up };
    format!("{up}category/{}", segment(c))
}

pub(super) fn app_label(name: Option<&str>, id: &str) -> Markup {
    html! {
        @match name {
            Some(n) => { span.name { (n) } " " span.id { (id) } },
            None => { span.name { (id) } },
        }
    }
}

/// `2026-11-23T10:00:00.000Z` → `2026-11-23 10:00`.
pub(super) fn short(t: &str) -> String {
    t.get(..16).unwrap_or(t).replace('T', " ")
}
