#!/usr/bin/env python3
"""Publish what this app is about to contextd, as a GTK app would.

The app tells the broker (org.contextd.Broker1 on the session bus) what it
is about through org.contextd.Provider1: here, the document it has open.
Readers the user allowed (``provided.document``) see it; nobody else does.

The broker knows who publishes from the bus connection's credentials (this
process's Flatpak id, systemd scope or executable), never from anything the
app says, and it keeps the entry only while the connection is open: quit,
crash or lose the bus, and the entry is gone. So this program stays alive,
running a GLib main loop as any GTK app does, until SIGTERM or SIGINT (or
the end of its standard input), then retracts its entry and exits.

Every call is asynchronous (``Gio.DBusProxy.call``), as it must be in an app
whose main loop also draws its windows. If the broker restarts, the proxy
sees its name get a new owner and the entry is published again.

Examples::

    examples/provider.py --name notes.txt --url file:///home/me/notes.txt
    examples/provider.py --file ~/notes.txt          # name, url, type, date from the file
    examples/provider.py --kind task --json '{"name": "Write the report",
                                              "status": "ActiveActionStatus"}'
    # publish, then update the entry after 2 s (as an editor does on save)
    examples/provider.py --name a.txt --update '{"name": "b.txt"}' --update-after 2

Each line read on standard input is a JSON object merged into the entry,
which is then published again; the end of input quits (give
``--ignore-stdin`` to run without one, e.g. in the background).

A refused publish prints the D-Bus error's name and message (for example
``org.contextd.Error.NotAllowed`` when the user refused this app's
publications, ``org.contextd.Error.InvalidArgs`` for data that breaks the
kind's rules) and exits with status 1.

Needs PyGObject (Debian: python3-gi). Status: 0 after a clean quit, 1 when
the broker refused a call, 2 for bad arguments or no session bus.
"""

import argparse
import datetime
import json
import signal
import sys

import gi

gi.require_version("Gio", "2.0")
gi.require_version("GLib", "2.0")
from gi.repository import Gio, GLib

BUS_NAME = "org.contextd.Broker1"
OBJECT_PATH = "/org/contextd/Broker1"
INTERFACE = "org.contextd.Provider1"


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Publish context to contextd (org.contextd.Provider1) "
        "and keep it published until SIGTERM, SIGINT or the end of stdin.",
        epilog="The entry is gone when this program exits, however it exits.",
    )
    p.add_argument(
        "--kind",
        default="document",
        help="document, selection, task, location, event, person or x-NAME "
        "(default: document)",
    )
    doc = p.add_argument_group("a document (the fields of kind 'document')")
    doc.add_argument("--name", help="the document's name (required for a document)")
    doc.add_argument("--url", help="where it is: file:///..., https://...")
    doc.add_argument("--encoding-format", help="its media type, e.g. text/plain")
    doc.add_argument(
        "--date-modified", help="when it was last saved (RFC 3339; 'now' for now)"
    )
    doc.add_argument(
        "--file",
        metavar="PATH",
        help="take name, url, encoding format and date modified from a local "
        "file (the options above override them)",
    )
    p.add_argument(
        "--json",
        metavar="OBJECT",
        help="the whole entry as a JSON object (any kind), instead of the fields above",
    )
    p.add_argument(
        "--update",
        metavar="OBJECT",
        help="a JSON object merged into the entry, published again after "
        "--update-after seconds",
    )
    p.add_argument(
        "--update-after",
        metavar="SECONDS",
        type=float,
        default=1.0,
        help="when to publish the --update (default: 1)",
    )
    p.add_argument(
        "--ignore-stdin",
        action="store_true",
        help="do not read updates from standard input, nor quit at its end",
    )
    args = p.parse_args(argv)

    fields = (args.name, args.url, args.encoding_format, args.date_modified, args.file)
    if args.json is not None:
        if any(f is not None for f in fields):
            p.error(
                "--json replaces --name, --url, --encoding-format, "
                "--date-modified and --file"
            )
        args.entry = json_object(p, "--json", args.json)
    else:
        if args.kind != "document":
            p.error(f"give the {args.kind} entry with --json")
        args.entry = document_entry(p, args)
    args.update_entry = (
        None if args.update is None else json_object(p, "--update", args.update)
    )
    return args


