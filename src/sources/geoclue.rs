//! GeoClue2 (system bus, `org.freedesktop.GeoClue2`) → category `location`
//! (and its detail `location.precise`, see `core::view::PlaceView`).
//!
//! The broker is a GeoClue client like any app: `Manager.GetClient`, then
//! on its client object `DesktopId` = `contextd` and
//! `RequestedAccuracyLevel` from config.toml (`[location] accuracy`:
//! `country`, `city` (the default), `street` or `exact`), then `Start`, and
//! the `LocationUpdated` signals (each points to a new, immutable
//! `Location` object, read with one `GetAll`).
//!
//! GeoClue asks its agent (the desktop's location permission) whether
//! `contextd` may know the location. A refusal (`Start` fails, typically
//! `org.freedesktop.DBus.Error.AccessDenied`) makes the source
//! `unavailable` with that reason in `ListSources`, and it asks again with
//! the backoff (up to 30 s), so a permission given later is picked up.
//!
//! Bad input: a latitude, longitude or accuracy of the wrong type or out
//! of range makes the location unknown (logged once); an unknown altitude
//! (GeoClue's `-DBL_MAX`) and an empty description are left out.

use futures_util::StreamExt;
use zbus::Connection;
use zbus::wire::{OwnedObjectPath, OwnedVariant, Variant};

use super::SourceContext;
use super::fdo::{
    BusKind, FdoError, PROPERTIES_IFACE, Props, Reader, Service, SignalStream, Warned, as_int,
    as_str, run_service, signal_stream, unwrap_variant,
};
use crate::config::Accuracy;
use crate::core::SourceEvent;
use crate::model::Location;

pub(crate) const NAME: &str = "geoclue";
const BUS_NAME: &str = "org.freedesktop.GeoClue2";
const MANAGER_PATH: &str = "/org/freedesktop/GeoClue2/Manager";
const MANAGER_IFACE: &str = "org.freedesktop.GeoClue2.Manager";
const CLIENT_IFACE: &str = "org.freedesktop.GeoClue2.Client";
const LOCATION_IFACE: &str = "org.freedesktop.GeoClue2.Location";
/// What the broker calls itself to GeoClue (and its agent).
pub(crate) const DESKTOP_ID: &str = "contextd";

impl Accuracy {
    /// GeoClue's `GClueAccuracyLevel`.
    pub fn level(self) -> u32 {
        match self {
            Accuracy::Country => 1,
            Accuracy::City => 4,
            Accuracy::Street => 6,
            Accuracy::Exact => 8,
        }
    }
}

/// Follow GeoClue until cancelled.
pub(crate) async fn run(ctx: SourceContext) {
    let out = ctx.tx.clone();
    let accuracy = ctx.config.file.location.accuracy;
    run_service(ctx, out, GeoClue::new(accuracy)).await
}

struct GeoClue {
    warned: Warned,
    accuracy: Accuracy,
    attached: Option<Attached>,
}

struct Attached {
    conn: Connection,
    owner: String,
    updates: SignalStream,
}

impl std::fmt::Debug for GeoClue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeoClue")
            .field("accuracy", &self.accuracy)
            .field("attached", &self.attached.is_some())
            .finish()
    }
}

impl GeoClue {
    fn new(accuracy: Accuracy) -> Self {
        GeoClue {
            warned: Warned::new(NAME),
            accuracy,
            attached: None,
        }
    }
}

async fn call<B>(
    conn: &Connection,
    owner: &str,
    path: &str,
    iface: &str,
    method: &str,
    body: &B,
) -> Result<zbus::Message, FdoError>
where
    B: serde::Serialize + zbus::wire::DynamicType,
{
    conn.call_method(Some(owner), path, Some(iface), method, body)
        .await
        .map_err(|e| match e {
            // The service answered with an error (GeoClue's agent refusing
            // Start is `org.freedesktop.DBus.Error.AccessDenied`).
            zbus::Error::MethodError(..) | zbus::Error::FDO(_) => {
                FdoError::Service(format!("{method} failed: {e}"))
            }
            other => other.into(),
        })
}

/// The location at `path`, or `None` when it is unusable (logged once).
async fn read_location(
    conn: &Connection,
    owner: &str,
    path: &str,
    warned: &Warned,
) -> Result<Option<Location>, FdoError> {
    if path == "/" {
        return Ok(None);
    }
    let reply = call(
        conn,
        owner,
        path,
        PROPERTIES_IFACE,
        "GetAll",
        &(LOCATION_IFACE,),
    )
    .await?;
    let props: Props = reply
        .body()
        .deserialize()
        .map_err(|e| FdoError::Service(format!("{path}: GetAll returned a bad reply: {e}")))?;
    Ok(location_from(&props, warned))
}

