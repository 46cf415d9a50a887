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
