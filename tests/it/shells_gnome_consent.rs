//! The consent dialog of the GNOME Shell extension, in real GNOME Shell 43
//! (headless): the extension registers as the broker's consent agent (the
//! broker trusts it: gnome-shell's executable, owning org.gnome.Shell)
//! and another program that tries is refused; an app that is not granted
//! asks; the dialog shows its question (seen in
//! the shell's own actor tree, and in a screenshot the shell takes, saved
//! under target/tmp/); no answer is the default and the buttons take no
//! input for a second (a Return typed as it appears answers nothing); a
//! second question waits for the first; Escape denies that call and
//! cools the app down (its waiting question is never shown); an answer
//! given elsewhere makes the broker `Cancel` the dialog; a key press on
//! "Always allow" grants.
//!
//! The actor tree is read by a probe extension the test installs (like
//! the benches' focus helper): GNOME Shell 43 has no D-Bus call to read
//! it (`Eval` needs unsafe mode), and the contextd extension carries no
//! test hook.

use crate::common;
use crate::shells;

use std::path::Path;
use std::time::Duration;

use common::access::Asked;
use common::dbusmock::Mock;
use common::*;
use contextd::client::proxy::{Consent1Proxy, Context1Proxy};
use shells::gnome::{GnomeShell, UUID, data_dir_for};

const PROBE_UUID: &str = "contextd-test-probe@contextd.org";
const PROBE_PATH: &str = "/org/contextd/TestProbe";
const PROBE_IFACE: &str = "org.contextd.TestProbe";

/// The probe: `Dialogs() -> s` (JSON: per consent dialog open on the
/// screen, its texts and its buttons), `Key(s keyval name)` (a press and
/// release from a virtual keyboard, as a user types),
/// `KeyWhileInsensitive(s)` (the same, only while the dialog's buttons
/// take no input yet: whether it typed), `Focus(s label)`
/// (key focus to the button of that label, as Tab would), `Screenshot(s
/// path)` (the stage, by the shell's own screenshot code).
/// The probe's imports in the legacy format (GNOME 43, 44).
const PROBE_LEGACY_HEAD: &str = r#"'use strict';
const {Clutter, Gio, GLib, Shell, St} = imports.gi;
const Main = imports.ui.main;
const ModalDialog = imports.ui.modalDialog;
"#;
/// The probe's imports as ES modules (GNOME 45 and later).
const PROBE_ESM_HEAD: &str = r#"import Clutter from 'gi://Clutter';
import Gio from 'gi://Gio';
import GLib from 'gi://GLib';
import Shell from 'gi://Shell';
import St from 'gi://St';
import * as Main from 'resource:///org/gnome/shell/ui/main.js';
import * as ModalDialog from 'resource:///org/gnome/shell/ui/modalDialog.js';
import {Extension} from 'resource:///org/gnome/shell/extensions/extension.js';
"#;
/// The probe's entry point in each format.
const PROBE_LEGACY_TAIL: &str = "function init() {\n    return new Probe();\n}\n";
const PROBE_ESM_TAIL: &str = "export default class ProbeExtension extends Extension {\n    enable() {\n        this._probe = new Probe();\n        this._probe.enable();\n    }\n    disable() {\n        this._probe.disable();\n        this._probe = null;\n    }\n}\n";
const PROBE_JS: &str = r#"const IFACE = `<node><interface name="org.contextd.TestProbe">
  <method name="Dialogs"><arg type="s" direction="out"/></method>
  <method name="Key"><arg type="s" direction="in"/><arg type="b" direction="out"/></method>
  <method name="KeyWhileInsensitive"><arg type="s" direction="in"/><arg type="b" direction="out"/></method>
  <method name="KeyAsTypedAtOpen"><arg type="s" direction="in"/><arg type="b" direction="out"/></method>
  <method name="Focus"><arg type="s" direction="in"/><arg type="b" direction="out"/></method>
  <method name="Screenshot"><arg type="s" direction="in"/><arg type="b" direction="out"/></method>
