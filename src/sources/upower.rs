//! UPower (system bus, `org.freedesktop.UPower`) → category `power`:
//! `OnBattery` and (where there is a lid, `LidIsPresent`) `LidIsClosed`
//! of the daemon, and `Percentage`, `State`, `TimeToEmpty`,
//! `TimeToFull` and `WarningLevel` of its *display device* (the composite
//! battery that desktop shells show, from `GetDisplayDevice`).
//!
//! Bad input: a value of the wrong type, a percentage outside 0..=100 or
//! not a number, a negative or absurdly long time, an unknown state or
//! warning level is logged once and left out; the rest is shown.

use zbus::Connection;
use zbus::wire::OwnedObjectPath;

use super::SourceContext;
use super::fdo::{BusKind, FdoError, Props, PropsWatch, Reader, Service, Warned, run_service};
use crate::core::SourceEvent;
use crate::model::Power;

pub(crate) const NAME: &str = "upower";
const BUS_NAME: &str = "org.freedesktop.UPower";
const PATH: &str = "/org/freedesktop/UPower";
const IFACE: &str = "org.freedesktop.UPower";
const DEVICE_IFACE: &str = "org.freedesktop.UPower.Device";
/// Where UPower ≥ 0.99 puts the display device, if `GetDisplayDevice` fails.
const DISPLAY_DEVICE: &str = "/org/freedesktop/UPower/devices/DisplayDevice";

/// Times beyond this are estimates gone wrong (a battery that barely
/// discharges), not information.
pub(crate) const MAX_TIME_S: i128 = 7 * 24 * 3600;

#[zbus::proxy(
    interface = "org.freedesktop.UPower",
    default_path = "/org/freedesktop/UPower"
)]
trait UPowerDaemon {
    fn get_display_device(&self) -> zbus::Result<OwnedObjectPath>;
}

/// Follow UPower until cancelled.
pub(crate) async fn run(ctx: SourceContext) {
    let out = ctx.tx.clone();
    run_service(ctx, out, UPower::default()).await
}

#[derive(Debug)]
struct UPower {
    warned: Warned,
    daemon: Option<PropsWatch>,
    device: Option<PropsWatch>,
}

impl Default for UPower {
    fn default() -> Self {
        UPower {
            warned: Warned::new(NAME),
            daemon: None,
            device: None,
        }
    }
}

impl UPower {
    fn event(&mut self) -> SourceEvent {
        let empty = Props::new();
        let daemon = self.daemon.as_ref().map_or(&empty, |w| &w.props);
        let device = self.device.as_ref().map(|w| &w.props);
        SourceEvent::Power {
            power: Some(power_from(daemon, device, &self.warned)),
        }
    }
}

impl Service for UPower {
    const SOURCE: &'static str = NAME;
    const BUS_NAME: &'static str = BUS_NAME;
    const BUS: BusKind = BusKind::System;

    fn gone(&self) -> SourceEvent {
        SourceEvent::Power { power: None }
    }

    async fn attach(&mut self, conn: &Connection, owner: &str) -> Result<SourceEvent, FdoError> {
        self.daemon = Some(PropsWatch::new(conn, owner, PATH, IFACE).await?);
        let proxy = UPowerDaemonProxy::builder(conn)
            .destination(owner.to_owned())
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await?;
        let path = match proxy.get_display_device().await {
            Ok(p) => p.to_string(),
            Err(e) => {
                self.warned.warn(
                    "GetDisplayDevice",
                    format_args!("GetDisplayDevice failed ({e}); trying {DISPLAY_DEVICE}"),
                );
                DISPLAY_DEVICE.to_owned()
            }
        };
        self.device = match PropsWatch::new(conn, owner, &path, DEVICE_IFACE).await {
            Ok(w) => Some(w),
            Err(e) => {
                // An old UPower without a display device: on battery is
                // still worth showing.
                self.warned.warn(
                    "display device",
                    format_args!("no display device at {path} ({e}); showing only OnBattery"),
                );
                None
            }
        };
        Ok(self.event())
    }