/// A `Location` object's properties as the model's location.
pub(crate) fn location_from(props: &Props, warned: &Warned) -> Option<Location> {
    let mut r = Reader {
        props,
        warned,
        what: LOCATION_IFACE,
    };
    let latitude = r.f64("Latitude");
    let longitude = r.f64("Longitude");
    let accuracy = r.f64("Accuracy");
    let (Some(latitude), Some(longitude), Some(accuracy)) = (latitude, longitude, accuracy) else {
        return None;
    };
    for (name, v, range) in [
        ("Latitude", latitude, 90.0),
        ("Longitude", longitude, 180.0),
    ] {
        if !(-range..=range).contains(&v) {
            r.absurd(name, format_args!("is {v}, outside ±{range}"));
            return None;
        }
    }
    if !(accuracy.is_finite() && accuracy >= 0.0) {
        r.absurd("Accuracy", format_args!("is {accuracy}"));
        return None;
    }
    // Unknown is -DBL_MAX; below the Dead Sea or above the air, nonsense.
    let altitude = if r.has("Altitude") {
        r.f64("Altitude")
            .filter(|a| (-11_000.0..=100_000.0).contains(a))
    } else {
        None
    };
    let description = if r.has("Description") {
        r.str("Description", "s").filter(|d| !d.trim().is_empty())
    } else {
        None
    };
    let timestamp = props
        .get("Timestamp")
        .and_then(|v| match unwrap_variant(v) {
            Variant::Structure(s) => match s.fields() {
                [secs, usecs] => Some((as_int(secs)?, as_int(usecs)?)),
                _ => None,
            },
            _ => None,
        })
        .and_then(|(s, us)| {
            chrono::DateTime::from_timestamp(
                i64::try_from(s).ok()?,
                u32::try_from(us.clamp(0, 999_999) * 1000).ok()?,
            )
        });
    Some(Location {
        latitude,
        longitude,
        accuracy,
        altitude,
        description,
        timestamp,
    })
}

impl Service for GeoClue {
    const SOURCE: &'static str = NAME;
    const BUS_NAME: &'static str = BUS_NAME;
    const BUS: BusKind = BusKind::System;

    fn gone(&self) -> SourceEvent {
        SourceEvent::Location { location: None }
    }

    async fn attach(&mut self, conn: &Connection, owner: &str) -> Result<SourceEvent, FdoError> {
        let reply = call(conn, owner, MANAGER_PATH, MANAGER_IFACE, "GetClient", &()).await?;
        let client: OwnedObjectPath = reply
            .body()
            .deserialize()
            .map_err(|e| FdoError::Service(format!("GetClient returned a bad reply: {e}")))?;
        let client = client.as_str().to_owned();
        let set = |name: &'static str, v: Variant<'static>| {
            let client = client.clone();
            async move {
                call(
                    conn,
                    owner,
                    &client,
                    PROPERTIES_IFACE,
                    "Set",
                    &(CLIENT_IFACE, name, v),
                )
                .await
            }
        };
        set("DesktopId", Variant::from(DESKTOP_ID)).await?;
        set(
            "RequestedAccuracyLevel",
            Variant::from(self.accuracy.level()),
        )
        .await?;
        // Subscribed before Start, so that no update falls in between.
        let updates =
            signal_stream(conn, owner, Some(&client), CLIENT_IFACE, "LocationUpdated").await?;
        call(conn, owner, &client, CLIENT_IFACE, "Start", &()).await?;
        let reply = call(
            conn,
            owner,
            &client,
            PROPERTIES_IFACE,
            "Get",
            &(CLIENT_IFACE, "Location"),
        )
        .await?;
        let current = reply
            .body()
            .deserialize::<OwnedVariant>()
            .ok()
            .and_then(|v| as_str(&v).map(str::to_owned))
            .unwrap_or_else(|| "/".to_owned());
        let location = read_location(conn, owner, &current, &self.warned).await?;
        self.attached = Some(Attached {
            conn: conn.clone(),
            owner: owner.to_owned(),
            updates,
        });
        Ok(SourceEvent::Location { location })
    }

    async fn next(&mut self) -> Result<SourceEvent, FdoError> {
        let Some(a) = self.attached.as_mut() else {
            return Err(FdoError::Service("not attached".into()));
        };
        loop {
            let msg = match a.updates.next().await {
                Some(Ok(m)) => m,
                Some(Err(_)) => continue,
                None => return Err(FdoError::Closed),
            };
            match msg
                .body()
                .deserialize::<(OwnedObjectPath, OwnedObjectPath)>()
            {
                Ok((_, new)) => {
                    let location =
                        read_location(&a.conn, &a.owner, new.as_str(), &self.warned).await?;
                    return Ok(SourceEvent::Location { location });
                }
                Err(e) => {
                    self.warned.warn(
                        "LocationUpdated: body",
                        format_args!("LocationUpdated with a bad body ({e}); skipped"),
                    );
                }
            }
        }
    }

    fn detach(&mut self) {
        self.attached = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: Vec<(&str, Variant<'static>)>) -> Props {
        pairs
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_owned(), OwnedVariant::try_from(v).ok()?)))
            .collect()
    }

    #[test]
    fn locations_are_read_tolerantly() {
        let w = Warned::new("test");
        let l = location_from(
            &props(vec![
                ("Latitude", Variant::from(47.376954)),
                ("Longitude", Variant::from(8.541694)),
                ("Accuracy", Variant::from(25.0)),
                ("Altitude", Variant::from(-f64::MAX)),
                ("Description", Variant::from("")),
                ("Timestamp", Variant::from((1_700_000_000u64, 500_000u64))),
            ]),
            &w,
        )
        .expect("a location");
        assert_eq!(l.latitude, 47.376954);
        assert_eq!(l.altitude, None);
        assert_eq!(l.description, None);
        assert_eq!(
            l.timestamp.map(|t| t.timestamp_millis()),
            Some(1_700_000_000_500)
        );
        let bad = props(vec![
            ("Latitude", Variant::from(147.0)),
            ("Longitude", Variant::from(8.0)),
            ("Accuracy", Variant::from(25.0)),
        ]);
        assert_eq!(location_from(&bad, &w), None);
        let wrong = props(vec![
            ("Latitude", Variant::from("47")),
            ("Longitude", Variant::from(8.0)),
            ("Accuracy", Variant::from(25.0)),
        ]);
        assert_eq!(location_from(&wrong, &w), None);
        assert_eq!(Accuracy::default().level(), 4);
    }
}
