// SPDX-License-Identifier: MIT OR Apache-2.0
//
// contextd GNOME Shell extension, for GNOME Shell 45 and later (an ES
// module; data/gnome-shell holds the same reporter in the legacy format for
// 43 and 44). It reports the shell's windows (app id, title, states) and
// the focus to the contextd broker over the session bus, the only way a
// broker learns them on GNOME: Mutter offers no window list to ordinary
// clients. The broker accepts the reports only from gnome-shell's own
// process, and shows them only to apps the user allowed.

import Gio from 'gi://Gio';
import GLib from 'gi://GLib';
import Meta from 'gi://Meta';

import {Extension} from 'resource:///org/gnome/shell/extensions/extension.js';

import {BrokerWatch} from './brokerCheck.js';
import {ConsentAgent} from './consentDialog.js';
import {ReadingIndicator} from './indicator.js';

// --- reporter: identical in data/gnome-shell and data/gnome-shell-45 ---
const OBJECT_PATH = '/org/contextd/Broker1';
const INTERFACE = 'org.contextd.WindowReports1';

// The kinds of window a user sees as one: what a taskbar would show.
const WANTED_TYPES = [
    Meta.WindowType.NORMAL,
    Meta.WindowType.DIALOG,
    Meta.WindowType.MODAL_DIALOG,
];

const WINDOW_SIGNALS = [
    'notify::title',
    'notify::wm-class',
    'notify::gtk-application-id',
    'notify::minimized',
    'notify::maximized-horizontally',
    'notify::maximized-vertically',
    'notify::fullscreen',
];

// Reports the shell's windows and focus to the contextd broker
// (org.contextd.WindowReports1). Sends nothing anywhere else, and nothing
// to an owner of the broker's name that is not the broker: only to the
// unique name that passed the check (brokerCheck.js). A missing broker is
// not an error: the full list is sent again when it appears.
class Reporter {
    enable() {
        this._windows = new Map();
        // Windows mapped at least once: a Wayland window has no app id
        // until its first commit; it is reported once it has one or has
        // been shown, so that no window shows up nameless and then renamed.
        this._shown = new Set();
        this._displaySignals = [
            global.display.connect('window-created', (_display, win) => this._add(win, true)),
            global.display.connect('notify::focus-window', () => this._sendFocus()),
        ];
        // Every window the shell manages, also those not shown yet.
        for (const win of global.display.list_all_windows()) {
            if (win.get_compositor_private())
                this._shown.add(win);
            this._add(win, false);
        }
        // Called once the broker runs and passed the check, and whenever
        // it (re)starts.
        this._broker = new BrokerWatch('reporter', () => this._sendAll(), () => {});
    }

    disable() {
        const owner = this._broker ? this._broker.owner : null;
        if (this._broker) {
            this._broker.destroy();
            this._broker = null;
        }
        for (const id of this._displaySignals || [])
            global.display.disconnect(id);
        this._displaySignals = [];
        for (const [win, ids] of this._windows || new Map()) {
            for (const id of ids)
                win.disconnect(id);
        }
        this._windows = new Map();
        this._shown = new Set();
        if (owner)
            this._callTo(owner, 'ReportStopped', null);
    }

    _wanted(win) {
        return win && !win.is_override_redirect() &&
            WANTED_TYPES.includes(win.get_window_type());
    }

    _ready(win) {
        return this._shown.has(win) || !!this._appId(win);
    }

    _appId(win) {
        return win.get_gtk_application_id() || win.get_wm_class() || '';
    }

    _id(win) {
        return String(win.get_id());
    }

    _add(win, report) {
        if (!win || this._windows.has(win))
            return;
        const ids = WINDOW_SIGNALS.map(s => win.connect(s, () => this._sendWindow(win)));
        ids.push(win.connect('shown', () => {
            this._shown.add(win);
            this._sendWindow(win);
        }));
        ids.push(win.connect('unmanaged', () => this._remove(win)));
        this._windows.set(win, ids);
        if (report)
            this._sendWindow(win);
    }

