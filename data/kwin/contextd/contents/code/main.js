// SPDX-License-Identifier: MIT OR Apache-2.0
//
// contextd's KWin script: reports KWin's windows and focus to the broker
// (org.contextd.WindowReports1, dbus-interfaces/ in the contextd sources).
// The broker loads it over D-Bus when KWin runs and unloads it when it
// stops; it reads nothing but window properties and sends them only to
// the broker that loaded it, which accepts them only from KWin's own
// process.
//
// Both script APIs: Plasma 5.27 (clientList, activeClient, clientAdded,
// clientActivated, ...) and Plasma 6 (windowList, activeWindow,
// windowAdded, windowActivated, ...). Every value sent is a string, an
// array of strings or an object of those: callDBus turns an undefined or
// null argument into nothing at all, which would change the signature.

// The unique bus name of the broker that loaded the script, which the
// broker writes here (src/sources/shells/kwin.rs): the reports go to that
// connection and to no later owner of org.contextd.Broker1. While the
// broker does not run, any process may own that name, and a script left
// in KWin by a broker that died would report to it. A script cannot ask
// who owns a name (it has no /proc), so it trusts only what the broker
// wrote. Loaded as shipped, with this placeholder, it reaches nobody.
var BUS = "@CONTEXTD_BROKER_UNIQUE_NAME@";
var PATH = "/org/contextd/Broker1";
var IFACE = "org.contextd.WindowReports1";

var plasma6 = typeof workspace.windowList === "function";

function send(method) {
    var args = [BUS, PATH, IFACE, method];
    for (var i = 1; i < arguments.length; i++) {
        args.push(arguments[i]);
    }
    // A callback, so that a missing broker is a logged error, not a hang.
    args.push(function () {});
    callDBus.apply(null, args);
}

function text(v) {
    if (v === undefined || v === null) {
        return "";
    }
    if (typeof v === "string") {
        return v;
    }
    // Plasma 5.27 gives resourceClass as a QByteArray (an ArrayBuffer here).
    if (v instanceof ArrayBuffer) {
        var bytes = new Uint8Array(v);
        var s = "";
        for (var i = 0; i < bytes.length; i++) {
            s += String.fromCharCode(bytes[i]);
        }
        return s;
    }
    return String(v);
}

function idOf(w) {
    return text(w.internalId);
}

function wanted(w) {
    return !!w && (w.normalWindow || w.dialog) && !w.specialWindow;
}

function props(w) {
    var states = [];
    if (w.minimized) {
        states.push("minimized");
    }
    if (w.fullScreen) {
        states.push("fullscreen");
    }
    // MaximizeFull is 3 (both directions).
    if (w.maximizeMode === 3 || w.maximized === true) {
        states.push("maximized");
    }
    var outputs = [];
    // Plasma 6 only: 5.27 has the property but cannot hand it to scripts
    // (and logs a warning each time it is read).
    if (plasma6 && w.output && w.output.name) {
        outputs.push(text(w.output.name));
    }
    var p = {
        "app_id": text(w.desktopFileName) || text(w.resourceClass),
        "title": text(w.caption),
        "states": states,
        "outputs": outputs
    };
    // The window's process, as KWin knows it from the client's socket
    // (Wayland) or its client ids (X11): the broker names the app from it
    // as the kernel does; the app id above stays the app's claim.
    if (typeof w.pid === "number" && w.pid > 0) {
        p["pid"] = w.pid;
    }
    if (w.transient && w.transientFor) {
        p["parent"] = idOf(w.transientFor);
    }
    return p;
}

function windows() {
    return plasma6 ? workspace.windowList() : workspace.clientList();
}

function active() {
    var a = plasma6 ? workspace.activeWindow : workspace.activeClient;
    return wanted(a) ? idOf(a) : "";
}

function reportAll() {
    var all = {};
    var list = windows();
    for (var i = 0; i < list.length; i++) {
        if (wanted(list[i])) {
            all[idOf(list[i])] = props(list[i]);
        }
    }
    send("ReportWindows", all, active());
}

function changed(w) {
    if (wanted(w)) {
        send("ReportWindow", idOf(w), props(w));
    }
}

function follow(w) {
    if (!w) {
        return;
    }
    var update = function () {
        changed(w);
    };
    var signals = ["captionChanged", "minimizedChanged", "fullScreenChanged",
        "desktopFileNameChanged", "outputChanged", "maximizedChanged",
        "windowClassChanged", "transientChanged"];
    for (var i = 0; i < signals.length; i++) {
        if (w[signals[i]] && typeof w[signals[i]].connect === "function") {
            w[signals[i]].connect(update);
        }
    }
    // Plasma 5.27: clientMaximizedStateChanged(client, horizontal, vertical).
    if (w.clientMaximizedStateChanged) {
        w.clientMaximizedStateChanged.connect(update);
    }
}

function added(w) {
    follow(w);
    changed(w);
}

function removed(w) {
    if (w) {
        send("ReportClosed", idOf(w));
    }
}

function activated(w) {
    // KWin activates null before every real activation; the broker waits
    // a moment before it believes a null.
    send("ReportFocus", wanted(w) ? idOf(w) : "");
}

if (plasma6) {
    workspace.windowAdded.connect(added);
    workspace.windowRemoved.connect(removed);
    workspace.windowActivated.connect(activated);
} else {
    workspace.clientAdded.connect(added);
    workspace.clientRemoved.connect(removed);
    workspace.clientActivated.connect(activated);
}

var existing = windows();
for (var i = 0; i < existing.length; i++) {
    follow(existing[i]);
}
reportAll();