def json_object(parser, option, text):
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        parser.error(f"{option}: not JSON: {e}")
    if not isinstance(value, dict):
        parser.error(f"{option}: must be a JSON object")
    return value


def now_rfc3339():
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def document_entry(parser, args):
    """The document from --file and the field options (they win)."""
    entry = {}
    if args.file is not None:
        entry.update(describe_file(parser, args.file))
    for key, value in (
        ("name", args.name),
        ("url", args.url),
        ("encodingFormat", args.encoding_format),
        ("dateModified", args.date_modified),
    ):
        if value is not None:
            entry[key] = value
    if entry.get("dateModified") == "now":
        entry["dateModified"] = now_rfc3339()
    if "name" not in entry:
        parser.error("a document needs --name (or --file, or --json)")
    return entry


def describe_file(parser, path):
    """What an editor knows of the file it has open, through GIO."""
    f = Gio.File.new_for_commandline_arg(path)
    try:
        info = f.query_info(
            ",".join(
                (
                    Gio.FILE_ATTRIBUTE_STANDARD_DISPLAY_NAME,
                    Gio.FILE_ATTRIBUTE_STANDARD_CONTENT_TYPE,
                    Gio.FILE_ATTRIBUTE_TIME_MODIFIED,
                )
            ),
            Gio.FileQueryInfoFlags.NONE,
            None,
        )
    except GLib.Error as e:
        parser.error(f"--file: {e.message}")
    entry = {"name": info.get_display_name(), "url": f.get_uri()}
    content_type = info.get_content_type()
    mime = content_type and Gio.content_type_get_mime_type(content_type)
    if mime:
        entry["encodingFormat"] = mime
    modified = info.get_modification_date_time()
    if modified is not None:
        entry["dateModified"] = modified.to_utc().format_iso8601()
    return entry


def dbus_error(error):
    """(name, message) of a GLib.Error from a D-Bus call."""
    name = Gio.DBusError.get_remote_error(error)
    if name is None:
        # A local error: no bus, a timeout, a cancelled call.
        return f"{error.domain}.{error.code}", error.message
    # What Gio.DBusError.strip_remote_error() does in C (PyGObject hands it
    # a copy of the error, so it cannot strip ours).
    prefix = f"GDBus.Error:{name}: "
    return name, error.message.removeprefix(prefix)


