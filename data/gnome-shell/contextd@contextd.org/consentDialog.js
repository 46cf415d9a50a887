// SPDX-License-Identifier: MIT OR Apache-2.0
//
// The contextd consent dialog, for GNOME Shell 43 and 44 (the legacy
// extension format; data/gnome-shell-45 holds the same agent as an ES
// module for 45 and later). GNOME Shell is the consent agent of contextd
// (org.contextd.ConsentAgent1): when an app asks for context the user has
// not decided on, the broker asks here, and the user answers in a
// system-modal dialog like GNOME's own permission and polkit dialogs.
// The broker trusts this agent because it runs in gnome-shell's process,
// on the connection that owns org.gnome.Shell.
'use strict';

const {Clutter, Gio, GLib, St} = imports.gi;
const Dialog = imports.ui.dialog;
const Main = imports.ui.main;
const ModalDialog = imports.ui.modalDialog;
const {BrokerWatch} = imports.misc.extensionUtils.getCurrentExtension().imports.brokerCheck;

// --- consent agent: identical in data/gnome-shell and data/gnome-shell-45 ---
const BROKER_PATH = '/org/contextd/Broker1';
const CONSENT_INTERFACE = 'org.contextd.Consent1';
const AGENT_PATH = '/org/contextd/ConsentAgent';
const AGENT_XML = `<node>
  <interface name="org.contextd.ConsentAgent1">
    <method name="Ask">
      <arg type="a{sv}" name="app" direction="in"/>
      <arg type="as" name="categories" direction="in"/>
      <arg type="s" name="channel" direction="in"/>
      <arg type="s" name="reason" direction="in"/>
      <arg type="s" name="answer" direction="out"/>
      <arg type="a{sv}" name="options" direction="out"/>
    </method>
    <method name="Cancel">
      <arg type="a{sv}" name="app" direction="in"/>
      <arg type="as" name="categories" direction="in"/>
    </method>
  </interface>
</node>`;
// "Allow for a day".
const DAY_S = 86400;
// The longest text of an app shown (reason, arguments): the dialog must
// stay on the screen whatever an app sends. The broker sends them cleaned
// already (core::display); this holds should another program ever ask.
const MAX_TEXT = 400;
// How long after the dialog appears its answers take no input: a
// question timed to appear under the user's typing or clicking is not
// answered by it (as browsers do for permission prompts).
const INPUT_DELAY_MS = 1000;
// Line breaks, control characters, bidirectional controls and the
// invisible format characters: text from apps shows on one line, in the
// order it is written.
const UNSHOWN = /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]/g;

function cut(text) {
    text = String(text || '').replace(UNSHOWN, ' ').replace(/ {2,}/g, ' ').trim();
    return text.length > MAX_TEXT ? `${text.slice(0, MAX_TEXT)}…` : text;
}

// A key of the dict `app` of Ask, unpacked ('' or [] when absent).
function field(app, key, empty = '') {
    const v = app[key];
    return v instanceof GLib.Variant ? v.recursiveUnpack() : empty;
}

// The question of one Ask as the dialog shows it.
function describe(app, categories, reason) {
    const id = field(app, 'id');
    // A program without a desktop entry is named by its file's name here,
    // and by its whole path (the id) below the heading.
    const name = cut(field(app, 'name') ||
        (id.startsWith('exe:') ? GLib.path_get_basename(id.slice(4)) : id));
    const questions = field(app, 'questions', []);
    const lines = (questions.length > 0
        ? questions.map(q => q.detail_of
            ? `${q.description} (more detail about ${q.detail_of})`
            : q.description)
        : categories).map(cut);
    const host = cut(field(app, 'host'));
    const callName = cut(field(app, 'call_name'));
    let call = '';
    if (callName) {
        const args = field(app, 'arguments');
        call = `${host || 'An MCP host'} calls ${cut(field(app, 'call'))} ${callName}` +
            (args ? ` with ${cut(args)}` : ' with no arguments');
    }
    return {
        id: cut(id),
        name,
        icon: field(app, 'icon'),
        identity: cut(field(app, 'identity')),
        lines,
        sensitive: questions.some(q => q.sensitive),
        reason: cut(reason),
        call,
    };
}

