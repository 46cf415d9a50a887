//! NetworkManager (system bus, `org.freedesktop.NetworkManager`) →
//! category `network`: `Connectivity`, `Metered` and the type of the
//! primary connection (`PrimaryConnectionType`, else the `Type` of the
//! active connection `PrimaryConnection` points to); with `network.name`,
//! the SSID of the access point that connection uses (`SpecificObject` →
//! `org.freedesktop.NetworkManager.AccessPoint.Ssid`).
//!
//! The manager, the primary active connection and its access point are
//! each followed through `PropertiesChanged`; when the manager's
//! `PrimaryConnection` or the connection's `SpecificObject` changes, the
//! watch moves to the new object.
//!
//! Bad input: unknown connectivity values read as `unknown`, a connection
//! type that is not a plain name reads as `other`, an SSID that is not
//! UTF-8 is shown with replacement characters, one longer than 802.11's 32
//! bytes is cut; each is logged once.

use zbus::Connection;

use super::SourceContext;
use super::fdo::{BusKind, FdoError, Props, PropsWatch, Reader, Service, Warned, run_service};
use crate::core::SourceEvent;
use crate::model::Network;

pub(crate) const NAME: &str = "networkmanager";
const BUS_NAME: &str = "org.freedesktop.NetworkManager";
const PATH: &str = "/org/freedesktop/NetworkManager";
const IFACE: &str = "org.freedesktop.NetworkManager";
const ACTIVE_IFACE: &str = "org.freedesktop.NetworkManager.Connection.Active";
const AP_IFACE: &str = "org.freedesktop.NetworkManager.AccessPoint";
const AP_PREFIX: &str = "/org/freedesktop/NetworkManager/AccessPoint/";
/// 802.11 limits an SSID to 32 bytes.
pub(crate) const MAX_SSID_BYTES: usize = 32;

/// Follow NetworkManager until cancelled.
pub(crate) async fn run(ctx: SourceContext) {
    let out = ctx.tx.clone();
    run_service(ctx, out, Nm::default()).await
}

#[derive(Debug)]
struct Nm {
    warned: Warned,
    conn: Option<Connection>,
    owner: String,
    manager: Option<PropsWatch>,
    active: Option<PropsWatch>,
    ap: Option<PropsWatch>,
}

impl Default for Nm {
    fn default() -> Self {
        Nm {
            warned: Warned::new(NAME),
            conn: None,
            owner: String::new(),
            manager: None,
            active: None,
            ap: None,
        }
    }
}

/// An object path property that names an object (`/` means none).
fn object_path(props: Option<&Props>, name: &str, warned: &Warned, what: &str) -> Option<String> {
    let props = props?;
    if !props.contains_key(name) {
        return None;
    }
    Reader {
        props,
        warned,
        what,
    }
    .str(name, "o")
    .filter(|p| p.starts_with('/') && p != "/")
}

impl Nm {
    /// Move the active-connection and access-point watches to what the
    /// manager and the connection point to now.
    async fn follow_children(&mut self) {
        let Some(conn) = self.conn.clone() else {
            return;
        };
        let primary = object_path(
            self.manager.as_ref().map(|m| &m.props),
            "PrimaryConnection",
            &self.warned,
            IFACE,
        );
        if self.active.as_ref().map(|w| w.path()) != primary.as_deref() {
            self.active = None;
            if let Some(p) = &primary {
                self.active = self.watch(&conn, p, ACTIVE_IFACE).await;
            }
        }
        let ap = object_path(
            self.active.as_ref().map(|m| &m.props),
            "SpecificObject",
            &self.warned,
            ACTIVE_IFACE,
        )
        .filter(|p| p.starts_with(AP_PREFIX));
        if self.ap.as_ref().map(|w| w.path()) != ap.as_deref() {
            self.ap = None;
            if let Some(p) = &ap {
                self.ap = self.watch(&conn, p, AP_IFACE).await;
            }
        }
    }

