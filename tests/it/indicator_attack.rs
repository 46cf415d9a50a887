//! `org.contextd.Indicator1` is the shell's alone: it ends readers and
//! pauses sharing without polkit, and a caller that `Watch`es makes the
//! broker hide its own tray icon. Written as the attack: an ordinary
//! program, and one that owns `org.gnome.Shell` without being GNOME Shell,
//! call every method; each gets `NotAllowed`, the reader stays, sharing is
//! not paused, and nothing is hidden.

use crate::common;

use common::dbusmock::Mock;
use common::*;
use contextd::client::proxy::{Consent1Proxy, Context1Proxy};

/// Call every Indicator1 method from python3 (owning `org.gnome.Shell`
/// first when `take_shell_name`); the error name of each, in order.
fn python_calls(bus: &str, take_shell_name: bool) -> Vec<String> {
    crate::consent_agents::python_as_attacker(
        bus,
        take_shell_name,
        r#"for method, args in [("Watch", None), ("ListReading", None), ("EndReader", GLib.Variant("(t)", (1,))),
                     ("Pause", None), ("Paused", None), ("Unwatch", None)]:
    try:
        conn.call_sync("org.contextd.Broker1", "/org/contextd/Broker1", "org.contextd.Indicator1",
            method, args, None, 0, -1, None)
        print("OK")
    except GLib.Error as e:
        print(Gio.DBusError.get_remote_error(e))
"#,
    )
    .lines()
    .map(str::to_owned)
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_shell_may_end_readers_pause_or_hide_the_indicator() {
    with_timeout(60, async {
        let bus = Bus::start();
        // polkit allows the test's own management calls (ListReaders),
        // and would allow the impostor's: Indicator1 asks no polkit, so
        // what refuses it is the shell check alone.
        let sys = Bus::start();
        let _polkit = Mock::polkit_allowing(&sys.address, &["org.contextd.manage-consent"]).await;
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["windows"])]);
        let _d = Daemon::start_with(
            &bus,
            &home,
            &[],
            &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)],
        )
        .await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let _sub = ctx.subscribe(&["windows"]).await.expect("subscribe");
        let consent = Consent1Proxy::new(&conn).await.expect("consent");
        let reader = eventually(10, "the reader is listed", || async {
            consent.list_readers().await.ok()?.into_iter().next()
        })
        .await;
        let not_allowed = vec!["org.contextd.Error.NotAllowed".to_owned(); 6];
        for take_shell_name in [false, true] {
            assert_eq!(
                python_calls(&bus.address, take_shell_name),
                not_allowed,
                "an impostor (owning org.gnome.Shell: {take_shell_name}) reached Indicator1"
            );
        }
        // Nothing it asked for happened: the reader is still there.
        let readers = consent.list_readers().await.expect("ListReaders");
        assert_eq!(readers, vec![reader], "a reader was ended");
        // Sharing is not paused: a granted read is answered.
        ctx.list_windows()
            .await
            .expect("a granted read after the impostor's Pause");
        // And this test program, not a shell either, is refused too.
        let r = conn
            .call_method(
                Some("org.contextd.Broker1"),
                "/org/contextd/Broker1",
                Some("org.contextd.Indicator1"),
                "Pause",
                &(),
            )
            .await;
        assert_eq!(error_name(r), "org.contextd.Error.NotAllowed");
    })
    .await;
}
