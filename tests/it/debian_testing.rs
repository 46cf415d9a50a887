//! The newest desktops Debian carries (issue 52), from the root of
//! `scripts/roots.sh desktop-testing` (Debian sid, made once per machine;
//! the versions are in its recipe): as in tests/it/debian13.rs, what runs
//! inside the root (the compositor, its windows, wl-copy) is that root's,
//! through `scripts/in-root.sh`; the broker is the one built here, on the
//! host, and reaches them through their sockets.
//!
//! - sway 1.12 (wlroots 0.20): windows through `ext_foreign_toplevel_list_v1`
//!   (states from the wlr handles), focus exactly once per activation, a
//!   window closing, sway leaving and coming back; the primary selection
//!   through `ext_data_control_manager_v1`, which sway 1.12 offers beside
//!   the wlr one and the broker prefers.
//! - labwc 0.20 headless through foreign-toplevel (tests/it/wlroots.rs);
//!   Hyprland 0.57 the same way where there is a DRM device, which it
//!   cannot run without.
//! - KWin 6.7 with the broker's script; GNOME Shell 51 headless with the
//!   ES-module extension (its `shell-version` names 51), its indicator,
//!   consent dialog and refusal of a rogue owner of the broker's name.
//! - PipeWire 1.6 with WirePlumber 0.5.18: playback and capture, each of
//!   its process.
//! - The Debian package installs and activates; KDE's portal dialog 6.7
//!   asks.

use crate::debian13::{Root, root_of};

/// The root, or `None` with the reason printed.
fn root() -> Option<Root> {
    root_of("desktop-testing", "the Debian testing root")
}

/// sway 1.12: windows, titles by grant, focus exactly once per activation
/// to a subscriber, a title change and a close (tests/it/wayland.rs on
/// sway 1.7); the windows are those of the ext list (`ext-` ids).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sway_1_12_windows_titles_and_focus_through_the_ext_list() {
    let Some(root) = root() else { return };
    crate::wayland::windows_titles_focus_changes_and_desktop_entries_in(
        &["--root", &root.path],
        "1.12",
        "ext-",
    )
    .await;
}

/// sway 1.12 killed and started again: the source unavailable with a
/// reason, the windows gone, the broker idle meanwhile, the windows back
/// with new ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sway_1_12_leaving_and_coming_back() {
    let Some(root) = root() else { return };
    crate::wayland::compositor_restart_goes_unavailable_idles_and_comes_back_in(&[
        "--root", &root.path,
    ])
    .await;
}

/// The primary selection on sway 1.12, set by the root's wl-copy, read
/// through `ext_data_control_manager_v1` (sway offers the wlr one too: the
/// broker prefers ext), with the grant only and never in a signal or the
/// timeline (tests/it/wayland_selection.rs on sway 1.7's wlr protocol).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sway_1_12_selection_through_ext_data_control() {
    let Some(root) = root() else { return };
    crate::wayland_selection::get_selection_with_the_grant_only_and_never_in_signals_or_history_in(
        Some(&root.path),
        "ext_data_control_manager_v1 v1",
    )
    .await;
}

/// KWin 6.7 (`kwin_wayland --virtual`) with the broker's script: windows,
/// focus exactly once per activation, caption changes, KWin leaving and
/// coming back, the script unloaded when the broker stops
/// (tests/it/shells_kwin.rs on Debian 12's 5.27).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kwin_6_7_reports_windows_and_focus_through_the_script() {
    let Some(root) = root() else { return };
    crate::shells_kwin::kwin_reports_windows_and_focus_through_the_script_in(
        Some(&root.path),
        "kwin 6.7",
    )
    .await;
}

/// The KWin 6.7 script reports only to the broker that loaded it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kwin_6_7_script_reports_only_to_the_broker_that_loaded_it() {
    let Some(root) = root() else { return };
    crate::shells_kwin::the_script_reports_only_to_the_broker_that_loaded_it_in(Some(&root.path))
        .await;
}

/// GNOME Shell 51 headless with the ES-module extension, whose
/// `shell-version` names 51: the extension off is said with its command,
/// windows with titles by grant, focus to a subscriber, a caller that is
/// not the shell refused, the shell leaving and coming back, the broker
/// restarting (tests/it/shells_gnome.rs on GNOME Shell 43).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gnome_shell_51_reports_windows_through_the_es_module_extension() {
    let Some(root) = root() else { return };
    crate::shells_gnome::gnome_shell_reports_windows_focus_and_titles_through_the_extension_in(
        Some(&root.path),
        "51.",
        "gnome-shell-45",
    )
    .await;
}