    /// A watch on a child object; it may vanish between the manager's
    /// signal and our `GetAll`, which is not an error of the source.
    async fn watch(&self, conn: &Connection, path: &str, iface: &str) -> Option<PropsWatch> {
        match PropsWatch::new(conn, &self.owner, path, iface).await {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::debug!(source = NAME, path, "cannot follow {iface}: {e}");
                None
            }
        }
    }

    fn event(&self) -> SourceEvent {
        let empty = Props::new();
        SourceEvent::Network {
            network: Some(network_from(
                self.manager.as_ref().map_or(&empty, |w| &w.props),
                self.active.as_ref().map(|w| &w.props),
                self.ap.as_ref().map(|w| &w.props),
                &self.warned,
            )),
        }
    }
}

impl Service for Nm {
    const SOURCE: &'static str = NAME;
    const BUS_NAME: &'static str = BUS_NAME;
    const BUS: BusKind = BusKind::System;

    fn gone(&self) -> SourceEvent {
        SourceEvent::Network { network: None }
    }

    async fn attach(&mut self, conn: &Connection, owner: &str) -> Result<SourceEvent, FdoError> {
        self.conn = Some(conn.clone());
        self.owner = owner.to_owned();
        self.manager = Some(PropsWatch::new(conn, owner, PATH, IFACE).await?);
        self.follow_children().await;
        Ok(self.event())
    }

    async fn next(&mut self) -> Result<SourceEvent, FdoError> {
        let Some(manager) = self.manager.as_mut() else {
            return Err(FdoError::Service("not attached".into()));
        };
        let warned = &self.warned;
        let active = self.active.as_mut();
        let ap = self.ap.as_mut();
        tokio::select! {
            r = manager.changed(warned) => { r?; }
            Some(r) = async { match active { Some(w) => Some(w.changed(warned).await), None => None } } => {
                // A child's stream ending is the connection closing too.
                r?;
            }
            Some(r) = async { match ap { Some(w) => Some(w.changed(warned).await), None => None } } => { r?; }
        }
        self.follow_children().await;
        Ok(self.event())
    }

    fn detach(&mut self) {
        self.manager = None;
        self.active = None;
        self.ap = None;
        self.conn = None;
    }
}

/// `NMConnectivityState` as a name.
pub(crate) fn connectivity_name(n: Option<i128>) -> Option<&'static str> {
    Some(match n? {
        0 => "unknown",
        1 => "none",
        2 => "portal",
        3 => "limited",
        4 => "full",
        _ => return None,
    })
}

/// `NMMetered`: yes and guess-yes are metered.
pub(crate) fn is_metered(n: i128) -> Option<bool> {
    match n {
        1 | 3 => Some(true),
        0 | 2 | 4 => Some(false),
        _ => None,
    }
}

/// A connection type (`802-11-wireless`, `vpn`, ...) as the short name
/// apps want; `None` for something that is not a connection type name.
pub(crate) fn connection_type(t: &str) -> Option<String> {
    let plain = !t.is_empty()
        && t.len() <= 64
        && t.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !plain {
        return None;
    }
    Some(
        match t {
            "802-11-wireless" | "wifi" => "wifi",
            "802-3-ethernet" | "ethernet" => "ethernet",
            "gsm" | "cdma" => "mobile",
            "802-11-olpc-mesh" => "mesh",
            other => other,
        }
        .to_owned(),
    )
}

/// An SSID as text: invalid UTF-8 replaced, control characters dropped,
/// at most 32 bytes of input; `None` when empty.
pub(crate) fn ssid_text(bytes: &[u8], warned: &Warned) -> Option<String> {
    let bytes = if bytes.len() > MAX_SSID_BYTES {
        warned.warn(
            "Ssid: long",
            format_args!(
                "an SSID of {} bytes (802.11 allows {MAX_SSID_BYTES}); cut",
                bytes.len()
            ),
        );
        &bytes[..MAX_SSID_BYTES]
    } else {
        bytes
    };
    let s: String = String::from_utf8_lossy(bytes)
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    (!s.is_empty()).then_some(s)
}

