// Copyright © 2026 The contextd authors
// SPDX-License-Identifier: MIT OR Apache-2.0
//
// A GJS client of the broker: proxies from Gio.DBusProxy.makeProxyWrapper
// built from the interface XML files. Prints the active window's app id,
// the number of grants (Consent1.ListGrants),
// subscribes to `windows`, prints every Changed signal and exits after the
// first focus change.
//
//   gjs client.js DBUS_INTERFACES_DIR

const {Gio, GLib} = imports.gi;
const System = imports.system;

const BUS_NAME = 'org.contextd.Broker1';
const PATH = '/org/contextd/Broker1';

function xml(name) {
    const [, bytes] = GLib.file_get_contents(`${ARGV[0]}/${name}.xml`);
    return new TextDecoder().decode(bytes);
}

const Context1Proxy = Gio.DBusProxy.makeProxyWrapper(xml('org.contextd.Context1'));
const Subscription1Proxy = Gio.DBusProxy.makeProxyWrapper(xml('org.contextd.Subscription1'));
const Consent1Proxy = Gio.DBusProxy.makeProxyWrapper(xml('org.contextd.Consent1'));

function fail(e) {
    printerr(e.message);
    System.exit(1);
}

let ctx, path;
try {
    ctx = new Context1Proxy(Gio.DBus.session, BUS_NAME, PATH);
    const [window] = ctx.GetActiveWindowSync();
    print(`app_id=${window.app_id.deepUnpack()}`);
    print(`version=${ctx.Version}`);
    const consent = new Consent1Proxy(Gio.DBus.session, BUS_NAME, PATH);
    const [grants] = consent.ListGrantsSync();
    print(`grants=${grants.length} first=${grants.length ? grants[0].category.deepUnpack() : ''}`);
    [path] = ctx.SubscribeSync(['windows']);
} catch (e) {
    fail(e);
}

const loop = new GLib.MainLoop(null, false);
const sub = new Subscription1Proxy(Gio.DBus.session, BUS_NAME, path);
sub.connectSignal('Changed', (_proxy, _sender, [category, data]) => {
    const event = data.event ? data.event.deepUnpack() : '';
    const window = data.window ? data.window.recursiveUnpack() : {};
    print(`changed category=${category} event=${event} window=${window.id ?? ''} app_id=${window.app_id ?? ''}`);
    if (event === 'focus')
        loop.quit();
});
print(`subscribed path=${path}`);
loop.run();