    async fn next(&mut self) -> Result<SourceEvent, FdoError> {
        let (Some(daemon), device) = (self.daemon.as_mut(), self.device.as_mut()) else {
            return Err(FdoError::Service("not attached".into()));
        };
        let warned = &self.warned;
        tokio::select! {
            r = daemon.changed(warned) => { r?; }
            r = async {
                match device {
                    Some(d) => d.changed(warned).await,
                    None => std::future::pending().await,
                }
            } => { r?; }
        }
        Ok(self.event())
    }

    fn detach(&mut self) {
        self.daemon = None;
        self.device = None;
    }
}

/// `UpDeviceState` as a name; `None` for unknown (0) and invalid values.
pub(crate) fn state_name(n: i128) -> Option<&'static str> {
    Some(match n {
        1 => "charging",
        2 => "discharging",
        3 => "empty",
        4 => "fully-charged",
        5 => "pending-charge",
        6 => "pending-discharge",
        _ => return None,
    })
}

/// `UpDeviceLevel` as a name; `None` for unknown (0) and invalid values.
pub(crate) fn warning_level_name(n: i128) -> Option<&'static str> {
    Some(match n {
        1 => "none",
        2 => "discharging",
        3 => "low",
        4 => "critical",
        5 => "action",
        _ => return None,
    })
}

/// A percentage if it is one (finite, 0..=100).
pub(crate) fn valid_percentage(p: f64) -> Option<f64> {
    (p.is_finite() && (0.0..=100.0).contains(&p)).then_some(p)
}

/// A time in seconds: `Ok(None)` for 0 (UPower's "unknown"), `Err` for a
/// negative or absurdly long one.
pub(crate) fn valid_time(s: i128) -> Result<Option<u64>, &'static str> {
    match s {
        0 => Ok(None),
        s if s < 0 => Err("is negative"),
        s if s > MAX_TIME_S => Err("is longer than a week"),
        s => Ok(u64::try_from(s).ok()),
    }
}

/// The power state from the daemon's and the display device's properties.
pub(crate) fn power_from(daemon: &Props, device: Option<&Props>, warned: &Warned) -> Power {
    let mut d = Reader {
        props: daemon,
        warned,
        what: IFACE,
    };
    let mut power = Power {
        on_battery: d.bool("OnBattery").unwrap_or(false),
        ..Power::default()
    };
    // A machine without a lid (a desktop) says LidIsPresent false and
    // LidIsClosed false: that is no lid, not an open one.
    if d.has("LidIsPresent") && d.bool("LidIsPresent") == Some(true) {
        power.lid_closed = d.bool("LidIsClosed");
    }
    let Some(device) = device else {
        return power;
    };
    let mut r = Reader {
        props: device,
        warned,
        what: DEVICE_IFACE,
    };
    // No battery (a desktop): nothing more to say.
    if r.has("IsPresent") && r.bool("IsPresent") == Some(false) {
        return power;
    }
    if let Some(p) = r.f64("Percentage") {
        power.percentage = valid_percentage(p);
        if power.percentage.is_none() {
            r.absurd("Percentage", format_args!("is {p}, not in 0..=100"));
        }
    }
    if let Some(n) = r.int("State", "u") {
        power.state = state_name(n).map(str::to_owned);
        if power.state.is_none() && n != 0 {
            r.absurd("State", format_args!("is {n}, not a UPower state"));
        }
    }
    for (name, slot) in [
        ("TimeToEmpty", &mut power.time_to_empty_s),
        ("TimeToFull", &mut power.time_to_full_s),
    ] {
        if let Some(n) = r.int(name, "x") {
            match valid_time(n) {
                Ok(t) => *slot = t,
                Err(why) => r.absurd(name, format_args!("{why} ({n} s)")),
            }
        }
    }
    if let Some(n) = r.int("WarningLevel", "u") {
        power.warning_level = warning_level_name(n).map(str::to_owned);
        if power.warning_level.is_none() && n != 0 {
            r.absurd("WarningLevel", format_args!("is {n}, not a UPower level"));
        }
    }
    power
}

#[cfg(test)]
mod tests {
    use super::*;
    use zbus::wire::{OwnedVariant, Str};

