//! Rule 2, Snap: `snap.NAME` from the unit snapd runs a snap in
//! (`snap.NAME.APP-UUID.scope`, `snap.NAME.APP.service`) or from the v1
//! freezer cgroup `/snap.NAME` that snap-confine puts every process of a
//! snap in, parsed the way snapd parses them.

use super::cgroup::{Cgroup, is_unit_name};

/// `snap.NAME` if the process is in a snap: its unit (user or system)
/// first, then the freezer cgroup.
pub(super) fn from_cgroup(cgroup: &Cgroup<'_>) -> Option<String> {
    if let Some(name) = cgroup
        .user_unit
        .or(cgroup.system_unit)
        .and_then(snap_from_unit)
    {
        return Some(name);
    }
    cgroup.freezer.and_then(snap_from_freezer)
}

/// `snap.NAME` from a snap unit name, following snapd's
/// `securityTagFromCgroupPath`: `snap.<instance>.<app or hook…>` with a
/// `.scope` or `.service` suffix.
fn snap_from_unit(unit: &str) -> Option<String> {
    if !is_unit_name(unit) {
        return None;
    }
    let body = unit.strip_prefix("snap.")?;
    let body = body
        .strip_suffix(".scope")
        .or_else(|| body.strip_suffix(".service"))?;
    let (instance, rest) = body.split_once('.')?;
    // Component hooks have `<instance>+<component>` tags, `+` being
    // escaped as `\x2b` in unit names; the snap is the part before it.
    let instance = instance.split("\\x2b").next()?;
    if !rest
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric())
    {
        return None;
    }
    is_snap_instance_name(instance).then(|| format!("snap.{instance}"))
}

/// `snap.NAME` from a v1 freezer cgroup path `/snap.NAME` (snap-confine
/// puts all processes of a snap there, as root).
fn snap_from_freezer(path: &str) -> Option<String> {
    let instance = path.strip_prefix("/snap.")?;
    is_snap_instance_name(instance).then(|| format!("snap.{instance}"))
}

