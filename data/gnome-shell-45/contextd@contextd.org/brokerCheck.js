// SPDX-License-Identifier: MIT OR Apache-2.0
//
// Who owns org.contextd.Broker1, checked before the extension sends it
// anything, for GNOME Shell 45 and later (an ES module; data/gnome-shell
// holds the same check in the legacy format for 43 and 44). The reporter
// (extension.js), the consent agent (consentDialog.js) and the indicator
// (indicator.js) each follow the name through it.

import Gio from 'gi://Gio';
import GLib from 'gi://GLib';

// --- broker check: identical in data/gnome-shell and data/gnome-shell-45 ---
//
// Whoever owns org.contextd.Broker1 receives every window and title the
// reporter sends and may ask the user questions through the consent
// dialog. The broker keeps the name while it runs (no replacement), but
// when it is not running (or between a crash and systemd's restart) any
// process on the session bus may take it. So the extension talks to an
// owner only once it looks like the installed broker, and only to that
// owner's unique name: a later owner is checked again before it receives
// anything, and calls and signals are accepted only from the unique name
// checked.
//
// What is checked, all from the kernel and the bus (never from the owner's
// word), and why this is what is sound:
// - The bus's credentials of the owner (GetConnectionCredentials): the
//   PID and user of the process that connected. Another user is refused.
// - The owner is not sandboxed:
//   - its PID namespace is ours (/proc/PID/status: NSpid has one entry).
//     Every Flatpak app runs in a PID namespace of its own (bubblewrap
//     --unshare-pid), also one given the whole session bus, and cannot
//     leave it; this holds whatever the process does to its /proc;
//   - it is in no Snap's cgroup (/proc/PID/cgroup: snap.NAME…), which
//     snap-confine puts every process of a snap in;
//   - if its root is readable, /proc/PID/root/.flatpak-info is absent:
//     the bus proxy of a Flatpak app (xdg-dbus-proxy, which holds the
//     app's connection) runs with the app's .flatpak-info.
// - It is contextd:
//   - if its executable is readable (/proc/PID/exe), the file's name is
//     `contextd` (a ` (deleted)` suffix, left by a package upgrade that
//     replaced the file, is ignored); and if the D-Bus activation file
//     `dbus-1/services/org.contextd.Broker1.service` is found in
//     $XDG_DATA_HOME or $XDG_DATA_DIRS (the first, as the bus reads them)
//     and its Exec= names a `contextd`, it is exactly that path: the
//     installed broker, not a copy or a build elsewhere;
//   - if it is not (the installed broker makes itself non-dumpable, see
//     src/hardening.rs, and the kernel then closes its /proc/PID/exe and
//     root to other processes of the user), the name the kernel gave it at
//     exec (/proc/PID/comm) is `contextd`. That name can be chosen by a
//     program of the user's that is not sandboxed, as it can copy or
//     LD_PRELOAD the broker itself: such code is outside what consent can
//     bind (README, "Threat model"); the sandbox checks above are the
//     boundary.
// A check that cannot be made (a file of the owner's that cannot be read
// for any other reason) refuses the owner.
//
// The PID is the one the owner had when it connected: an owner that hands
// its connection to another process and exits leaves a PID that a later
// process could get; that is a race of PID reuse, out of a sandbox's
// reach (it cannot start processes outside its PID namespace).
const CHECK_BUS_NAME = 'org.contextd.Broker1';
const BROKER_FILE_NAME = 'contextd';
const ACTIVATION_FILE = 'dbus-1/services/org.contextd.Broker1.service';
// How long the bus may take to answer GetConnectionCredentials.
const CHECK_TIMEOUT_MS = 5000;

function readText(path) {
    const [, bytes] = GLib.file_get_contents(path);
    return new TextDecoder().decode(bytes);
}

// The Exec= path of the first activation file of org.contextd.Broker1 in
// the data directories, when it names a `contextd`; else null.
function installedBroker() {
    const dirs = [GLib.get_user_data_dir(), ...GLib.get_system_data_dirs()];
    for (const dir of dirs) {
        const path = GLib.build_filenamev([dir, ACTIVATION_FILE]);
        if (!GLib.file_test(path, GLib.FileTest.EXISTS))
            continue;
        try {
            const file = new GLib.KeyFile();
            file.load_from_file(path, GLib.KeyFileFlags.NONE);
            const [, argv] = GLib.shell_parse_argv(file.get_string('D-BUS Service', 'Exec'));
            const exe = argv[0];
            if (GLib.path_is_absolute(exe) && GLib.path_get_basename(exe) === BROKER_FILE_NAME)
                return exe;
            log(`contextd: ${path} names ${exe}, not a contextd: checked by name only`);
        } catch (e) {
            log(`contextd: ${path}: ${e.message}: checked by name only`);
        }
        // The bus reads the first file only: so do we.
        return null;
    }
    return null;
}