/// The privacy indicator of the extension in GNOME Shell 51.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gnome_shell_51_shows_the_indicator_while_a_subscriber_reads() {
    let Some(root) = root() else { return };
    crate::indicator_gnome::gnome_shell_shows_the_indicator_while_a_subscriber_reads_in(
        Some(&root.path),
        "gnome-shell-45",
    )
    .await;
}

/// The consent dialog of the extension in GNOME Shell 51
/// (tests/it/shells_gnome_consent.rs on GNOME Shell 43).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gnome_shell_51_asks_in_a_dialog_queues_cancels_and_grants() {
    let Some(root) = root() else { return };
    crate::shells_gnome_consent::the_shell_asks_in_a_dialog_queues_cancels_and_grants_in(
        Some(&root.path),
        "gnome-shell-45",
    )
    .await;
}

/// The extension in GNOME Shell 51 sends nothing to an owner of the
/// broker's name that is not the broker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gnome_shell_51_sends_nothing_to_an_owner_of_the_name_that_is_not_the_broker() {
    let Some(root) = root() else { return };
    crate::shells_gnome_rogue_broker::the_extension_sends_nothing_to_a_rogue_in(
        Some(&root.path),
        "gnome-shell-45",
    )
    .await;
}

/// PipeWire 1.6 with WirePlumber 0.5.18 and pw-play from the root: a
/// stream of its process, followed by a subscriber (the broker's
/// libpipewire is Debian 12's 0.3.65: the same native protocol).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipewire_1_6_playback_is_a_stream_of_its_process() {
    let Some(root) = root() else { return };
    crate::pipewire_playback::pw_play_is_a_playback_stream_of_its_process_in(
        &["--root", &root.path],
        "1.6",
    )
    .await;
}

/// PipeWire 1.6's pw-record from the root is microphone capture of its
/// process, with a capture session that ends in the day list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipewire_1_6_capture_is_a_microphone_session_of_its_process() {
    let Some(root) = root() else { return };
    crate::pipewire_microphone::pw_record_is_microphone_capture_and_ends_in_the_day_list_in(&[
        "--root", &root.path,
    ])
    .await;
}

/// labwc 0.20 headless (wlroots' headless backend, pixman): windows
/// through the ext list, focus from the wlr handles exactly once per
/// activation, a title change, a window closing, labwc leaving and coming
/// back (tests/it/wlroots.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labwc_0_20_windows_focus_closing_and_coming_back() {
    let Some(root) = root() else { return };
    crate::wlroots::windows_focus_closing_and_coming_back(
        crate::wlroots::Kind::Labwc,
        &root.path,
        "0.20",
    )
    .await;
}

/// Hyprland 0.57 headless, as labwc; only where there is a DRM device
/// (tests/it/wlroots.rs says why).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hyprland_0_57_windows_focus_closing_and_coming_back() {
    if !crate::wlroots::has_drm_device() {
        eprintln!(
            "skipped: Hyprland cannot run without a DRM device (its aquamarine backend \
             allocates every buffer, headless ones too, through GBM or DRM dumb buffers), \
             and this machine has no /dev/dri/card* or renderD*"
        );
        return;
    }
    let Some(root) = root() else { return };
    crate::wlroots::windows_focus_closing_and_coming_back(
        crate::wlroots::Kind::Hyprland,
        &root.path,
        "0.57",
    )
    .await;
}

/// The package installs in a throwaway copy of the root, with no network
/// (what it depends on is there), and D-Bus activation starts it
/// (tests/debian13/package.sh).
#[test]
fn the_package_installs_and_activates_on_debian_testing() {
    let Some(root) = root() else { return };
    crate::debian13::the_package_installs_and_activates_in(&root.path);
}

/// KDE's own dialog asks: xdg-desktop-portal-kde 6.7 on a virtual KWin
/// 6.7, answered through AT-SPI (tests/debian13/portal_kde.sh).
#[test]
fn kde_6_7_asks_in_its_own_portal_dialog() {
    let Some(root) = root() else { return };
    crate::debian13::kde_asks_in_its_own_portal_dialog_in(&root.path);
}

/// The window identity of tests/it/window_identity.rs on this root's
/// sway: a window is its process, from sway's IPC; a claim of Firefox's
/// app id from python stays a claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sway_1_12_windows_carry_their_process_and_a_claim_stays_a_claim() {
    let Some(root) = root() else { return };
    crate::window_identity::on_sway_in(&["--root", &root.path]).await;
}

/// A window a sandbox engine made through `wp_security_context_v1` is
/// marked with sway 1.12's word on its security context (engine, app id,
/// instance); a plain window of the same program is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sway_1_12_marks_a_sandboxed_window_from_its_security_context() {
    let Some(root) = root() else { return };
    crate::window_identity::sandboxed_window_on_sway_in(&["--root", &root.path]).await;
}
