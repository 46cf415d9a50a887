//! The desktops users run today (issue 34), from a Debian 13 root
//! (`scripts/roots.sh desktop13`, made once per machine by scripts/deps.sh):
//! what runs inside it (the compositor, its windows) is Debian 13's, started
//! through `scripts/in-root.sh`; the broker is the one built here, on the
//! host, and reaches them through their sockets as it reaches any desktop.
//!
//! - sway 1.10 (wlroots 0.18) offers both `ext_foreign_toplevel_list_v1` and
//!   `zwlr_foreign_toplevel_manager_v1`: the ext list makes the windows (its
//!   stable identifier is the window's identity: `ext-` ids) and the wlr
//!   handles give their states (ext has none), so focus still reaches a
//!   subscriber. The same acceptance as for sway 1.7 (tests/it/wayland.rs).
//! - PipeWire 1.4 and WirePlumber 0.5, with pw-play from the root: the
//!   broker's libpipewire 0.3.65 speaks the same native protocol.
//! - The Debian package installs there and D-Bus activation starts it: the
//!   packaged binary on Debian 13's libraries.
//! - KDE's own dialog asks for consent: xdg-desktop-portal-kde 6.3 on a
//!   virtual KWin 6, answered through AT-SPI (tests/debian13/portal_kde.sh;
//!   there the broker runs inside the root too, see the test).
//! - Plasma 6's notification server (the notifications applet alone, in
//!   `plasmawindowed` on Qt's offscreen platform): its `Inhibited`, set by
//!   an app's `Inhibit` or Plasma's own setting, is Do Not Disturb for
//!   live subscribers; notifications reach them whole
//!   (tests/it/notify_plasma.rs).

use crate::common::run_cmd;

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::Command;

/// The first run on a machine makes the root (debootstrap and apt: several
/// minutes; `make test` makes it before, in scripts/deps.sh).
const MAKE_ROOT_SECS: u64 = 1200;

/// The Debian 13 root, held (a shared lock on ROOT.lock: no new recipe
/// removes it while a test uses it) until dropped.
pub(crate) struct Root {
    pub(crate) path: String,
    _lock: File,
}

/// The root, or `None` (with the reason printed) where it cannot be used:
/// making it and running in it need root (debootstrap, unshare, chroot).
pub(crate) fn root() -> Option<Root> {
    root_of("desktop13", "the Debian 13 root")
}

/// The root of `recipe` (scripts/roots/RECIPE.sh), made if it is missing,
/// held until dropped; `None` (with the reason printed) where it cannot
/// be used. `what` names it in messages.
pub(crate) fn root_of(recipe: &str, what: &str) -> Option<Root> {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: {what} needs root to make and enter (CI runs as root)");
        return None;
    }
    let script = crate::common::root().join("scripts/roots.sh");
    let (st, out, err) = run_cmd(Command::new(script).arg(recipe), MAKE_ROOT_SECS);
    assert!(
        st.success(),
        "scripts/roots.sh {recipe} failed:\n{out}\n{err}"
    );
    let path = out.lines().last().unwrap_or_default().trim().to_owned();
    assert!(
        PathBuf::from(&path).join("usr/bin/sway").exists(),
        "no sway in {what} at {path:?}:\n{err}"
    );
    let lock = File::open(format!("{path}.lock")).expect("the root's lock file");
    // SAFETY: flock(2) on a descriptor we own; it blocks only while a build
    // that removes old roots holds the lock.
    let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_SH) };
    assert_eq!(rc, 0, "flock {path}.lock");
    Some(Root { path, _lock: lock })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sway_1_10_windows_titles_and_focus_through_the_ext_list() {
    let Some(root) = root() else { return };
    crate::wayland::windows_titles_focus_changes_and_desktop_entries_in(
        &["--root", &root.path],
        "1.10",
        "ext-",
    )
    .await;
}

/// PipeWire 1.4 with WirePlumber from the root, and its pw-play: a stream
/// of its process, listed before and after the broker starts, followed by
/// a subscriber (tests/it/pipewire_playback.rs on Debian 12's 0.3.65).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipewire_1_4_playback_is_a_stream_of_its_process() {
    let Some(root) = root() else { return };
    crate::pipewire_playback::pw_play_is_a_playback_stream_of_its_process_in(
        &["--root", &root.path],
        "1.4",
    )
    .await;
}

