//! The list replies written in one pass (`dbus::served`) refuse bad
//! arguments exactly as zbus's `#[interface]` methods do: the same
//! `org.freedesktop.DBus.Error.InvalidArgs`, the same description (what
//! zvariant says reading the body as the method's arguments), and nothing
//! read, audited or answered otherwise.
//!
//! Written as the attack on an interception that skips the argument
//! reader: a caller sends `GetActiveWindow("x")` (or `GetProvided` with a
//! number, `History1.Query` with strings where times go) and gets an
//! answer, or a different error, from a method zbus would have refused.

use crate::common;

use common::*;
use serde::Serialize;
use zbus::DBusError;
use zbus::wire::{DynamicDeserialize, DynamicType};

const CONTEXT1: &str = "org.contextd.Context1";
const CONSENT1: &str = "org.contextd.Consent1";
const HISTORY1: &str = "org.contextd.History1";

/// What the macro replies to `body` sent to a method taking `A`: the
/// description is zvariant's, reading that body as `A`.
fn macro_refusal<A, B>(member: &str, body: &B) -> String
where
    A: for<'d> DynamicDeserialize<'d>,
    B: Serialize + DynamicType,
{
    let msg = zbus::Message::method_call(PATH, member)
        .build(body)
        .expect("body");
    match msg.body().deserialize::<A>() {
        Ok(_) => panic!("{member}: the wrong body reads as the arguments"),
        Err(e) => e.to_string(),
    }
}

/// Call `iface.member(body)` and assert the macro's refusal of `A`.
async fn refused_as_zbus_refuses<A, B>(conn: &zbus::Connection, iface: &str, member: &str, body: B)
where
    A: for<'d> DynamicDeserialize<'d>,
    B: Serialize + DynamicType,
{
    let want = macro_refusal::<A, B>(member, &body);
    let got = conn
        .call_method(Some(BUS_NAME), PATH, Some(iface), member, &body)
        .await;
    let (name, description) = match got {
        Ok(reply) => panic!("{iface}.{member} answered a wrong body: {reply:?}"),
        Err(zbus::Error::FDO(e)) => (e.name().to_string(), e.description().map(str::to_owned)),
        Err(zbus::Error::MethodError(name, description, _)) => (name.to_string(), description),
        Err(e) => panic!("{iface}.{member}: not an error reply: {e:?}"),
    };
    assert_eq!(
        name, "org.freedesktop.DBus.Error.InvalidArgs",
        "{iface}.{member}: {description:?}"
    );
    assert_eq!(
        description.as_deref(),
        Some(want.as_str()),
        "{iface}.{member}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context1_replies_refuse_bad_arguments_as_zbus_does() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["*"])]);
        let mut replay = Replay::new(&home);
        replay.send(&window_line(
            "w1",
            "org.gnome.TextEditor",
            "notes.txt",
            true,
        ));
        let _d = Daemon::start(&bus, &home, &["--replay", &replay.arg()]).await;
        let conn = bus.connect().await;

        // Every method of no arguments: a string, then a number.
        for member in [
            "GetSnapshot",
            "ListWindows",
            "GetActiveWindow",
            "GetMedia",
            "GetSelection",
            "GetLocation",
            "ListRecentDocuments",
            "ListSources",
            "ListCategories",
        ] {
            refused_as_zbus_refuses::<(), _>(&conn, CONTEXT1, member, ("x",)).await;
            refused_as_zbus_refuses::<(), _>(&conn, CONTEXT1, member, (7u32,)).await;
        }
        // A kind that is a number, and none.
        refused_as_zbus_refuses::<(String,), _>(&conn, CONTEXT1, "GetProvided", (7u32,)).await;
        refused_as_zbus_refuses::<(String,), _>(&conn, CONTEXT1, "GetProvided", ()).await;
        refused_as_zbus_refuses::<(String, u32, String), _>(
            &conn,
            CONTEXT1,
            "GetProvidedPage",
            ("kind", "10", ""),
        )
        .await;

        for member in [
            "ListApps",
            "ListGrants",
            "ListProviders",
            "ListPending",
            "ListReaders",
        ] {
            refused_as_zbus_refuses::<(), _>(&conn, CONSENT1, member, ("x",)).await;
        }
        refused_as_zbus_refuses::<(i64, i64, String, u32), _>(
            &conn,
            CONSENT1,
            "GetAudit",
            (0i64, 0i64, 7u32, 10u32),
        )
        .await;
        refused_as_zbus_refuses::<(i64, i64, Vec<String>, Vec<String>, u32, String), _>(
            &conn,
            HISTORY1,
            "Query",
            ("0", "0", vec!["windows"], Vec::<String>::new(), 10u32, ""),
        )
        .await;
        refused_as_zbus_refuses::<(i64, i64), _>(&conn, HISTORY1, "Summary", (0i64,)).await;

        // The right arguments still answer, after all those refusals.
        let reply = conn
            .call_method(Some(BUS_NAME), PATH, Some(CONTEXT1), "ListCategories", &())
            .await
            .expect("ListCategories");
        assert_eq!(reply.body().signature().to_string(), "aa{sv}");
    })
    .await;
}
