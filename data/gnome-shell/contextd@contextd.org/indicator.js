// SPDX-License-Identifier: MIT OR Apache-2.0
//
// The contextd privacy indicator, for GNOME Shell 43 and 44 (the legacy
// extension format; data/gnome-shell-45 holds the same indicator as an ES
// module for 45 and later). extension.js starts it.
'use strict';

/* exported ReadingIndicator */

const {Gio, GLib, Shell, St} = imports.gi;
const Main = imports.ui.main;
const PanelMenu = imports.ui.panelMenu;
const PopupMenu = imports.ui.popupMenu;
const {BrokerWatch} = imports.misc.extensionUtils.getCurrentExtension().imports.brokerCheck;

// --- indicator: identical in data/gnome-shell and data/gnome-shell-45 ---
const IND_BUS_NAME = 'org.contextd.Broker1';
const IND_OBJECT_PATH = '/org/contextd/Broker1';
const IND_INTERFACE = 'org.contextd.Indicator1';
const ROLE = 'contextd-reading';
const ICON = 'view-reveal-symbolic';

// Test hook (only when the shell runs with CONTEXTD_SHELL_TEST set, as
// the integration tests run it): what the indicator shows, read from the
// actor tree, and a screenshot.
const TEST_PATH = '/org/contextd/ShellTest/Indicator';
const TEST_IFACE = `<node><interface name="org.contextd.ShellTest.Indicator">
  <method name="Shown"><arg type="b" direction="out"/><arg type="as" direction="out"/></method>
  <method name="Screenshot"><arg type="s" direction="in"/><arg type="b" direction="out"/></method>
</interface></node>`;

