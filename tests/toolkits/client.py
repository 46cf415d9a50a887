# Copyright © 2026 The contextd authors
# SPDX-License-Identifier: MIT OR Apache-2.0
"""A Python (PyGObject) client of the broker: Gio.DBusProxy objects with the
interface info from the XML files (Gio.DBusNodeInfo.new_for_xml). Prints the
active window's app id, the number of grants (Consent1.ListGrants), subscribes to `windows`, prints every Changed signal
and exits after the first focus change.

    python3 client.py DBUS_INTERFACES_DIR
"""

import sys

from gi.repository import Gio, GLib

BUS_NAME = "org.contextd.Broker1"
PATH = "/org/contextd/Broker1"


def interface_info(name):
    with open(f"{sys.argv[1]}/{name}.xml", encoding="utf-8") as f:
        node = Gio.DBusNodeInfo.new_for_xml(f.read())
    return node.lookup_interface(name)


def proxy(bus, path, name):
    return Gio.DBusProxy.new_sync(
        bus, Gio.DBusProxyFlags.NONE, interface_info(name), BUS_NAME, path, name, None
    )


def call(p, method, args=None):
    return p.call_sync(method, args, Gio.DBusCallFlags.NONE, -1, None).unpack()


def main():
    bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    try:
        ctx = proxy(bus, PATH, "org.contextd.Context1")
        (window,) = call(ctx, "GetActiveWindow")
        print(f"app_id={window['app_id']}", flush=True)
        print(f"version={ctx.get_cached_property('Version').unpack()}", flush=True)
        consent = proxy(bus, PATH, "org.contextd.Consent1")
        (grants,) = call(consent, "ListGrants")
        print(f"grants={len(grants)} first={grants[0]['category'] if grants else ''}", flush=True)
        (path,) = call(ctx, "Subscribe", GLib.Variant("(as)", (["windows"],)))
    except GLib.Error as e:
        print(e.message, file=sys.stderr)
        return 1

    loop = GLib.MainLoop()
    sub = proxy(bus, path, "org.contextd.Subscription1")

    def on_signal(_proxy, _sender, signal, params):
        if signal != "Changed":
            return
        category, data = params.unpack()
        event = data.get("event", "")
        window = data.get("window", {})
        print(
            f"changed category={category} event={event} "
            f"window={window.get('id', '')} app_id={window.get('app_id', '')}",
            flush=True,
        )
        if event == "focus":
            loop.quit()

    sub.connect("g-signal", on_signal)
    print(f"subscribed path={path}", flush=True)
    loop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
