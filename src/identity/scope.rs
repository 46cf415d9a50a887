//! Rule 3, systemd: the app id in the name of the user unit the desktop
//! launched the app in (`app[-LAUNCHER]-ID-RANDOM.scope`,
//! `app[-LAUNCHER]-ID[@RANDOM].service`, see
//! <https://systemd.io/DESKTOP_ENVIRONMENTS/>), parsed like the portal's
//! `_xdp_app_info_host_parse_app_id_from_unit_name`.

use super::cgroup::{Cgroup, is_unit_name};
use super::is_valid_app_id;

/// The app id of the process's user unit, if it is an `app-…` unit naming
/// a valid id.
pub(super) fn from_cgroup(cgroup: &Cgroup<'_>) -> Option<String> {
    // The portal only looks at user units: desktops launch apps in the
    // user's manager, and a system unit called `app-…` is no app launch.
    cgroup.user_unit.and_then(app_id_from_unit)
}

/// The app id of a user unit, if it is an `app-…` unit naming a valid id.
fn app_id_from_unit(unit: &str) -> Option<String> {
    if !is_unit_name(unit) {
        return None;
    }
    let id = unescape_systemd(portal_unit_capture(unit)?);
    is_valid_app_id(&id).then_some(id)
}

/// The capture group of the portal's two regexes
/// (`_xdp_app_info_host_parse_app_id_from_unit_name`), still escaped:
///
/// ```text
/// ^app-(?:[[:alnum:]]+\-)?(.+?)(?:\-[[:alnum:]]*)(?:\.scope|\.slice)$
/// ^app-(?:[[:alnum:]]+\-)?(.+?)(?:@[[:alnum:]]*|\-autostart)?\.service$
/// ```
///
/// Written out rather than with a regex crate, with the backtracking order
/// of PCRE: the optional launcher prefix is tried first, and the lazy
/// capture takes the shortest id that lets the rest match. The launcher
/// cannot be told from the id by its name, only by position: an id's own
/// `-` is escaped (`\x2d`) in a unit name, so a literal `-` right after a
/// first alphanumeric run ends a launcher (`gnome-`, `kde-`, `KDE-`,
/// `flatpak-`, …), while `org.kde.konsole` starts with `org.`.
fn portal_unit_capture(unit: &str) -> Option<&str> {
    let rest = unit.strip_prefix("app-")?;
    if let Some(body) = rest
        .strip_suffix(".scope")
        .or_else(|| rest.strip_suffix(".slice"))
    {
        return after_optional_launcher(body, scope_capture);
    }
    let body = rest.strip_suffix(".service")?;
    after_optional_launcher(body, service_capture)
}

/// `(?:[[:alnum:]]+\-)?` followed by `capture`. The greedy alphanumeric
/// run can only end at a `-` when it is maximal, so there is one launcher
/// candidate; PCRE tries it before the empty alternative.
fn after_optional_launcher<'a>(
    body: &'a str,
    capture: impl Fn(&'a str) -> Option<&'a str>,
) -> Option<&'a str> {
    let run = body.bytes().take_while(u8::is_ascii_alphanumeric).count();
    if run > 0 && body.as_bytes().get(run) == Some(&b'-') {
        let captured = body.get(run + 1..).and_then(&capture);
        if captured.is_some() {
            return captured;
        }
    }
    capture(body)
}

/// `(.+?)(?:\-[[:alnum:]]*)` up to the end of `s`.
fn scope_capture(s: &str) -> Option<&str> {
    (1..s.len())
        .find(|&i| {
            s.as_bytes().get(i) == Some(&b'-')
                && s.get(i + 1..)
                    .is_some_and(|t| t.bytes().all(|b| b.is_ascii_alphanumeric()))
        })
        .and_then(|i| s.get(..i))
}

/// `(.+?)(?:@[[:alnum:]]*|\-autostart)?` up to the end of `s`.
fn service_capture(s: &str) -> Option<&str> {
    (1..=s.len())
        .find(|&i| {
            s.get(i..).is_some_and(|tail| {
                tail.is_empty()
                    || tail == "-autostart"
                    || tail
                        .strip_prefix('@')
                        .is_some_and(|t| t.bytes().all(|b| b.is_ascii_alphanumeric()))
            })
        })
        .and_then(|i| s.get(..i))
}

