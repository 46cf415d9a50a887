"""An app's Context1.RequestAccess, as a PyGObject app makes it: listens
for Response before asking (a quick answer is not missed), prints the
response code (0 granted, 1 denied, 2 ended without an answer).

usage: ask.py CATEGORY REASON
"""

import sys

from gi.repository import Gio, GLib

category, reason = sys.argv[1:3]
bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
loop = GLib.MainLoop()
answer = {}
want = {}


def on_response(conn, sender, path, iface, name, params):
    if path == want.get("path"):
        answer["code"] = params.unpack()[0]
        loop.quit()


bus.signal_subscribe(
    "org.contextd.Broker1", "org.contextd.Request1", "Response", None, None,
    Gio.DBusSignalFlags.NONE, on_response)
reply = bus.call_sync(
    "org.contextd.Broker1", "/org/contextd/Broker1", "org.contextd.Context1",
    "RequestAccess", GLib.Variant("(ass)", ([category], reason)),
    GLib.VariantType("(o)"), Gio.DBusCallFlags.NONE, 10000, None)
want["path"] = reply.unpack()[0]
GLib.timeout_add_seconds(60, loop.quit)
loop.run()
print(answer.get("code", "none"), flush=True)