</interface></node>`;
function walk(actor, out) {
    if (actor instanceof St.Button) {
        out.buttons.push(actor.label || '');
        out.reactive.push(actor.reactive);
    }
    else if (actor instanceof St.Label)
        out.texts.push(actor.get_text());
    for (const c of actor.get_children())
        walk(c, out);
}
function dialogs() {
    return Main.layoutManager.modalDialogGroup.get_children().filter(a =>
        a.get_name() === 'contextd-consent-dialog' &&
        (a.state === ModalDialog.State.OPENED || a.state === ModalDialog.State.OPENING));
}
class Probe {
    enable() {
        // Clutter.get_default_backend() is gone in GNOME 50; the stage's
        // context has the backend since 46.
        const backend = Clutter.get_default_backend
            ? Clutter.get_default_backend() : global.stage.context.get_backend();
        this._kbd = backend.get_default_seat()
            .create_virtual_device(Clutter.InputDeviceType.KEYBOARD_DEVICE);
        this._obj = Gio.DBusExportedObject.wrapJSObject(IFACE, this);
        this._obj.export(Gio.DBus.session, '/org/contextd/TestProbe');
        // What each dialog's buttons were at the moment it finished
        // opening, read in the shell's own main loop: whether they took
        // input at once, however late the test asks.
        const group = Main.layoutManager.modalDialogGroup;
        // `child-added` since GNOME 46; `actor-added` (ClutterContainer)
        // before.
        let added = 'child-added';
        try {
            group.disconnect(group.connect(added, () => {}));
        } catch (_e) {
            added = 'actor-added';
        }
        this._added = group.connect(added, (_g, a) => {
            if (!(a instanceof ModalDialog.ModalDialog))
                return;
            a.connect('opened', () => {
                const out = {texts: [], buttons: [], reactive: []};
                walk(a, out);
                a._probeReactiveAtOpen = out.reactive;
                a._probeOpenedAt = GLib.get_monotonic_time();
            });
        });
    }
    disable() {
        Main.layoutManager.modalDialogGroup.disconnect(this._added);
        this._obj.unexport();
    }
    Dialogs() {
        return JSON.stringify(dialogs().map(d => {
            const out = {
                texts: [], buttons: [], reactive: [], name: d.accessible_name,
                opened: d.state === ModalDialog.State.OPENED,
                reactive_at_open: d._probeReactiveAtOpen ?? null,
            };
            walk(d, out);
            return out;
        }));
    }
    Key(name) {
        const keyval = Clutter[`KEY_${name}`];
        if (!keyval)
            return false;
        const t = GLib.get_monotonic_time();
        this._kbd.notify_keyval(t, keyval, Clutter.KeyState.PRESSED);
        this._kbd.notify_keyval(t + 1000, keyval, Clutter.KeyState.RELEASED);
        return true;
    }
    // The key, only if a dialog shows and none of its buttons takes
    // input yet (decided in the shell's own main loop, where the key is
    // then handled): a loaded machine may deliver this call after the
    // dialog's first second, and a key then is the user's.
    KeyWhileInsensitive(name) {
        const ds = dialogs();
        if (ds.length === 0)
            return false;
        const out = {texts: [], buttons: [], reactive: []};
        walk(ds[0], out);
        if (out.reactive.some(r => r))
            return false;
        return this.Key(name);
    }
    // The key as typed 0.1 s after the first dialog opened (its event
    // time), whenever the shell handles it: a key typed in the dialog's
    // first second and handled late, on a busy shell.
    KeyAsTypedAtOpen(name) {
        const d = dialogs()[0];
        const keyval = Clutter[`KEY_${name}`];
        if (!d || !d._probeOpenedAt || !keyval)
            return false;
        const t = d._probeOpenedAt + 100000;
        this._kbd.notify_keyval(t, keyval, Clutter.KeyState.PRESSED);
        this._kbd.notify_keyval(t + 1000, keyval, Clutter.KeyState.RELEASED);
        return true;
    }
    Focus(label) {
        for (const d of dialogs()) {
            const b = d.buttonLayout.get_children().find(x => x.label === label);
            if (b) {
                b.grab_key_focus();
                return true;
            }
        }
        return false;
    }
    // The stage painted into a texture (clutter_stage_paint_to_content),
    // then written as PNG: the shell's screenshot UI does the same.
    ScreenshotAsync([path], invocation) {
        // A headless shell stays in its startup animation (the UI at
        // opacity 0, scaled down; Main.layoutManager._startingUp): show
        // it as it ends, or the picture is the bare stage.
        const ui = Main.layoutManager.uiGroup;
        ui.remove_all_transitions();
        ui.opacity = 255;
        ui.set_scale(1, 1);
        const fail = e => {
            log(`probe: screenshot: ${e}`);
            invocation.return_value(new GLib.Variant('(b)', [false]));
        };
        new Shell.Screenshot().screenshot_stage_to_content((shooter, res) => {
            try {
                const [content, scale] = shooter.screenshot_stage_to_content_finish(res);
                const texture = content.get_texture();
                const stream = Gio.File.new_for_path(path)
                    .replace(null, false, Gio.FileCreateFlags.NONE, null);
                Shell.Screenshot.composite_to_stream(texture, 0, 0, -1, -1, scale,
                    null, 0, 0, 1, stream, (_o, r) => {
                        try {
                            Shell.Screenshot.composite_to_stream_finish(r);
                            stream.close(null);
                            invocation.return_value(new GLib.Variant('(b)', [true]));
                        } catch (e) {
                            fail(e);
                        }
                    });
            } catch (e) {
                fail(e);
            }
        });
    }
}
"#;

/// Install the probe in `data` and a mode, `contextd-test-consent`, that
/// enables it with the contextd extension; in the format of
/// `data/FORMAT`'s extension (`gnome-shell`: legacy; `gnome-shell-45`: ES
/// modules).
fn install_probe(data: &Path, format: &str) {
    let ext = data.join("gnome-shell/extensions").join(PROBE_UUID);
    std::fs::create_dir_all(&ext).expect("mkdir");
    let esm = format == "gnome-shell-45";
    let versions = if esm {
        r#""45", "46", "47", "48", "49", "50", "51""#
    } else {
        r#""43", "44""#
    };
    std::fs::write(
        ext.join("metadata.json"),
        format!(
            r#"{{"uuid": "{PROBE_UUID}", "name": "contextd test probe", "description": "Reads the consent dialog (tests only)", "shell-version": [{versions}]}}"#
        ),
    )
    .expect("metadata");
    let (head, tail) = if esm {
        (PROBE_ESM_HEAD, PROBE_ESM_TAIL)
    } else {
        (PROBE_LEGACY_HEAD, PROBE_LEGACY_TAIL)
    };
    std::fs::write(ext.join("extension.js"), format!("{head}{PROBE_JS}{tail}"))
        .expect("extension.js");
    std::fs::write(
        data.join("gnome-shell/modes/contextd-test-consent.json"),
        format!(
            r#"{{"parentMode": "user", "hasOverview": false, "enabledExtensions": ["{UUID}", "{PROBE_UUID}"]}}"#
        ),
    )
    .expect("mode");
}

async fn probe<T>(conn: &zbus::Connection, method: &str, args: &T) -> zbus::Message
where
    T: serde::Serialize + zbus::wire::DynamicType,
{
    conn.call_method(
        Some("org.gnome.Shell"),
        PROBE_PATH,
        Some(PROBE_IFACE),
        method,
        args,
    )
    .await
    .unwrap_or_else(|e| panic!("probe {method}: {e}"))
}

/// The consent dialogs on the screen.
async fn dialogs(conn: &zbus::Connection) -> Vec<serde_json::Value> {
    let m = probe(conn, "Dialogs", &()).await;
    let text: String = m.body().deserialize().expect("string");
    serde_json::from_str(&text).expect("json")
}

async fn key(conn: &zbus::Connection, name: &str) {
    let m = probe(conn, "Key", &(name,)).await;
    assert!(m.body().deserialize::<bool>().expect("bool"), "key {name}");
}

/// Wait until exactly one dialog shows and its texts contain `what`.
async fn one_dialog_about(conn: &zbus::Connection, what: &str) -> serde_json::Value {
    eventually(20, &format!("one dialog about {what}"), || async {
        let ds = dialogs(conn).await;
        let shown = ds.len() == 1
            && ds[0]["texts"]
                .as_array()?
                .iter()
                .any(|t| t.as_str().is_some_and(|t| t.contains(what)));
        shown.then(|| ds[0].clone())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shell_asks_in_a_dialog_queues_cancels_and_grants() {
    the_shell_asks_in_a_dialog_queues_cancels_and_grants_in(None, "gnome-shell").await;
}

/// The whole test for the GNOME Shell of `root` (a root of
/// scripts/roots.sh) or the host's, with the extension of `data/FORMAT`.
pub(crate) async fn the_shell_asks_in_a_dialog_queues_cancels_and_grants_in(
    root: Option<&str>,
    format: &str,
) {
    with_timeout(180, async {
        let bus = Bus::start();
        let sys = Bus::start();
        // Polkit for the "panel" that answers elsewhere (AnswerPending).
        let _polkit = Mock::polkit_allowing(&sys.address, &["org.contextd.manage-consent"]).await;
        let home = Home::new();
        // The shell's executable as the kernel shows it to the broker: from
        // a root, the path below the root.
        let shells = match root {
            Some(r) => format!("[sources.shells]\ngnome_shell = \"{r}/usr/bin/gnome-shell\"\n"),
            None => String::new(),
        };
        home.write_config(&format!(
            "{shells}[consent]\nprompt_timeout_s = 60\ncooldown_s = 2\n"
        ));
        let shell_home = tempfile::tempdir().expect("tempdir");
        let data = data_dir_for(shell_home.path(), format);
        install_probe(&data, format);
        let _daemon = Daemon::start_with(
            &bus,
            &home,
            &[],
            &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)],
        )
        .await;
        let _shell = GnomeShell::start_in(
            root,
            &bus.address,
            &data,
            shell_home.path(),
            "contextd-test-consent",
        )
        .await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");

        // The extension registered, and the broker trusted it.
        eventually(20, "the shell is the consent agent", || async {
            let s = ctx
                .list_sources()
                .await
                .ok()?
                .iter()
                .map(contextd::client::json::dict_to_json)
                .find(|s| s["name"] == "consent-agent")?;
            (s["available"] == true).then_some(())
        })
        .await;
        // The probe is an extension of its own, enabled after ours: wait
        // for its object too.
        eventually(20, "the probe extension is up", || async {
            conn.call_method(
                Some("org.gnome.Shell"),
                PROBE_PATH,
                Some(PROBE_IFACE),
                "Dialogs",
                &(),
            )
            .await
            .ok()
            .map(|_| ())
        })
        .await;

        // Another program registering is refused; the shell stays the
        // agent (the dialogs below are its).
        assert_eq!(
            crate::consent_agents::python_registers(&bus.address, false),
            "org.contextd.Error.NotAllowed"
        );

        // An app that is not granted asks: the dialog shows its question.
        let power = Asked::new(&conn, &["power"], "to show your battery in my panel").await;
        let d = one_dialog_about(&conn, "Battery level and whether you are on battery").await;
        let texts = d["texts"].to_string();
        assert!(texts.contains("to show your battery in my panel"), "{d}");
        assert!(texts.contains(&my_app_id()), "{d}");
        assert_eq!(
            d["buttons"],
            serde_json::json!(["Deny", "Allow once", "Allow for a day", "Always allow"]),
            "{d}"
        );
        assert!(
            d["name"].as_str().is_some_and(|n| n.starts_with("Allow “")),
            "no accessible name: {d}"
        );
        // The attack: a question timed to appear under the user's typing.
        // A Return at once answers nothing: no answer is the default, and
        // no button takes input for a second. Whether they did as the
        // dialog finished opening is read in the shell (the probe), not
        // raced against the clock here.
        let at_open = eventually(20, "the dialog opened", || async {
            let d = dialogs(&conn).await.first()?.clone();
            d["reactive_at_open"].as_array().cloned()
        })
        .await;
        assert!(
            !at_open.is_empty() && at_open.iter().all(|b| b == false),
            "buttons took input as soon as the dialog opened: {at_open:?} ({d})"
        );
        let m = probe(&conn, "KeyWhileInsensitive", &("Return",)).await;
        let typed: bool = m.body().deserialize().expect("bool");
        if typed {
            tokio::time::sleep(Duration::from_millis(300)).await;
            one_dialog_about(&conn, "Battery level").await;
            assert_eq!(
                consent.list_pending().await.expect("pending").len(),
                1,
                "a Return typed as the dialog appeared answered it"
            );
        } else {
            // The machine was too slow to type within the first second:
            // the attack could not be made (the buttons' insensitivity at
            // first was checked above).
            eprintln!("the dialog took input before Return could be typed");
        }
        eventually(20, "the dialog has faded in and takes input", || async {
            let d = dialogs(&conn).await.first()?.clone();
            (d["opened"] == true
                && d["reactive"]
                    .as_array()
                    .is_some_and(|r| r.iter().all(|b| b == true)))
            .then_some(())
        })
        .await;
        // The same attack on a busy shell: a Return typed in the first
        // second but handled only now, when the buttons take input, is
        // still not an answer (its event time says when it was typed).
        let m = probe(&conn, "KeyAsTypedAtOpen", &("Return",)).await;
        assert!(m.body().deserialize::<bool>().expect("bool"), "typed");
        tokio::time::sleep(Duration::from_millis(300)).await;
        one_dialog_about(&conn, "Battery level").await;
        assert_eq!(
            consent.list_pending().await.expect("pending").len(),
            1,
            "a Return typed in the first second and handled late answered it"
        );
        // Taken where a shell in a root can write (its home is under
        // /tmp), then kept beside the other test pictures.
        let taken = shell_home.path().join("dialog.png");
        let m = probe(&conn, "Screenshot", &(taken.display().to_string(),)).await;
        assert!(m.body().deserialize::<bool>().expect("bool"), "screenshot");
        assert!(
            std::fs::metadata(&taken).is_ok_and(|m| m.len() > 1000),
            "no screenshot at {}",
            taken.display()
        );
        let shot =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("consent-dialog-{format}.png"));
        std::fs::create_dir_all(env!("CARGO_TARGET_TMPDIR")).expect("target/tmp");
        std::fs::copy(&taken, &shot).expect("keep the screenshot");

        // A second question waits for the first: still one dialog.
        let network = Asked::new(&conn, &["network"], "to know if you are online").await;
        eventually(20, "two questions pending", || async {
            (consent.list_pending().await.ok()?.len() == 2).then_some(())
        })
        .await;
        one_dialog_about(&conn, "Battery level").await;

        // Escape: denied for this call, and the app cools down: its
        // waiting question is never shown, and denied.
        key(&conn, "Escape").await;
        assert_eq!(power.code().await, 1, "Escape denies the call");
        assert_eq!(network.code().await, 1, "the app is cooling down");
        eventually(20, "no dialog and nothing pending", || async {
            (dialogs(&conn).await.is_empty() && consent.list_pending().await.ok()?.is_empty())
                .then_some(())
        })
        .await;
        // After the cool-down (2 s here) the app asks again.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let network = Asked::new(&conn, &["network"], "to know if you are online").await;
        one_dialog_about(&conn, "Network connectivity").await;

        // Answered elsewhere (a settings panel: another program than the
        // app, since nobody answers its own question): the broker cancels
        // the dialog, which goes.
        let pending = consent.list_pending().await.expect("pending");
        let id = pending
            .iter()
            .map(contextd::client::json::dict_to_json)
            .find(|p| p["categories"].to_string().contains("network"))
            .and_then(|p| p["id"].as_u64())
            .expect("the network question's id");
        let out = std::process::Command::new("gdbus")
            .args(["call", "--address", &bus.address])
            .args(["--dest", "org.contextd.Broker1"])
            .args(["--object-path", "/org/contextd/Broker1"])
            .args(["--method", "org.contextd.Consent1.AnswerPending"])
            .args([&id.to_string(), "deny", "0"])
            .output()
            .expect("gdbus");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("true"),
            "AnswerPending from a panel: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(network.code().await, 1);
        eventually(20, "the dialog is withdrawn", || async {
            dialogs(&conn).await.is_empty().then_some(())
        })
        .await;

        // Escape stored nothing: the app asks again, and "Always allow"
        // (key focus, then Return, as a keyboard user) grants it.
        let again = Asked::new(&conn, &["power"], "to show your battery in my panel").await;
        one_dialog_about(&conn, "Battery level").await;
        eventually(20, "the buttons take input", || async {
            let d = dialogs(&conn).await.first()?.clone();
            d["reactive"]
                .as_array()
                .is_some_and(|r| !r.is_empty() && r.iter().all(|b| b == true))
                .then_some(())
        })
        .await;
        let m = probe(&conn, "Focus", &("Always allow",)).await;
        assert!(m.body().deserialize::<bool>().expect("bool"), "focus");
        key(&conn, "Return").await;
        assert_eq!(again.code().await, 0, "Always allow grants");
        let grants = consent.list_grants().await.expect("grants");
        let grants: Vec<serde_json::Value> = grants
            .iter()
            .map(contextd::client::json::dict_to_json)
            .collect();
        // Stored, from the prompt, for good: "Always allow", not "Allow
        // once" (kept in memory only) nor "for a day".
        assert!(
            grants.iter().any(|g| g["category"] == "power"
                && g["decision"] == "allow"
                && g["origin"] == "prompt"
                && g.get("expires").is_none()),
            "{grants:?}"
        );
        eventually(20, "the dialog is gone", || async {
            dialogs(&conn).await.is_empty().then_some(())
        })
        .await;
    })
    .await;
}

/// The consent agent is the same code in the legacy extension (GNOME 43,
/// 44) and the ES module (45 and later), and both extension.js hook it.
#[test]
fn both_extension_formats_carry_the_same_consent_agent() {
    let read = |dir: &str, file: &str| -> String {
        let p = crate::common::root()
            .join("data")
            .join(dir)
            .join(UUID)
            .join(file);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    let part = |dir: &str| -> String {
        let text = read(dir, "consentDialog.js");
        let start = text.find("// --- consent agent").expect("start marker");
        let end = text
            .find("// --- end of consent agent ---")
            .expect("end marker");
        text[start..end].to_owned()
    };
    assert_eq!(part("gnome-shell"), part("gnome-shell-45"));
    assert!(read("gnome-shell", "consentDialog.js").contains("var ConsentAgent = Agent;"));
    assert!(read("gnome-shell-45", "consentDialog.js").contains("export {Agent as ConsentAgent};"));
    assert!(read("gnome-shell", "extension.js").contains("consentDialog.ConsentAgent()"));
    assert!(read("gnome-shell-45", "extension.js").contains("from './consentDialog.js'"));
    for dir in ["gnome-shell", "gnome-shell-45"] {
        let ext = read(dir, "extension.js");
        assert!(
            ext.contains("consentAgent.enable()") || ext.contains("_consentAgent.enable()"),
            "{dir}: the agent is not enabled"
        );
        assert!(
            ext.contains("consentAgent.disable()") || ext.contains("_consentAgent.disable()"),
            "{dir}: the agent is not disabled"
        );
    }
}