/// Undo systemd's unit-name escaping: `\xNN` becomes byte `NN`.
///
/// Systemd escapes every byte a unit name cannot hold this way (`-` as
/// `\x2d`, `é` as `\xc3\xa9`). Like systemd's `cunescape(…, UNESCAPE_RELAX)`
/// that the portal uses, an invalid escape (bad hex digits, too short, or
/// `\x00`, which would cut a C string) is kept as it is, and decoded bytes
/// are not decoded again. Bytes that do not form UTF-8 become U+FFFD,
/// which no valid app id contains.
pub(crate) fn unescape_systemd(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'\\' && bytes.get(i + 1) == Some(&b'x') {
            let hi = bytes.get(i + 2).and_then(|&h| hex_value(h));
            let lo = bytes.get(i + 3).and_then(|&l| hex_value(l));
            if let (Some(hi), Some(lo)) = (hi, lo) {
                let decoded = (hi << 4) | lo;
                if decoded != 0 {
                    out.push(decoded);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(b);
        i += 1;
    }
    match String::from_utf8(out) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

fn hex_value(b: u8) -> Option<u8> {
    char::from(b)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::test_support::{FakeProc, USER, cg, systemd, user_unit};
    use crate::model::IdentitySource;

    #[test]
    fn gnome_terminal_scope() {
        assert_eq!(
            cg(
                "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.gnome.Terminal-12345.scope\n"
            ),
            systemd("org.gnome.Terminal")
        );
    }

    #[test]
    fn kde_scope_without_launcher() {
        assert_eq!(
            cg(&user_unit("app-org.kde.konsole-1234.scope")),
            systemd("org.kde.konsole")
        );
        // KDE's random part is not always decimal.
        assert_eq!(
            cg(&user_unit("app-org.kde.dolphin-a0b1c2d3e4.scope")),
            systemd("org.kde.dolphin")
        );
    }

    #[test]
    fn kde_service_with_launcher() {
        // From the portal's own tests (tests/test-xdp-utils.c).
        assert_eq!(
            cg(&user_unit("app-KDE-org.kde.okular@12345.service")),
            systemd("org.kde.okular")
        );
        assert_eq!(
            cg(&user_unit("app-kde-org.kde.dolphin@abcd.service")),
            systemd("org.kde.dolphin")
        );
    }

    #[test]
    fn services() {
        assert_eq!(
            cg(&user_unit("app-org.example.Foo@12.service")),
            systemd("org.example.Foo")
        );
        assert_eq!(
            cg(&user_unit("app-org.kde.amarok.service")),
            systemd("org.kde.amarok")
        );
        // Autostart, before and after systemd v248.
        assert_eq!(
            cg(&user_unit(
                "app-gnome-org.gnome.SettingsDaemon.DiskUtilityNotify-autostart.service"
            )),
            systemd("org.gnome.SettingsDaemon.DiskUtilityNotify")
        );
        assert_eq!(
            cg(&user_unit(
                "app-org.gnome.Evolution\\x2dalarm\\x2dnotify@autostart.service"
            )),
            systemd("org.gnome.Evolution-alarm-notify")
        );
    }

    #[test]
    fn escaped_ids() {
        assert_eq!(
            cg(&user_unit(
                "app-gnome-org.gnome.Evolution\\x2dalarm\\x2dnotify-2437.scope"
            )),
            systemd("org.gnome.Evolution-alarm-notify")
        );
        assert_eq!(
            cg(&user_unit(
                "app-gnome-org.gnome.Evince\\x2dPrevious-1234.scope"
            )),
            systemd("org.gnome.Evince-Previous")
        );
        // A `-` is only allowed in the last element of an app id.
        assert_eq!(cg(&user_unit("app-gnome-org.my\\x2dapp.Foo-1.scope")), None);
    }

    #[test]
    fn flatpak_launcher_scope() {
        assert_eq!(
            cg(&user_unit("app-flatpak-org.mozilla.firefox-1234.scope")),
            systemd("org.mozilla.firefox")
        );
    }

    #[test]
    fn more_portal_examples() {
        for (unit, id) in [
            (
                "app-gnome-org.gnome.Epiphany-182352.scope",
                "org.gnome.Epiphany",
            ),
            (
                "app-gnome-org.gnome.Terminal-92502.slice",
                "org.gnome.Terminal",
            ),
            (
                "app-com.obsproject.Studio-d70acc38b5154a3a8b4a60accc4b15f4.scope",
                "com.obsproject.Studio",
            ),
        ] {
            let captured = portal_unit_capture(unit).map(unescape_systemd);
            assert_eq!(captured.as_deref(), Some(id), "{unit}");
        }
        assert_eq!(portal_unit_capture("app-not-a-well-formed-unit-name"), None);
    }

    #[test]
    fn non_reverse_dns_falls_through() {
        assert_eq!(cg(&user_unit("app-foo-123.scope")), None);
        // The portal's regex yields "spice-vdagent"; it is no app id.
        assert_eq!(
            portal_unit_capture("app-glib-spice\\x2dvdagent-1839.scope"),
            Some("spice\\x2dvdagent")
        );
        assert_eq!(
            cg(&user_unit("app-glib-spice\\x2dvdagent-1839.scope")),
            None
        );
        assert_eq!(
            cg(&user_unit("app-gnome-xdg\\x2duser\\x2ddirs-3033.scope")),
            None
        );
        assert_eq!(cg(&user_unit("app-firefox.service")), None);
    }

    #[test]
    fn non_app_units() {
        assert_eq!(cg("0::/user.slice/user-1000.slice/session-2.scope\n"), None);
        assert_eq!(cg(&format!("{USER}/init.scope\n")), None);
        assert_eq!(cg(&format!("{USER}\n")), None);
        assert_eq!(cg("0::/\n"), None);
        assert_eq!(cg("0::/system.slice/dbus-broker.service\n"), None);
        // A shell in GNOME Terminal is not GNOME Terminal.
        assert_eq!(
            cg(&format!(
                "{USER}/apps.slice/apps-org.gnome.Terminal.slice/vte-spawn-228ae109-a869-4533-8988-65ea4c10b492.scope\n"
            )),
            None
        );
        // Like sd_pid_get_user_unit: system units are no app launches.
        assert_eq!(cg("0::/system.slice/app-org.example.Foo.service\n"), None);
    }

    #[test]
    fn unescape() {
        assert_eq!(
            unescape_systemd("org.gnome.Evince\\x2dPrevious"),
            "org.gnome.Evince-Previous"
        );
        assert_eq!(unescape_systemd("a\\x2Db"), "a-b");
        assert_eq!(unescape_systemd("caf\\xc3\\xa9"), "caf\u{e9}");
        assert_eq!(
            unescape_systemd("\\x5cx2d"),
            "\\x2d",
            "decoded bytes are not decoded again"
        );
        assert_eq!(unescape_systemd("\\xZZ"), "\\xZZ");
        assert_eq!(unescape_systemd("\\x2"), "\\x2");
        assert_eq!(unescape_systemd("\\x"), "\\x");
        assert_eq!(unescape_systemd("\\"), "\\");
        assert_eq!(unescape_systemd("\\x00"), "\\x00");
        assert_eq!(unescape_systemd("\\n"), "\\n");
        assert_eq!(unescape_systemd("\\\\x2d"), "\\-");
        assert_eq!(unescape_systemd("\\xff"), "\u{fffd}");
        assert_eq!(unescape_systemd(""), "");
    }

    /// Grants are keyed by the whole id, and the id says its source: an
    /// unsandboxed process that starts itself in `app-ID-1.scope` is
    /// `systemd:ID`, a subject of its own, and the Flatpak `ID`'s grants
    /// (in policy.toml or stored) do not let it read.
    #[test]
    fn a_scope_named_like_a_flatpak_does_not_inherit_its_grants() {
        use crate::core::consent::{Loaded, Origin, StoredDecision, Verdict};
        use crate::core::gate::Decision;
        use crate::core::{Gate, GateSettings};
        use crate::model::{AppId, Category};

        let proc = FakeProc::new();
        let sandboxed = proc.process(
            300,
            &user_unit("app-flatpak-org.mozilla.firefox-1.scope"),
            "/app/lib/firefox/firefox",
        );
        std::fs::write(
            sandboxed.join("root/.flatpak-info"),
            "[Application]\nname=org.mozilla.firefox\n",
        )
        .expect("flatpak-info");
        proc.process(
            301,
            &user_unit("app-org.mozilla.firefox-1.scope"),
            "/tmp/gdbus",
        );
        let flatpak = proc.resolve(300).expect("flatpak");
        let scoped = proc.resolve(301).expect("scope");
        assert_eq!(flatpak.app_id.as_str(), "org.mozilla.firefox");
        assert_eq!(flatpak.source, IdentitySource::Flatpak);
        assert_eq!(scoped.app_id.as_str(), "systemd:org.mozilla.firefox");
        assert_eq!(scoped.source, IdentitySource::Systemd);

        let dir = tempfile::tempdir().expect("tempdir");
        let policy = dir.path().join("policy.toml");
        std::fs::write(
            &policy,
            "[[grant]]\napp = \"org.mozilla.firefox\"\ncategories = [\"windows\"]\n",
        )
        .expect("policy");
        let now = chrono::Utc::now();
        let stored = StoredDecision {
            app: AppId::new("org.mozilla.firefox").expect("id"),
            category: Category::Power,
            verdict: Verdict::Allow,
            expires: None,
            origin: Origin::Prompt,
            created: now,
        };
        let gate = Gate::with_store(
            policy,
            crate::core::clock::ManualClock::new(now),
            None,
            Loaded {
                decisions: vec![stored],
                ..Loaded::default()
            },
            GateSettings {
                undecided: Verdict::Deny,
                ..GateSettings::default()
            },
        );
        gate.reload().expect("policy loads");
        for cat in [Category::Windows, Category::Power] {
            assert!(gate.allows(&flatpak.app_id, &cat), "{cat}");
            assert!(
                matches!(gate.decide(&scoped.app_id, &cat), Decision::Deny(_)),
                "{cat}: the scope must not inherit the Flatpak's grant"
            );
        }
    }

    #[test]
    fn fake_systemd() {
        let proc = FakeProc::new();
        proc.process(
            200,
            "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.gnome.Terminal-12345.scope\n",
            "/usr/libexec/gnome-terminal-server",
        );
        let id = proc.resolve(200).unwrap();
        assert_eq!(id.app_id.as_str(), "systemd:org.gnome.Terminal");
        assert_eq!(id.source, IdentitySource::Systemd);
        // Read through the same pinned directory (who is `contextctl`).
        assert_eq!(
            id.executable.as_deref(),
            Some(std::path::Path::new("/usr/libexec/gnome-terminal-server"))
        );
    }
}