/// The network state from the manager's, the primary connection's and its
/// access point's properties.
pub(crate) fn network_from(
    manager: &Props,
    active: Option<&Props>,
    ap: Option<&Props>,
    warned: &Warned,
) -> Network {
    let mut r = Reader {
        props: manager,
        warned,
        what: IFACE,
    };
    let raw = r.int("Connectivity", "u");
    let connectivity = connectivity_name(raw).unwrap_or_else(|| {
        if let Some(n) = raw {
            r.absurd(
                "Connectivity",
                format_args!("is {n}, not a connectivity state"),
            );
        }
        "unknown"
    });
    let metered = match r.int("Metered", "u") {
        Some(n) => is_metered(n).unwrap_or_else(|| {
            r.absurd("Metered", format_args!("is {n}, not a metered state"));
            false
        }),
        None => false,
    };
    let mut type_name = if r.has("PrimaryConnectionType") {
        r.str("PrimaryConnectionType", "s")
            .filter(|t| !t.is_empty())
    } else {
        None
    };
    if type_name.is_none()
        && let Some(a) = active
    {
        type_name = Reader {
            props: a,
            warned,
            what: ACTIVE_IFACE,
        }
        .str("Type", "s")
        .filter(|t| !t.is_empty());
    }
    let primary_type = type_name.map(|t| {
        connection_type(&t).unwrap_or_else(|| {
            warned.warn(
                "Type: value",
                "the primary connection's type is not a connection type name; shown as 'other'",
            );
            "other".into()
        })
    });
    let ssid = ap.and_then(|ap| {
        let bytes = Reader {
            props: ap,
            warned,
            what: AP_IFACE,
        }
        .bytes("Ssid")?;
        ssid_text(&bytes, warned)
    });
    Network {
        connectivity: connectivity.to_owned(),
        metered,
        primary_type,
        ssid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zbus::wire::{ObjectPath, OwnedVariant, Str};

    fn props(kv: Vec<(&str, OwnedVariant)>) -> Props {
        kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
    }

    fn bytes(b: &[u8]) -> OwnedVariant {
        OwnedVariant::try_from(zbus::wire::Variant::from(b.to_vec())).expect("ay")
    }

    #[test]
    fn reads_a_metered_wifi() {
        let manager = props(vec![
            ("Connectivity", 4u32.into()),
            ("Metered", 3u32.into()),
            (
                "PrimaryConnection",
                ObjectPath::from_static_str("/org/freedesktop/NetworkManager/ActiveConnection/1")
                    .expect("path")
                    .into(),
            ),
        ]);
        let active = props(vec![("Type", Str::from("802-11-wireless").into())]);
        let ap = props(vec![("Ssid", bytes(b"Hotel Alpenblick"))]);
        let w = Warned::new("test");
        let n = network_from(&manager, Some(&active), Some(&ap), &w);
        assert_eq!(
            n,
            Network {
                connectivity: "full".into(),
                metered: true,
                primary_type: Some("wifi".into()),
                ssid: Some("Hotel Alpenblick".into()),
            }
        );
        assert_eq!(w.count(), 0);
    }

    #[test]
    fn bad_values_read_as_unknown_and_warn_once() {
        let manager = props(vec![
            ("Connectivity", 77u32.into()),
            ("Metered", Str::from("yes").into()),
            ("PrimaryConnectionType", Str::from("Evil\ntype").into()),
        ]);
        let ap = props(vec![("Ssid", bytes(&[0xffu8; 40]))]);
        let w = Warned::new("test");
        let n = network_from(&manager, None, Some(&ap), &w);
        assert_eq!(n.connectivity, "unknown");
        assert!(!n.metered);
        assert_eq!(n.primary_type.as_deref(), Some("other"));
        let ssid = n.ssid.expect("shown with replacement characters");
        assert!(ssid.chars().all(|c| c == '\u{fffd}'), "{ssid}");
        let count = w.count();
        assert_eq!(count, 4);
        network_from(&manager, None, Some(&ap), &w);
        assert_eq!(w.count(), count);
    }

    #[test]
    fn names_and_types() {
        assert_eq!(connectivity_name(Some(2)), Some("portal"));
        assert_eq!(connectivity_name(None), None);
        assert_eq!(is_metered(4), Some(false));
        assert_eq!(connection_type("vpn"), Some("vpn".into()));
        assert_eq!(connection_type("gsm"), Some("mobile".into()));
        assert_eq!(connection_type(""), None);
        let w = Warned::new("test");
        assert_eq!(ssid_text(b"", &w), None);
        assert_eq!(ssid_text(b"a\x07b", &w).as_deref(), Some("ab"));
    }
}