    _remove(win) {
        const ids = this._windows.get(win);
        if (!ids)
            return;
        for (const id of ids)
            win.disconnect(id);
        this._windows.delete(win);
        this._shown.delete(win);
        this._call('ReportClosed', new GLib.Variant('(s)', [this._id(win)]));
    }

    _props(win) {
        const states = [];
        if (win.minimized)
            states.push('minimized');
        if (win.is_fullscreen())
            states.push('fullscreen');
        // The properties, not get_maximized(): Mutter 49 removed that
        // method (is_maximized() came instead); the properties are in
        // every Mutter from 43 to 51.
        if (win.maximized_horizontally && win.maximized_vertically)
            states.push('maximized');
        const props = {
            app_id: new GLib.Variant('s', this._appId(win)),
            title: new GLib.Variant('s', win.get_title() || ''),
            states: new GLib.Variant('as', states),
        };
        // The window's process, as Mutter knows it from the client's
        // socket (Wayland) or its client ids (X11); -1 when it cannot
        // tell. The broker names the app from it as the kernel does; the
        // app id above stays the app's claim.
        const pid = win.get_pid();
        if (Number.isInteger(pid) && pid > 0)
            props.pid = new GLib.Variant('u', pid);
        const parent = win.get_transient_for();
        if (parent)
            props.parent = new GLib.Variant('s', this._id(parent));
        return props;
    }

    _sendWindow(win) {
        if (!this._wanted(win) || !this._ready(win))
            return;
        this._call('ReportWindow',
            new GLib.Variant('(sa{sv})', [this._id(win), this._props(win)]));
    }

    _focusId() {
        const win = global.display.focus_window;
        // Also a window not reported yet: the broker waits for it.
        return this._wanted(win) ? this._id(win) : '';
    }

    _sendFocus() {
        this._call('ReportFocus', new GLib.Variant('(s)', [this._focusId()]));
    }

    _sendAll() {
        const all = {};
        for (const win of this._windows.keys()) {
            if (this._wanted(win) && this._ready(win))
                all[this._id(win)] = new GLib.Variant('a{sv}', this._props(win));
        }
        this._call('ReportWindows',
            new GLib.Variant('(a{sv}s)', [all, this._focusId()]));
    }

    // To the checked broker only; nothing while there is none.
    _call(method, params) {
        const owner = this._broker ? this._broker.owner : null;
        if (owner)
            this._callTo(owner, method, params);
    }

    _callTo(owner, method, params) {
        // Never starts the broker; one gone since is not an error.
        Gio.DBus.session.call(owner, OBJECT_PATH, INTERFACE, method, params,
            null, Gio.DBusCallFlags.NO_AUTO_START, -1, null, (conn, res) => {
                try {
                    conn.call_finish(res);
                } catch (e) {
                    if (!e.matches(Gio.DBusError, Gio.DBusError.SERVICE_UNKNOWN) &&
                        !e.matches(Gio.DBusError, Gio.DBusError.NAME_HAS_NO_OWNER))
                        log(`contextd: ${method}: ${e.message}`);
                }
            });
    }
}
// --- end of reporter ---

export default class ContextdExtension extends Extension {
    enable() {
        this._reporter = new Reporter();
        this._reporter.enable();
        // The consent dialog: GNOME Shell as the broker's consent agent.
        this._consentAgent = new ConsentAgent();
        this._consentAgent.enable();
        this._indicator = new ReadingIndicator();
        this._indicator.enable();
    }

    disable() {
        if (this._reporter) {
            this._reporter.disable();
            this._reporter = null;
        }
        if (this._consentAgent) {
            this._consentAgent.disable();
            this._consentAgent = null;
        }
        if (this._indicator) {
            this._indicator.disable();
            this._indicator = null;
        }
    }
}