/// The package of the installed issue installs on Debian 13 (in a
/// throwaway copy of the root, with no network: what it depends on is
/// there) and D-Bus activation from the installed files starts it there
/// (tests/debian13/package.sh).
#[test]
fn the_package_installs_and_activates_on_debian_13() {
    let Some(root) = root() else { return };
    the_package_installs_and_activates_in(&root.path);
}

/// tests/debian13/package.sh in a throwaway copy of the root at `root`.
pub(crate) fn the_package_installs_and_activates_in(root: &str) {
    let repo = crate::common::root();
    // The root sees the host's /tmp, not the clone: the package and the
    // script go there.
    let tmp = tempfile::Builder::new()
        .prefix("contextd-debian13-")
        .tempdir_in("/tmp")
        .expect("tempdir in /tmp");
    let deb = tmp.path().join("contextd.deb");
    std::fs::copy(crate::package::shared_package(), &deb).expect("copy the package");
    let script = tmp.path().join("package.sh");
    std::fs::copy(repo.join("tests/debian13/package.sh"), &script).expect("copy the script");
    let (st, out, err) = run_cmd(
        Command::new(repo.join("scripts/in-root.sh"))
            .arg("--overlay")
            .arg(root)
            .arg("/bin/sh")
            .arg(&script)
            .arg(&deb)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"),
        120,
    );
    println!("{out}");
    assert!(st.success(), "the package in {root}:\n{out}\n{err}");
    assert!(out.contains("debian13-package: ok"), "{out}");
}

/// KWin 6 (`kwin_wayland --virtual`) with the broker's script, loaded over
/// `/Scripting` (KWin 6 names its scripts `/Scripting/ScriptN`): windows,
/// focus exactly once per activation, caption changes, KWin leaving and
/// coming back, the script unloaded when the broker stops
/// (tests/it/shells_kwin.rs on Debian 12's 5.27).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kwin_6_reports_windows_and_focus_through_the_script() {
    let Some(root) = root() else { return };
    crate::shells_kwin::kwin_reports_windows_and_focus_through_the_script_in(
        Some(&root.path),
        "kwin 6.",
    )
    .await;
}

/// GNOME Shell 48 headless with the ES-module extension (45 and later):
/// the GNOME 43 acceptance (tests/it/shells_gnome.rs): the extension off is
/// said with its command, windows with titles by grant, focus to a
/// subscriber, a caller that is not the shell refused, the shell leaving
/// and coming back, the broker restarting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gnome_shell_48_reports_windows_through_the_es_module_extension() {
    let Some(root) = root() else { return };
    crate::shells_gnome::gnome_shell_reports_windows_focus_and_titles_through_the_extension_in(
        Some(&root.path),
        "48.",
        "gnome-shell-45",
    )
    .await;
}

/// The privacy indicator of the ES-module extension in GNOME Shell 48:
/// shown in the top bar while a subscriber reads, with its menu, and gone
/// after (tests/it/indicator_gnome.rs on GNOME Shell 43).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gnome_shell_48_shows_the_indicator_while_a_subscriber_reads() {
    let Some(root) = root() else { return };
    crate::indicator_gnome::gnome_shell_shows_the_indicator_while_a_subscriber_reads_in(
        Some(&root.path),
        "gnome-shell-45",
    )
    .await;
}

/// PipeWire 1.4's pw-record from the root is microphone capture of its
/// process, with a capture session that ends in the day list
/// (tests/it/pipewire_microphone.rs on Debian 12's 0.3.65).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipewire_1_4_capture_is_a_microphone_session_of_its_process() {
    let Some(root) = root() else { return };
    crate::pipewire_microphone::pw_record_is_microphone_capture_and_ends_in_the_day_list_in(&[
        "--root", &root.path,
    ])
    .await;
}

/// The consent dialog of the ES-module extension in GNOME Shell 48: the
/// shell registers as the consent agent (an intruder is refused), the
/// dialog shows the question and takes no input for a second, a second
/// waits, Escape denies the call and cools the app down, a Cancel removes
/// it, "Always allow" by keyboard grants
/// (tests/it/shells_gnome_consent.rs on GNOME Shell 43).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gnome_shell_48_asks_in_a_dialog_queues_cancels_and_grants() {
    let Some(root) = root() else { return };
    crate::shells_gnome_consent::the_shell_asks_in_a_dialog_queues_cancels_and_grants_in(
        Some(&root.path),
        "gnome-shell-45",
    )
    .await;
}