class Provider:
    """Keeps one entry published while the main loop runs."""

    def __init__(self, proxy, kind, entry, loop, on_first_publish):
        self.proxy = proxy
        self.kind = kind
        self.entry = entry
        self.loop = loop
        self.on_first_publish = on_first_publish
        self.status = 0
        self.published = False
        self.in_flight = 0  # Publish calls not answered yet
        self.quitting = False
        # A new owner of the broker's name is a restarted broker, which
        # knows nothing of us: publish again.
        proxy.connect("notify::g-name-owner", self.on_name_owner)

    def publish(self, what="published"):
        data = json.dumps(self.entry, ensure_ascii=False)
        self.in_flight += 1
        self.proxy.call(
            "Publish",
            GLib.Variant("(ss)", (self.kind, data)),
            Gio.DBusCallFlags.NONE,
            -1,
            None,
            self.on_published,
            (what, data),
        )

    def on_published(self, proxy, result, user_data):
        what, data = user_data
        self.in_flight -= 1
        try:
            proxy.call_finish(result)
        except GLib.Error as e:
            self.fail("Publish", e)
            return
        print(f"{what} {self.kind}: {data}", flush=True)
        if not self.published:
            self.published = True
            if not self.quitting:
                self.on_first_publish()
        if self.quitting and self.in_flight == 0:
            self.finish()

    def update(self, changes):
        self.entry.update(changes)
        self.publish("updated")

    def on_name_owner(self, proxy, _pspec):
        owner = proxy.get_name_owner()
        if owner is None:
            print("the broker went away; waiting for it", flush=True)
        elif self.published:
            self.publish("published again")

    def retract(self):
        """Retract the entry, synchronously: we are on the way out."""
        if not self.published or self.proxy.get_name_owner() is None:
            return
        try:
            self.proxy.call_sync(
                "Retract",
                GLib.Variant("(s)", (self.kind,)),
                Gio.DBusCallFlags.NO_AUTO_START,
                5000,
                None,
            )
        except GLib.Error as e:
            name, message = dbus_error(e)
            print(f"Retract failed: {name}: {message}", file=sys.stderr, flush=True)
            return
        print(f"retracted {self.kind}", flush=True)

    def fail(self, method, error):
        name, message = dbus_error(error)
        print(f"{method} failed: {name}: {message}", file=sys.stderr, flush=True)
        self.status = 1
        self.loop.quit()

    def quit(self, why):
        """Retract and leave, once the publishes under way are answered."""
        if not self.quitting:
            print(f"{why}: quitting", flush=True)
            self.quitting = True
            if self.in_flight == 0:
                self.finish()
        return GLib.SOURCE_REMOVE

    def finish(self):
        self.retract()
        self.loop.quit()


def watch_stdin(provider):
    """Read JSON objects, one a line, as updates; quit at the end of input."""
    stream = Gio.DataInputStream.new(Gio.UnixInputStream.new(sys.stdin.fileno(), False))

    def on_line(stream, result):
        try:
            line, _length = stream.read_line_finish_utf8(result)
        except GLib.Error as e:
            provider.quit(f"standard input: {e.message}")
            return
        if line is None:
            provider.quit("end of input")
            return
        line = line.strip()
        if line:
            try:
                changes = json.loads(line)
                if not isinstance(changes, dict):
                    raise ValueError("not a JSON object")
            except ValueError as e:
                print(f"ignored input line ({e}): {line}", file=sys.stderr, flush=True)
            else:
                provider.update(changes)
        stream.read_line_async(GLib.PRIORITY_DEFAULT, None, on_line)

    stream.read_line_async(GLib.PRIORITY_DEFAULT, None, on_line)


def main(argv=None):
    args = parse_args(argv)
    loop = GLib.MainLoop()
    try:
        # The bus connection lives as long as the proxy: so does the entry.
        proxy = Gio.DBusProxy.new_for_bus_sync(
            Gio.BusType.SESSION,
            Gio.DBusProxyFlags.DO_NOT_LOAD_PROPERTIES
            | Gio.DBusProxyFlags.DO_NOT_CONNECT_SIGNALS,
            None,
            BUS_NAME,
            OBJECT_PATH,
            INTERFACE,
            None,
        )
    except GLib.Error as e:
        print(f"cannot reach the session bus: {e.message}", file=sys.stderr)
        return 2

    def published():
        """The entry is out: now follow stdin and schedule the update."""
        if not args.ignore_stdin:
            watch_stdin(provider)
        if args.update_entry is not None:

            def update():
                provider.update(args.update_entry)
                return GLib.SOURCE_REMOVE

            GLib.timeout_add(int(args.update_after * 1000), update)

    provider = Provider(proxy, args.kind, args.entry, loop, published)
    for signum in (signal.SIGTERM, signal.SIGINT):
        GLib.unix_signal_add(
            GLib.PRIORITY_HIGH, signum, provider.quit, signal.Signals(signum).name
        )
    provider.publish()
    loop.run()
    return provider.status


if __name__ == "__main__":
    sys.exit(main())