// Why the process `pid` of user `uid` is not the broker, or null if it
// passes every check above.
function notTheBroker(pid, uid) {
    const myUid = new Gio.Credentials().get_unix_user();
    if (uid !== myUid)
        return `it runs as user ${uid}, not ${myUid}`;
    const proc = `/proc/${pid}`;
    let status;
    try {
        status = readText(`${proc}/status`);
    } catch (e) {
        return `cannot read ${proc}/status: ${e.message}`;
    }
    const nspid = status.split('\n').find(l => l.startsWith('NSpid:'));
    if (!nspid)
        return `${proc}/status has no NSpid`;
    if (nspid.slice(6).trim().split(/\s+/).length !== 1)
        return 'it runs in a PID namespace of its own (a sandbox)';
    let cgroup;
    try {
        cgroup = readText(`${proc}/cgroup`);
    } catch (e) {
        return `cannot read ${proc}/cgroup: ${e.message}`;
    }
    if (cgroup.split('\n').some(l => /\/snap\./.test(l)))
        return 'it runs in a Snap';
    let exe;
    try {
        exe = GLib.file_read_link(`${proc}/exe`);
    } catch (e) {
        if (!e.matches(GLib.FileError, GLib.FileError.ACCES))
            return `cannot read ${proc}/exe: ${e.message}`;
        exe = null;
    }
    if (exe === null) {
        // Not dumpable: its exe and root are closed to us.
        let comm;
        try {
            comm = readText(`${proc}/comm`).trim();
        } catch (e) {
            return `cannot read ${proc}/comm: ${e.message}`;
        }
        return comm === BROKER_FILE_NAME ? null : `it is ${comm}, not ${BROKER_FILE_NAME}`;
    }
    if (exe.endsWith(' (deleted)'))
        exe = exe.slice(0, -' (deleted)'.length);
    if (GLib.path_get_basename(exe) !== BROKER_FILE_NAME)
        return `it is ${exe}, not ${BROKER_FILE_NAME}`;
    const installed = installedBroker();
    if (installed !== null && exe !== installed)
        return `it is ${exe}, not the installed ${installed}`;
    try {
        Gio.File.new_for_path(`${proc}/root/.flatpak-info`).query_info('standard::type',
            Gio.FileQueryInfoFlags.NOFOLLOW_SYMLINKS, null);
        return 'it runs in a Flatpak sandbox';
    } catch (e) {
        if (!e.matches(Gio.IOErrorEnum, Gio.IOErrorEnum.NOT_FOUND))
            return `cannot tell whether it runs in a Flatpak sandbox: ${e.message}`;
    }
    return null;
}

// Check the connection `owner` (a unique name); `done(why)` with null if
// it is the broker, else why not.
function checkBroker(owner, done) {
    Gio.DBus.session.call('org.freedesktop.DBus', '/org/freedesktop/DBus',
        'org.freedesktop.DBus', 'GetConnectionCredentials', new GLib.Variant('(s)', [owner]),
        new GLib.VariantType('(a{sv})'), Gio.DBusCallFlags.NONE, CHECK_TIMEOUT_MS, null,
        (conn, res) => {
            let why;
            try {
                const [creds] = conn.call_finish(res).deepUnpack();
                const pid = creds.ProcessID ? creds.ProcessID.deepUnpack() : null;
                const uid = creds.UnixUserID ? creds.UnixUserID.deepUnpack() : null;
                why = pid === null || uid === null
                    ? 'the bus does not say its process and user'
                    : notTheBroker(pid, uid);
            } catch (e) {
                why = `cannot ask the bus who it is: ${e.message}`;
            }
            done(why);
        });
}

// Follows org.contextd.Broker1 and calls `appeared(owner)` with the
// owner's unique name once it passed the check, `vanished()` when that
// owner leaves or the name changes hands. `what` names the part of the
// extension in the log.
class Watch {
    constructor(what, appeared, vanished) {
        this._what = what;
        this._appeared = appeared;
        this._vanished = vanished;
        // The checked owner, or null.
        this.owner = null;
        // Bumped at each change of owner: a check's answer for an owner
        // that is gone since is dropped.
        this._generation = 0;
        this._watch = Gio.bus_watch_name(Gio.BusType.SESSION, CHECK_BUS_NAME,
            Gio.BusNameWatcherFlags.NONE,
            (_conn, _name, owner) => this._check(owner),
            () => this._gone());
    }

    _check(owner) {
        this._gone();
        const generation = this._generation;
        checkBroker(owner, why => {
            if (generation !== this._generation || !this._watch)
                return;
            if (why !== null) {
                log(`contextd: ${this._what}: ${owner} owns ${CHECK_BUS_NAME} but is not ` +
                    `the contextd broker (${why}); nothing is sent to it`);
                return;
            }
            this.owner = owner;
            this._appeared(owner);
        });
    }

    _gone() {
        this._generation++;
        if (this.owner === null)
            return;
        this.owner = null;
        this._vanished();
    }

    // Stop following; `vanished` is not called.
    destroy() {
        if (this._watch) {
            Gio.bus_unwatch_name(this._watch);
            this._watch = 0;
        }
        this._generation++;
        this.owner = null;
    }
}
// --- end of broker check ---

// What the other modules use.
export {Watch as BrokerWatch};