    fn props(kv: &[(&str, OwnedVariant)]) -> Props {
        kv.iter()
            .map(|(k, v)| ((*k).to_owned(), v.try_clone().expect("clone")))
            .collect()
    }

    #[test]
    fn reads_a_discharging_battery() {
        let daemon = props(&[("OnBattery", true.into())]);
        let device = props(&[
            ("IsPresent", true.into()),
            ("Percentage", 42.5f64.into()),
            ("State", 2u32.into()),
            ("TimeToEmpty", 3600i64.into()),
            ("TimeToFull", 0i64.into()),
            ("WarningLevel", 3u32.into()),
        ]);
        let w = Warned::new("test");
        let p = power_from(&daemon, Some(&device), &w);
        assert_eq!(
            p,
            Power {
                on_battery: true,
                lid_closed: None,
                percentage: Some(42.5),
                state: Some("discharging".into()),
                time_to_empty_s: Some(3600),
                time_to_full_s: None,
                warning_level: Some("low".into()),
            }
        );
        assert_eq!(w.count(), 0);
    }

    #[test]
    fn the_lid_is_said_only_where_there_is_one() {
        let w = Warned::new("test");
        let laptop = |closed: bool| {
            props(&[
                ("OnBattery", false.into()),
                ("LidIsPresent", true.into()),
                ("LidIsClosed", closed.into()),
            ])
        };
        assert_eq!(power_from(&laptop(true), None, &w).lid_closed, Some(true));
        assert_eq!(power_from(&laptop(false), None, &w).lid_closed, Some(false));
        // A desktop: no lid, not an open one.
        let desktop = props(&[
            ("OnBattery", false.into()),
            ("LidIsPresent", false.into()),
            ("LidIsClosed", false.into()),
        ]);
        assert_eq!(power_from(&desktop, None, &w).lid_closed, None);
        // An older UPower without the properties: nothing said, no warning.
        let old = props(&[("OnBattery", false.into())]);
        assert_eq!(power_from(&old, None, &w).lid_closed, None);
        assert_eq!(w.count(), 0);
        // A lid whose state is of the wrong type: left out, warned.
        let odd = props(&[
            ("OnBattery", false.into()),
            ("LidIsPresent", true.into()),
            ("LidIsClosed", OwnedVariant::from(Str::from("yes"))),
        ]);
        assert_eq!(power_from(&odd, None, &w).lid_closed, None);
        assert_eq!(w.count(), 1);
    }

    #[test]
    fn absurd_and_wrong_values_are_left_out_and_warned_once() {
        let daemon = props(&[("OnBattery", OwnedVariant::from(Str::from("yes")))]);
        let device = props(&[
            ("Percentage", 250f64.into()),
            ("State", 99u32.into()),
            ("TimeToEmpty", (-5i64).into()),
            ("TimeToFull", (MAX_TIME_S as i64 + 1).into()),
            ("WarningLevel", OwnedVariant::from(Str::from("low"))),
        ]);
        let w = Warned::new("test");
        let p = power_from(&daemon, Some(&device), &w);
        assert_eq!(p, Power::default());
        let n = w.count();
        assert!(n >= 6, "{n} warnings");
        power_from(&daemon, Some(&device), &w);
        assert_eq!(w.count(), n, "the same bad input warns only once");
        assert_eq!(valid_percentage(f64::NAN), None);
        assert_eq!(valid_percentage(100.0), Some(100.0));
        assert_eq!(valid_time(1), Ok(Some(1)));
    }

    #[test]
    fn no_battery_and_no_device_show_on_battery_only() {
        let daemon = props(&[("OnBattery", false.into())]);
        let device = props(&[("IsPresent", false.into()), ("Percentage", 0f64.into())]);
        let w = Warned::new("test");
        assert_eq!(power_from(&daemon, Some(&device), &w), Power::default());
        assert_eq!(power_from(&daemon, None, &w), Power::default());
        // A missing OnBattery is read as false and warned about.
        assert_eq!(power_from(&Props::new(), None, &w), Power::default());
        assert_eq!(w.count(), 1);
    }
}
