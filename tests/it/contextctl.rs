//! contextctl as a user runs it: readable tables, JSON for scripts, the
//! how-to-grant message, and consent management through polkit.

use crate::common;

use std::process::Command;

use common::dbusmock::Mock;
use common::*;

fn ctl(bus: &Bus, sys: Option<&Bus>, args: &[&str]) -> (i32, String, String) {
    let mut c = Command::new(contextctl_bin());
    c.env("DBUS_SESSION_BUS_ADDRESS", &bus.address).args(args);
    if let Some(sys) = sys {
        c.env("DBUS_SYSTEM_BUS_ADDRESS", &sys.address);
    }
    let (st, out, err) = run_cmd(&mut c, 30);
    (st.code().unwrap_or(-1), out, err)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contextctl_reads_tables_json_and_says_how_to_grant() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        let replay = home.dir.path().join("r.jsonl");
        std::fs::write(
            &replay,
            [
                window_line("w1", "org.gnome.TextEditor", "notes.txt", true),
                window_line("w2", "org.mozilla.firefox", "News", false),
            ]
            .join("\n"),
        )
        .expect("replay");
        let _d = Daemon::start(&bus, &home, &["--replay", &replay.display().to_string()]).await;
        let me = format!(
            "exe:{}",
            std::fs::canonicalize(contextctl_bin())
                .expect("path")
                .display()
        );

        // Without a grant: exit 1 and the fix, in words.
        let (code, _out, err) = ctl(&bus, None, &["windows"]);
        assert_eq!(code, 1);
        assert!(
            err.contains("NotAllowed")
                && err.contains(&me)
                && err.contains("contextctl consent grant"),
            "{err}"
        );
        // status still works: sources need no consent, the rest is withheld.
        let (code, out, _) = ctl(&bus, None, &["status"]);
        assert_eq!(code, 0);
        assert!(
            out.contains("SOURCE") && out.contains("replay") && out.contains("Withheld"),
            "{out}"
        );

        home.write_policy(&[(&me, &["windows.titles"])]);
        let out = eventually(10, "granted", || async {
            let (code, out, _) = ctl(&bus, None, &["windows"]);
            (code == 0).then_some(out)
        })
        .await;
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[0].contains("APP ID") && lines[0].contains("TITLE"),
            "{out}"
        );
        assert!(
            lines.iter().any(|l| l.starts_with('*')
                && l.contains("org.gnome.TextEditor")
                && l.contains("notes.txt")),
            "{out}"
        );

        let (code, out, _) = ctl(&bus, None, &["windows", "--json"]);
        assert_eq!(code, 0);
        let v: serde_json::Value = serde_json::from_str(&out).expect("json");
        assert_eq!(v.as_array().map(Vec::len), Some(2));

        let (code, out, _) = ctl(&bus, None, &["categories"]);
        assert_eq!(code, 0);
        assert!(
            out.lines()
                .any(|l| l.starts_with("windows.titles") && l.contains("yes")),
            "{out}"
        );
        assert!(
            out.lines()
                .any(|l| l.starts_with("power") && l.contains("no")),
            "{out}"
        );
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contextctl_consent_and_audit() {
    with_timeout(60, async {
        let bus = Bus::start();
        let sys = Bus::start();
        let _polkit = Mock::polkit_allowing(&sys.address, &["org.contextd.manage-consent"]).await;
        let home = Home::new();
        home.write_policy(&[("org.from.Policy", &["power"])]);
        let _d = Daemon::start_with(
            &bus,
            &home,
            &[],
            &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)],
        )
        .await;

        let (code, out, err) = ctl(
            &bus,
            Some(&sys),
            &[
                "consent",
                "grant",
                "org.example.Editor",
                "windows",
                "--for",
                "8h",
            ],
        );
        assert_eq!(code, 0, "{err}");
        assert!(
            out.contains("org.example.Editor may now read windows until"),
            "{out}"
        );
        let (code, _, err) = ctl(
            &bus,
            Some(&sys),
            &["consent", "deny", "org.example.Spy", "media.capture"],
        );
        assert_eq!(code, 0, "{err}");
        let (code, out, _) = ctl(&bus, Some(&sys), &["consent", "list"]);
        assert_eq!(code, 0);
        assert!(
            out.lines().any(|l| l.contains("org.example.Editor")
                && l.contains("allow")
                && !l.contains("never")),
            "{out}"
        );
        assert!(
            out.lines()
                .any(|l| l.contains("org.example.Spy") && l.contains("deny")),
            "{out}"
        );
        assert!(
            out.lines()
                .any(|l| l.contains("org.from.Policy") && l.contains("policy.toml")),
            "{out}"
        );

        let (code, out, _) = ctl(&bus, Some(&sys), &["consent", "list", "--json"]);
        assert_eq!(code, 0);
        let v: serde_json::Value = serde_json::from_str(&out).expect("json");
        assert_eq!(v["paused"], false);

        let (code, _, _) = ctl(
            &bus,
            Some(&sys),
            &["consent", "revoke", "org.example.Editor", "windows"],
        );
        assert_eq!(code, 0);
        let (code, _, _) = ctl(&bus, Some(&sys), &["consent", "pause"]);
        assert_eq!(code, 0);
        let (code, out, _) = ctl(&bus, Some(&sys), &["consent", "list"]);
        assert_eq!(code, 0);
        assert!(out.contains("PAUSED"), "{out}");
        let (code, _, _) = ctl(&bus, Some(&sys), &["consent", "resume"]);
        assert_eq!(code, 0);

        // contextctl's own refused reads are in the audit log.
        let _ = ctl(&bus, Some(&sys), &["windows"]);
        let out = eventually(10, "audit written", || async {
            let (code, out, _) = ctl(&bus, Some(&sys), &["audit", "--since", "1h", "--json"]);
            let v: serde_json::Value = serde_json::from_str(&out).ok()?;
            (code == 0 && v.as_array().is_some_and(|a| !a.is_empty())).then_some(v)
        })
        .await;
        let e = &out[0];
        assert_eq!(e["category"], "windows");
        assert_eq!(e["allowed"], false);
        assert_eq!(e["channel"], "dbus");
        let (code, out, _) = ctl(&bus, Some(&sys), &["audit"]);
        assert_eq!(code, 0);
        assert!(out.contains("refused"), "{out}");

        let (code, _, err) = ctl(
            &bus,
            Some(&sys),
            &["consent", "grant", "x.y", "windows", "--for", "soon"],
        );
        assert_eq!(code, 1);
        assert!(err.contains("not a duration"), "{err}");
    })
    .await
}

