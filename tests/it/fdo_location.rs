//! `location` follows GeoClue2 (the python-dbusmock template
//! `tests/fdo/geoclue2.py` on a private system bus): the broker is a
//! GeoClue client (desktop id `contextd`, the accuracy level of
//! `[location] accuracy`); a reader granted `location` gets a city-level
//! schema.org Place, the coordinates and the description only with
//! `location.precise`; GeoClue's agent refusing makes the source
//! unavailable with the reason, and a later permission is picked up.

use crate::common;
use crate::fdo;

use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::Context1Proxy;
use fdo::*;
use serde_json::Value;
use zbus::wire::OwnedVariant;

const CLIENT_PATH: &str = "/org/freedesktop/GeoClue2/Client/1";
const CLIENT_IFACE: &str = "org.freedesktop.GeoClue2.Client";

async fn set_location(mock: &Mock, sys: &zbus::Connection, lat: f64, lon: f64, desc: &str) {
    mock.call(
        sys,
        GEOCLUE_MANAGER,
        MOCK_IFACE,
        "SetLocation",
        &(lat, lon, 25.0f64, desc),
    )
    .await;
}

async fn location(ctx: &Context1Proxy<'_>) -> zbus::Result<Value> {
    ctx.get_location().await.map(|d| dict_to_json(&d))
}

async fn client_prop(mock: &Mock, sys: &zbus::Connection, name: &str) -> OwnedVariant {
    mock.call(sys, CLIENT_PATH, PROPS_IFACE, "Get", &(CLIENT_IFACE, name))
        .await
        .body()
        .deserialize()
        .expect("a property")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_city_level_place_and_coordinates_only_with_location_precise() {
    with_timeout(120, async {
        let buses = Buses::start();
        let geoclue = Mock::geoclue(&buses.system.address, "{}").await;
        let sys = buses.system.connect().await;
        set_location(&geoclue, &sys, 47.376954, 8.541694, "Kaserne, Zürich").await;
        let home = Home::new();
        home.write_config("[consent]\nundecided = \"deny\"\n\n[location]\naccuracy = \"exact\"\n");
        home.write_policy(&[(&my_app_id(), &["location"])]);
        let _d = buses.daemon(&home, &[]).await;
        let conn = buses.session.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("Context1");
        until_source(&conn, "geoclue", true).await;

        // The broker told GeoClue who it is and how precisely it asks.
        let id = client_prop(&geoclue, &sys, "DesktopId").await;
        assert_eq!(id.downcast_ref::<&str>().ok(), Some("contextd"));
        let level = client_prop(&geoclue, &sys, "RequestedAccuracyLevel").await;
        assert_eq!(level.downcast_ref::<u32>().ok(), Some(8), "exact");

        // `location` alone: a city-level Place.
        let place = eventually(10, "a location", || async { location(&ctx).await.ok() }).await;
        assert_eq!(place["@type"], "Place", "{place}");
        assert_eq!(place["geo"]["latitude"], 47.4, "{place}");
        assert_eq!(place["geo"]["longitude"], 8.5, "{place}");
        assert!(place["accuracy"].as_f64() >= Some(10_000.0), "{place}");
        assert!(
            place.get("updated").is_none(),
            "no time of the fix: {place}"
        );
        let text = place.to_string();
        assert!(
            !text.contains("47.37") && !text.contains("Kaserne"),
            "{text}"
        );
        let snap = snapshot(&conn).await;
        assert_eq!(snap["location"]["geo"]["latitude"], 47.4, "{snap}");
        assert!(!snap.to_string().contains("Kaserne"), "{snap}");
        assert!(
            snap["withheld"]
                .as_array()
                .is_some_and(|w| w.iter().any(|c| c == "location.precise")),
            "{snap}"
        );

        // A move within the city is no change at this level; a move to
        // another city is a Changed signal, still city-level (the first
        // one received, so the first move sent none).
        let mut changes = Changes::subscribe(&conn, &["location"]).await;
        set_location(&geoclue, &sys, 47.3771, 8.5418, "Kasernenareal, Zürich").await;
        set_location(&geoclue, &sys, 46.948, 7.4474, "Bundesplatz, Bern").await;
        let (data, _) = changes.until(10, "the move", |c, _| c == "location").await;
        assert_eq!(data["location"]["geo"]["latitude"], 46.9, "{data}");
        assert!(!data.to_string().contains("Bundesplatz"), "{data}");

        // With `location.precise`: the coordinates and the description.
        home.write_policy(&[(&my_app_id(), &["location.precise"])]);
        let place = eventually(10, "the precise location", || async {
            location(&ctx)
                .await
                .ok()
                .filter(|p| p["geo"]["latitude"] == 46.948)
        })
        .await;
        assert_eq!(place["geo"]["longitude"], 7.4474, "{place}");
        assert_eq!(place["name"], "Bundesplatz, Bern", "{place}");
        assert_eq!(place["accuracy"], 25.0, "{place}");

        // Without a grant: refused.
        home.write_policy(&[]);
        let e = eventually(10, "refused", || async { location(&ctx).await.err() }).await;
        assert!(e.to_string().contains("NotAllowed"), "{e}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_refusing_makes_the_source_unavailable_with_the_reason() {
    with_timeout(120, async {
        let buses = Buses::start();
        let geoclue = Mock::geoclue(&buses.system.address, r#"{"allowed": false}"#).await;
        let sys = buses.system.connect().await;
        set_location(&geoclue, &sys, 47.376954, 8.541694, "Kaserne, Zürich").await;
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["location.precise"])]);
        let _d = buses.daemon(&home, &[]).await;
        let conn = buses.session.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("Context1");

        let src = eventually(15, "geoclue refused", || async {
            source(&conn, "geoclue").await.filter(|s| {
                s["available"] == false
                    && s["last_error"]
                        .as_str()
                        .is_some_and(|e| e.contains("Start"))
            })
        })
        .await;
        let why = src["last_error"].as_str().unwrap_or("");
        assert!(
            why.contains("AccessDenied") && why.contains("disallowed"),
            "{src}"
        );
        let (out, _) = contextctl(&buses, &home, &["sources"]);
        let line = out
            .lines()
            .find(|l| l.contains("geoclue"))
            .unwrap_or_else(|| panic!("no geoclue in contextctl sources:\n{out}"));
        assert!(
            line.contains("unavailable") && line.contains("AccessDenied"),
            "{out}"
        );
        let e = location(&ctx).await.expect_err("no location");
        assert!(e.to_string().contains("Unavailable"), "{e}");

        // The user allows it in their desktop: picked up on the next try.
        geoclue
            .call(
                &sys,
                GEOCLUE_MANAGER,
                MOCK_IFACE,
                "SetAgentAllows",
                &(true,),
            )
            .await;
        until_source(&conn, "geoclue", true).await;
        let place = eventually(40, "a location", || async { location(&ctx).await.ok() }).await;
        assert_eq!(place["geo"]["latitude"], 47.376954, "{place}");
    })
    .await;
}