/// snapd's `ValidateInstanceName`: a snap name (2–40 of `a-z0-9-`, at
/// least one letter, no leading, trailing or double `-`), optionally
/// followed by `_` and an instance key of 1–10 of `a-z0-9`.
fn is_snap_instance_name(instance: &str) -> bool {
    let (name, key) = match instance.split_once('_') {
        Some((name, key)) => (name, Some(key)),
        None => (instance, None),
    };
    let name_ok = (2..=40).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && name.bytes().any(|b| b.is_ascii_lowercase())
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    let key_ok = key.is_none_or(|k| {
        (1..=10).contains(&k.len())
            && k.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    });
    name_ok && key_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::test_support::{FakeProc, cg, snap, user_unit};
    use crate::model::IdentitySource;

    #[test]
    fn snap_scope_v2() {
        assert_eq!(
            cg(
                "0::/user.slice/user-1000.slice/user@1000.service/app.slice/snap.firefox.firefox-1b3a.scope\n"
            ),
            snap("snap.firefox")
        );
        assert_eq!(
            cg(&user_unit(
                "snap.firefox.firefox-3f6b5b1e-6a47-4f34-9c3e-0e7f0ff1c5aa.scope"
            )),
            snap("snap.firefox")
        );
        assert_eq!(
            cg(&user_unit(
                "snap.firefox_esr.firefox-3f6b5b1e-6a47-4f34-9c3e-0e7f0ff1c5aa.scope"
            )),
            snap("snap.firefox_esr")
        );
        assert_eq!(
            cg(&user_unit(
                "snap.gnome-calculator.hook.configure-3f6b5b1e-6a47-4f34-9c3e-0e7f0ff1c5aa.scope"
            )),
            snap("snap.gnome-calculator")
        );
    }

    #[test]
    fn snap_v1_multi_line() {
        let v1 = "12:pids:/user.slice/user-1000.slice/user@1000.service\n\
                  11:perf_event:/\n\
                  10:net_cls,net_prio:/\n\
                  9:cpuset:/\n\
                  8:memory:/user.slice/user-1000.slice/user@1000.service\n\
                  7:rdma:/\n\
                  6:devices:/user.slice\n\
                  5:blkio:/user.slice\n\
                  4:hugetlb:/\n\
                  3:freezer:/snap.spotify\n\
                  2:cpu,cpuacct:/user.slice\n\
                  1:name=systemd:/user.slice/user-1000.slice/user@1000.service/snap.spotify.spotify.2a4b9c1e-8d3f-4e5a-b6c7-d8e9f0a1b2c3.scope\n\
                  0::/\n";
        assert_eq!(cg(v1), snap("snap.spotify"));
    }

    #[test]
    fn snap_freezer_only() {
        // The portal's test data: the systemd unit is a terminal's, the
        // freezer cgroup (set up by snap-confine) says snap.
        let data = "12:pids:/user.slice/user-1000.slice/user@1000.service\n\
                    8:memory:/user.slice/user-1000.slice/user@1000.service/apps.slice/apps-org.gnome.Terminal.slice/vte-spawn-228ae109-a869-4533-8988-65ea4c10b492.scope\n\
                    3:freezer:/snap.portal-test\n\
                    1:name=systemd:/user.slice/user-1000.slice/user@1000.service/apps.slice/apps-org.gnome.Terminal.slice/vte-spawn-228ae109-a869-4533-8988-65ea4c10b492.scope\n\
                    0::/user.slice/user-1000.slice/user@1000.service/apps.slice/apps-org.gnome.Terminal.slice/vte-spawn-228ae109-a869-4533-8988-65ea4c10b492.scope\n";
        assert_eq!(cg(data), snap("snap.portal-test"));
    }

    #[test]
    fn snap_service() {
        assert_eq!(
            cg("0::/system.slice/snap.lxd.daemon.service\n"),
            snap("snap.lxd")
        );
        assert_eq!(
            cg("0::/system.slice/snap.lxd.daemon.service/lxc.payload.c1/init.scope\n"),
            snap("snap.lxd")
        );
    }

    #[test]
    fn not_snaps() {
        // Portal counts this as a snap and asks snapd; it names no app.
        assert_eq!(cg(&user_unit("snap.something.scope")), None);
        assert_eq!(cg(&user_unit("snap.Firefox.firefox-1.scope")), None);
        assert_eq!(cg(&user_unit("snap.-x.app-1.scope")), None);
        assert_eq!(cg(&user_unit("snap.firefox..scope")), None);
        assert_eq!(cg("3:freezer:/snap.\n0::/\n"), None);
        assert_eq!(cg("3:freezer:/lxc/c1/snap.foo\n0::/\n"), None);
        let not_snap = "12:pids:/\n11:perf_event:/\n3:freezer:/\n1:name=systemd:/\n0::/\n";
        assert_eq!(cg(not_snap), None);
    }

    #[test]
    fn snap_names() {
        for ok in [
            "ab",
            "firefox",
            "gnome-42-2204",
            "0ad",
            "a1",
            "firefox_esr",
            "ab_1234567890",
        ] {
            assert!(is_snap_instance_name(ok), "{ok}");
        }
        for bad in [
            "",
            "a",
            "12",
            "-ab",
            "ab-",
            "a--b",
            "Ab",
            "ab_",
            "ab_12345678901",
            "ab_X",
            "a.b",
        ] {
            assert!(!is_snap_instance_name(bad), "{bad}");
        }
        assert!(!is_snap_instance_name(&"a".repeat(41)));
    }

    #[test]
    fn fake_snap() {
        let proc = FakeProc::new();
        proc.process(
            300,
            &user_unit("snap.firefox.firefox-3f6b5b1e-6a47-4f34-9c3e-0e7f0ff1c5aa.scope"),
            "/snap/firefox/4336/usr/lib/firefox/firefox",
        );
        let id = proc.resolve(300).unwrap();
        assert_eq!(id.app_id.as_str(), "snap.firefox");
        assert_eq!(id.source, IdentitySource::Snap);
    }
}