/// `contextctl privacy` needs no daemon: it lists the built-in lists and
/// the user's rules of both files, adds and removes rules in
/// privacy.toml, refuses an empty or multi-line pattern, and says where a
/// rule of config.toml must be removed instead of pretending it did.
#[test]
fn contextctl_privacy_edits_the_rules_without_a_daemon() {
    let home = Home::new();
    home.write_config("[privacy]\ntitles = [\"medical\"]\n");
    let run = |args: &[&str]| {
        let mut c = Command::new(contextctl_bin());
        c.args(args).envs(home.envs_for("unix:path=/nonexistent"));
        let (st, out, err) = run_cmd(&mut c, 20);
        (st.success(), out, err)
    };
    let (ok, out, err) = run(&["privacy", "add", "app", "org.example.Diary"]);
    assert!(ok, "{out} {err}");
    let (ok, out, _) = run(&["privacy", "list"]);
    assert!(ok);
    for want in ["keepassxc", "bitwarden", "medical", "org.example.Diary"] {
        assert!(out.contains(want), "{want} not listed: {out}");
    }
    let (ok, out, _) = run(&["--json", "privacy", "list"]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("JSON");
    assert_eq!(v["privacy_toml"]["apps"][0], "org.example.Diary", "{v}");
    let (ok, _, err) = run(&["privacy", "remove", "title", "medical"]);
    assert!(!ok);
    assert!(err.contains("config.toml"), "{err}");
    let (ok, _, err) = run(&["privacy", "add", "title", "a\nb"]);
    assert!(!ok, "{err}");
    let (ok, out, err) = run(&["privacy", "remove", "app", "ORG.EXAMPLE.DIARY"]);
    assert!(ok, "{out} {err}");
    let file = std::fs::read_to_string(home.dir.path().join("config/contextd/privacy.toml"))
        .expect("privacy.toml");
    assert!(!file.contains("Diary"), "{file}");
}
