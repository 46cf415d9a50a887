//! The units a process is in, from `/proc/PID/cgroup`: what the snap and
//! systemd scope rules look at.

/// The parts of `/proc/PID/cgroup` that name a process.
pub(super) struct Cgroup<'a> {
    /// The system unit (`user@1000.service`, `snap.lxd.daemon.service`).
    pub(super) system_unit: Option<&'a str>,
    /// The unit below the user manager (`user@UID.service`), if any.
    pub(super) user_unit: Option<&'a str>,
    /// The path in the v1 `freezer` hierarchy, if there is one.
    pub(super) freezer: Option<&'a str>,
}

impl<'a> Cgroup<'a> {
    /// Find the units in the unified (`0::`) hierarchy, or `name=systemd`
    /// on cgroup v1, and the v1 freezer path. See [`super::parse_cgroup`].
    pub(super) fn parse(contents: &'a str) -> Self {
        let mut unified = None;
        let mut named_systemd = None;
        let mut freezer = None;
        for line in contents.lines() {
            let mut fields = line.splitn(3, ':');
            let (Some(hierarchy), Some(controllers), Some(path)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            if hierarchy == "0" && controllers.is_empty() {
                unified.get_or_insert(path);
            } else if controllers == "name=systemd" {
                named_systemd.get_or_insert(path);
            } else if controllers.split(',').any(|c| c == "freezer") {
                freezer.get_or_insert(path);
            }
        }
        // Legacy (v1) systems still print a `0::/` line; the unit is then only
        // in `name=systemd`. On hybrid systems both agree.
        let systemd_path = [unified, named_systemd]
            .into_iter()
            .flatten()
            .find(|p| !p.is_empty() && *p != "/");
        let (system_unit, user_unit) = systemd_path.map(units_of).unwrap_or((None, None));
        Cgroup {
            system_unit,
            user_unit,
            freezer,
        }
    }
}

/// `(system unit, user unit)` of a cgroup path, like systemd's
/// `cg_path_get_unit` and `cg_path_get_user_unit`.
fn units_of(path: &str) -> (Option<&str>, Option<&str>) {
    let mut components = path.split('/').filter(|c| !c.is_empty());
    let system = components.find(|c| !c.ends_with(".slice"));
    let user = match system {
        Some(unit) if unit.starts_with("user@") && unit.ends_with(".service") => {
            components.find(|c| !c.ends_with(".slice"))
        }
        _ => None,
    };
    (system, user)
}

/// Whether `unit` only has characters systemd allows in a unit name, so
/// that the byte-wise parsing of the snap and systemd rules works on ASCII.
pub(super) fn is_unit_name(unit: &str) -> bool {
    !unit.is_empty()
        && unit.len() < 256
        && unit
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b":-_.\\@".contains(&b))
}

#[cfg(test)]
mod tests {
    use crate::identity::test_support::{USER, cg, systemd, user_unit};

    #[test]
    fn unit_is_the_first_below_slices() {
        // A cgroup a unit created below itself does not name the process.
        assert_eq!(
            cg(&user_unit(
                "app-gnome-org.gnome.Builder-1234.scope/build-42"
            )),
            systemd("org.gnome.Builder")
        );
        assert_eq!(
            cg(&format!(
                "{USER}/app.slice/app-gnome-code-4242.scope/app-org.evil.App-1.scope\n"
            )),
            None
        );
    }

    #[test]
    fn cgroup_v1_and_hybrid() {
        let hybrid = "12:pids:/user.slice/user-1000.slice/user@1000.service\n\
                      3:freezer:/\n\
                      1:name=systemd:/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.gnome.Calculator-5.scope\n\
                      0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.gnome.Calculator-5.scope\n";
        assert_eq!(cg(hybrid), systemd("org.gnome.Calculator"));
        let legacy = "1:name=systemd:/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.gnome.Calculator-5.scope\n0::/\n";
        assert_eq!(cg(legacy), systemd("org.gnome.Calculator"));
    }
}