/// The ES-module extension in GNOME Shell 48 sends nothing to an owner of
/// the broker's name that is not the broker, in every disguise, and all to
/// the broker once it runs (tests/it/shells_gnome_rogue_broker.rs on GNOME
/// Shell 43).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gnome_shell_48_sends_nothing_to_an_owner_of_the_name_that_is_not_the_broker() {
    let Some(root) = root() else { return };
    crate::shells_gnome_rogue_broker::the_extension_sends_nothing_to_a_rogue_in(
        Some(&root.path),
        "gnome-shell-45",
    )
    .await;
}

/// The KWin 6 script reports only to the broker that loaded it: a rogue
/// that takes the name after the broker died gets nothing
/// (tests/it/shells_kwin.rs on KWin 5.27).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kwin_6_script_reports_only_to_the_broker_that_loaded_it() {
    let Some(root) = root() else { return };
    crate::shells_kwin::the_script_reports_only_to_the_broker_that_loaded_it_in(Some(&root.path))
        .await;
}

/// Plasma 6.3's notification server (issue 54): an app's `Inhibit` is Do
/// Not Disturb for a live D-Bus subscriber and an MCP host, `UnInhibit` or
/// the app leaving ends it, Plasma leaving makes it unknown and Plasma
/// coming back with its own setting on is read again;
/// a notify-send notification arrives whole and its action is answered,
/// and so is a `send_notification` (tests/it/notify_plasma.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plasma_6_inhibition_is_do_not_disturb_for_live_subscribers() {
    let Some(root) = root() else { return };
    crate::notify_plasma::plasma_inhibition_is_do_not_disturb_in(&root.path).await;
}

/// KDE's own dialog asks (issue 51): xdg-desktop-portal-kde 6.3 on a
/// virtual KWin 6, answered through AT-SPI; allow grants for this time,
/// deny refuses, nothing is stored, and the broker closes a question
/// nobody answers (tests/debian13/portal_kde.sh). The broker runs inside
/// the root with the rest, as on a Debian 13 desktop: it trusts the
/// backend by the program path its service file names, which is that
/// program's path only seen from the same root.
#[test]
fn kde_asks_in_its_own_portal_dialog_on_debian_13() {
    let Some(root) = root() else { return };
    kde_asks_in_its_own_portal_dialog_in(&root.path);
}

/// tests/debian13/portal_kde.sh in the root at `root`, the broker with it.
pub(crate) fn kde_asks_in_its_own_portal_dialog_in(root: &str) {
    let repo = crate::common::root();
    let tmp = tempfile::Builder::new()
        .prefix("contextd-debian13-kde-")
        .tempdir_in("/tmp")
        .expect("tempdir in /tmp");
    for (from, to) in [
        (PathBuf::from(crate::common::contextd_bin()), "contextd"),
        (
            repo.join("tests/portal/answer_dialog.py"),
            "answer_dialog.py",
        ),
        (repo.join("tests/debian13/ask.py"), "ask.py"),
        (repo.join("tests/debian13/portal_kde.sh"), "portal_kde.sh"),
    ] {
        std::fs::copy(&from, tmp.path().join(to))
            .unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
    }
    let (st, out, err) = run_cmd(
        Command::new(repo.join("scripts/in-root.sh"))
            .arg(root)
            .arg("/bin/sh")
            .arg(tmp.path().join("portal_kde.sh"))
            .arg(tmp.path())
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"),
        240,
    );
    println!("{out}");
    assert!(st.success(), "KDE's portal dialog in {root}:\n{out}\n{err}");
    assert!(out.contains("debian13-portal-kde: ok"), "{out}");
}

/// The window identity of tests/it/window_identity.rs on this root's
/// sway: a window is its process, from sway's IPC; a claim of Firefox's
/// app id from python stays a claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sway_1_10_windows_carry_their_process_and_a_claim_stays_a_claim() {
    let Some(root) = root() else { return };
    crate::window_identity::on_sway_in(&["--root", &root.path]).await;
}