// Serves org.contextd.ConsentAgent1 on GNOME Shell's own connection (the
// broker trusts an agent only there) and asks the user in a system-modal
// dialog. One dialog at a time: the broker asks one question at a time,
// and anything more that comes is queued here, never stacked. Only the
// broker's connection may ask or cancel.
class Agent {
    enable() {
        this._queue = [];
        this._showing = null;
        this._broker = null;
        this._exported = Gio.DBusExportedObject.wrapJSObject(AGENT_XML, this);
        this._exported.export(Gio.DBus.session, AGENT_PATH);
        // Register whenever the broker (re)appears and passed the check
        // (brokerCheck.js): only that unique name hears from us, and only
        // it may ask or cancel.
        this._watch = new BrokerWatch('consent agent',
            owner => {
                this._broker = owner;
                this._call('RegisterAgent');
            },
            () => {
                this._broker = null;
                this._endAll('the broker left');
            });
    }

    disable() {
        if (this._watch) {
            this._watch.destroy();
            this._watch = null;
        }
        if (this._broker)
            this._call('UnregisterAgent');
        this._broker = null;
        this._endAll('the consent dialog was disabled');
        if (this._exported) {
            this._exported.unexport();
            this._exported = null;
        }
    }

    // To the checked broker only.
    _call(method) {
        if (!this._broker)
            return;
        Gio.DBus.session.call(this._broker, BROKER_PATH, CONSENT_INTERFACE, method,
            new GLib.Variant('(o)', [AGENT_PATH]), null,
            Gio.DBusCallFlags.NO_AUTO_START, -1, null, (conn, res) => {
                try {
                    conn.call_finish(res);
                } catch (e) {
                    log(`contextd: ${method}: ${e.message}`);
                }
            });
    }

    _fromBroker(invocation) {
        if (this._broker && invocation.get_sender() === this._broker)
            return true;
        invocation.return_dbus_error('org.contextd.Error.NotAllowed',
            'only the contextd broker asks the consent agent');
        return false;
    }

    AskAsync(params, invocation) {
        if (!this._fromBroker(invocation))
            return;
        const [app, categories, _channel, reason] = params;
        const question = describe(app, categories, reason);
        question.key = `${question.id}\n${categories.join(',')}`;
        question.invocation = invocation;
        this._queue.push(question);
        this._next();
    }

    CancelAsync(params, invocation) {
        if (!this._fromBroker(invocation))
            return;
        const [app, categories] = params;
        const key = `${cut(field(app, 'id'))}\n${categories.join(',')}`;
        for (const q of this._queue.filter(x => x.key === key))
            this._answer(q, 'cancel');
        this._queue = this._queue.filter(x => x.key !== key);
        if (this._showing && this._showing.key === key)
            this._close('cancel');
        invocation.return_value(null);
    }

    _answer(question, answer) {
        const options = {};
        if (answer === 'duration')
            options.duration_s = new GLib.Variant('u', DAY_S);
        question.invocation.return_value(
            new GLib.Variant('(sa{sv})', [answer, options]));
    }

    _endAll(why) {
        for (const q of this._queue)
            q.invocation.return_dbus_error('org.contextd.Error.Failed', why);
        this._queue = [];
        if (this._showing) {
            const q = this._showing;
            this._close(null);
            q.invocation.return_dbus_error('org.contextd.Error.Failed', why);
        }
    }

    _next() {
        if (this._showing || this._queue.length === 0)
            return;
        const q = this._queue.shift();
        this._showing = q;
        q.dialog = buildDialog(q, answer => this._close(answer));
        q.dialog.open(global.get_current_time());
    }

    // Close the dialog on the screen; answer its question unless `answer`
    // is null; then show the next one.
    _close(answer) {
        const q = this._showing;
        if (!q)
            return;
        this._showing = null;
        if (answer !== null)
            this._answer(q, answer);
        q.dialog.close(global.get_current_time());
        this._next();
    }
}