// The privacy indicator: shown in the top bar, beside GNOME's own screen
// sharing and recording indicators (in their amber), while an app or AI
// host reads the desktop context, with a menu: who reads (End), Pause all
// sharing, Open the dashboard. The broker says who reads
// (org.contextd.Indicator1, which answers only the shell) and, while this
// shows, registers no StatusNotifierItem of its own.
var ReadingIndicator = class ReadingIndicator {
    enable() {
        this._readers = [];
        this._paused = false;
        this._enabled = false;
        this._button = null;
        // The broker's unique name once it passed the check
        // (brokerCheck.js): the only one asked, and the only one whose
        // signals count (the bus delivers those of any later owner of the
        // well-known name too).
        this._broker = null;
        this._signal = Gio.DBus.session.signal_subscribe(IND_BUS_NAME, IND_INTERFACE,
            'Changed', IND_OBJECT_PATH, null, Gio.DBusSignalFlags.NONE,
            (_conn, sender) => {
                if (this._broker && sender === this._broker)
                    this._refresh();
            });
        // Called once the broker runs and passed the check, and whenever
        // it (re)starts.
        this._watch = new BrokerWatch('indicator', owner => {
            this._broker = owner;
            this._appeared();
        }, () => {
            this._broker = null;
            this._enabled = false;
            this._show([]);
        });
        if (GLib.getenv('CONTEXTD_SHELL_TEST')) {
            this._test = Gio.DBusExportedObject.wrapJSObject(TEST_IFACE, this);
            this._test.export(Gio.DBus.session, TEST_PATH);
        }
    }

    disable() {
        if (this._test) {
            this._test.unexport();
            this._test = null;
        }
        if (this._watch) {
            this._watch.destroy();
            this._watch = null;
        }
        if (this._signal) {
            Gio.DBus.session.signal_unsubscribe(this._signal);
            this._signal = 0;
        }
        this._call('Unwatch', null, null);
        this._broker = null;
        this._destroyButton();
    }

    _appeared() {
        this._call('Watch', null, reply => {
            [this._enabled] = reply.deepUnpack();
            this._refresh();
        });
    }

    _refresh() {
        if (!this._enabled) {
            this._show([]);
            return;
        }
        this._call('Paused', null, reply => {
            [this._paused] = reply.deepUnpack();
            this._call('ListReading', null, r => this._show(r.recursiveUnpack()[0]));
        });
    }

    _show(readers) {
        this._readers = readers || [];
        if (this._readers.length === 0) {
            this._destroyButton();
            return;
        }
        if (!this._button) {
            this._button = new PanelMenu.Button(0.0, 'Desktop context is being read', false);
            this._button.add_style_class_name('screen-sharing-indicator');
            this._button.add_style_class_name('contextd-reading-indicator');
            this._button.add_child(new St.Icon({
                icon_name: ICON,
                style_class: 'system-status-icon',
            }));
            // Leftmost of the right side: where GNOME's screen sharing and
            // recording indicators are.
            Main.panel.addToStatusArea(ROLE, this._button, 0, 'right');
        }
        const names = this._readers.map(r => r.label);
        this._button.accessible_name = `Reading your desktop context: ${names.join(', ')}`;
        this._fillMenu();
    }

    _fillMenu() {
        const menu = this._button.menu;
        menu.removeAll();
        const header = new PopupMenu.PopupMenuItem('Reading your desktop context now:',
            {reactive: false});
        menu.addMenuItem(header);
        for (const r of this._readers) {
            if (r.id) {
                const item = new PopupMenu.PopupMenuItem(`End ${r.label} (${r.transport})`);
                item.connect('activate', () =>
                    this._call('EndReader', new GLib.Variant('(t)', [r.id]), () => this._refresh()));
                menu.addMenuItem(item);
            } else {
                menu.addMenuItem(new PopupMenu.PopupMenuItem(`${r.label} (read just now)`,
                    {reactive: false}));
            }
        }
        menu.addMenuItem(new PopupMenu.PopupSeparatorMenuItem());
        if (this._paused) {
            // Resuming needs the user's authentication: the dashboard.
            menu.addMenuItem(new PopupMenu.PopupMenuItem(
                'Sharing is paused (resume in the dashboard)', {reactive: false}));
        } else {
            const pause = new PopupMenu.PopupMenuItem('Pause all sharing');
            pause.connect('activate', () => this._call('Pause', null, () => this._refresh()));
            menu.addMenuItem(pause);
        }
        const dash = new PopupMenu.PopupMenuItem('Open the dashboard…');
        dash.connect('activate', () => this._openDashboard());
        menu.addMenuItem(dash);
    }

    _openDashboard() {
        // As `contextctl dashboard` does it: polkit asks, the browser gets
        // the one-time link through a private file.
        try {
            Gio.Subprocess.new(['contextctl', 'dashboard'], Gio.SubprocessFlags.NONE);
        } catch (e) {
            log(`contextd: cannot run contextctl dashboard: ${e.message}`);
        }
    }

    _destroyButton() {
        if (this._button) {
            this._button.destroy();
            this._button = null;
        }
    }

    // To the checked broker only; nothing while there is none.
    _call(method, params, done) {
        if (!this._broker)
            return;
        // Never starts the broker; one gone since is not an error.
        Gio.DBus.session.call(this._broker, IND_OBJECT_PATH, IND_INTERFACE, method, params,
            null, Gio.DBusCallFlags.NO_AUTO_START, -1, null, (conn, res) => {
                let reply;
                try {
                    reply = conn.call_finish(res);
                } catch (e) {
                    if (!e.matches(Gio.DBusError, Gio.DBusError.SERVICE_UNKNOWN) &&
                        !e.matches(Gio.DBusError, Gio.DBusError.NAME_HAS_NO_OWNER))
                        log(`contextd: ${method}: ${e.message}`);
                    return;
                }
                if (done)
                    done(reply);
            });
    }

    // The test hook's methods.
    Shown() {
        const b = this._button;
        let inPanel = false;
        for (let a = b ? b.container : null; a; a = a.get_parent()) {
            if (a === Main.panel) {
                inPanel = true;
                break;
            }
        }
        const shown = !!b && inPanel && b.container.visible && b.container.is_mapped();
        const items = shown
            ? b.menu._getMenuItems().filter(i => i.label).map(i => i.label.text) : [];
        return [shown, items];
    }

    // The screen once the shell's start (the top bar sliding in) is over,
    // with the indicator's menu open.
    ScreenshotAsync([path], invocation) {
        if (Main.layoutManager._startingUp) {
            const id = Main.layoutManager.connect('startup-complete', () => {
                Main.layoutManager.disconnect(id);
                this.ScreenshotAsync([path], invocation);
            });
            return;
        }
        const menu = this._button ? this._button.menu : null;
        if (menu)
            menu.open(false);
        const shooter = new Shell.Screenshot();
        const stream = Gio.File.new_for_path(path).replace(null, false,
            Gio.FileCreateFlags.NONE, null);
        shooter.screenshot(false, stream, (o, res) => {
            let ok = false;
            try {
                o.screenshot_finish(res);
                ok = true;
            } catch (e) {
                log(`contextd: screenshot: ${e.message}`);
            }
            stream.close(null);
            if (menu)
                menu.close(false);
            invocation.return_value(new GLib.Variant('(b)', [ok]));
        });
    }
};
// --- end of indicator ---