// A system-modal dialog in the style of GNOME's own permission and polkit
// dialogs: the app's icon and name, a heading, what it asks in plain
// words, the reason in the app's own words, the MCP call, and the four
// answers. No answer is the default: Return answers only the button that
// has the key focus (Deny, the first, when it appears), and for a second
// after the dialog appears no button takes input at all (insensitive,
// and any answer then ignored), so a question timed to appear under the
// user's typing is not answered by it. Escape closes it without a choice
// (denied for this call, and the app is not asked again for a while).
function buildDialog(q, answered) {
    let ready = false;
    // When input is taken (ms of CLOCK_MONOTONIC, as event times are).
    let readyAt = 0;
    const done = answer => {
        if (answer !== 'cancel') {
            if (!ready)
                return;
            // A key or click made before the delay was over and handled
            // only now (a busy shell) is not an answer either. Compared
            // only within 10 s, should a device's clock be another.
            const t = Clutter.get_current_event_time();
            const early = (t - readyAt) | 0;
            if (t !== 0 && early < 0 && early > -10000)
                return;
        }
        answered(answer);
    };
    // GNOME's modal-dialog look without the prompt-dialog's fixed 25em:
    // the body below sets the width.
    const dialog = new ModalDialog.ModalDialog();
    dialog.set_name('contextd-consent-dialog');
    // Not over the lock screen (as polkit's dialog): shown again on unlock.
    Main.sessionMode.connectObject('updated', () => {
        dialog.visible = !Main.sessionMode.isLocked;
    }, dialog);
    const heading = `Allow “${q.name}” to see what you do?`;
    dialog.accessible_name = heading;

    const iconName = q.icon || 'application-x-executable';
    let gicon;
    try {
        gicon = Gio.Icon.new_for_string(iconName);
    } catch (e) {
        gicon = new Gio.ThemedIcon({name: 'application-x-executable'});
    }
    const icon = new St.Icon({gicon, icon_size: 64, x_align: Clutter.ActorAlign.CENTER});
    dialog.contentLayout.add_child(icon);

    const known = q.identity ? `${q.id}, known by ${q.identity}` : q.id;
    const header = new Dialog.MessageDialogContent({title: heading, description: known});
    dialog.contentLayout.add_child(header);

    // Wide enough for the four answers side by side, unabridged.
    const body = new St.BoxLayout({style: 'spacing: 6px; width: 34em;'});
    // St.BoxLayout's `vertical` is gone in GNOME 51; `orientation` came in
    // 48. Whichever this shell has.
    if ('orientation' in body)
        body.orientation = Clutter.Orientation.VERTICAL;
    else
        body.vertical = true;
    const addText = (text, style) => {
        const label = new St.Label({text, style: style || ''});
        label.clutter_text.line_wrap = true;
        label.clutter_text.ellipsize = 0;
        body.add_child(label);
        return label;
    };
    addText(q.sensitive ? 'It asks to see (some of this is sensitive):' : 'It asks to see:',
        'font-weight: bold;');
    for (const line of q.lines)
        addText(`•  ${line}`);
    if (q.call)
        addText(q.call);
    if (q.reason) {
        addText('The reason it gives, in its own words:', 'font-weight: bold;');
        addText(`“${q.reason}”`, 'font-style: italic;');
    }
    dialog.contentLayout.add_child(body);

    dialog.setButtons([
        {label: 'Deny', action: () => done('deny')},
        {label: 'Allow once', action: () => done('once')},
        {label: 'Allow for a day', action: () => done('duration')},
        {label: 'Always allow', action: () => done('always')},
    ]);
    // Insensitive until the delay is over (counted from when it opens).
    const buttons = dialog.buttonLayout.get_children();
    for (const b of buttons)
        b.reactive = false;
    let timer = 0;
    dialog.connect('opened', () => {
        if (timer)
            return;
        readyAt = (Math.floor(GLib.get_monotonic_time() / 1000) + INPUT_DELAY_MS) >>> 0;
        timer = GLib.timeout_add(GLib.PRIORITY_DEFAULT, INPUT_DELAY_MS, () => {
            timer = 0;
            ready = true;
            for (const b of buttons)
                b.reactive = true;
            return GLib.SOURCE_REMOVE;
        });
    });
    dialog.connect('destroy', () => {
        if (timer)
            GLib.source_remove(timer);
        timer = 0;
    });
    // Escape: no choice, a deny for this call only.
    dialog.connect('key-press-event', (_actor, event) => {
        if (event.get_key_symbol() !== Clutter.KEY_Escape)
            return Clutter.EVENT_PROPAGATE;
        done('cancel');
        return Clutter.EVENT_STOP;
    });
    return dialog;
}
// --- end of consent agent ---

// What extension.js uses.
var ConsentAgent = Agent;
