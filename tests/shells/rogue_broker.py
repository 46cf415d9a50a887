# A process that is not the broker and takes org.contextd.Broker1 while no
# broker runs (tests/it/shells/rogue.rs): it records every method call it
# receives, one line "SENDER INTERFACE MEMBER" in the file CALLS, and
# answers none (GDBus replies UnknownMethod). It prints "owned UNIQUE-NAME"
# once it owns the name. On stdin: "ask" calls the GNOME Shell consent
# agent's Ask as a broker would (to draw a dialog) and prints "ask RESULT"
# (the D-Bus error name, or "answered"); "quit" ends it.
#
#   python3 rogue_broker.py CALLS [--not-dumpable]
#
# --not-dumpable: prctl(PR_SET_DUMPABLE, 0), as any process may do, which
# closes its /proc/PID/exe and root to other processes of the user.
import ctypes
import sys

from gi.repository import Gio, GLib

calls = open(sys.argv[1], 'a', buffering=1)
if '--not-dumpable' in sys.argv[2:]:
    PR_SET_DUMPABLE = 4
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        sys.exit('prctl PR_SET_DUMPABLE failed')

conn = Gio.bus_get_sync(Gio.BusType.SESSION, None)


def record(_conn, msg, incoming):
    if incoming and msg.get_message_type() == Gio.DBusMessageType.METHOD_CALL:
        calls.write(f'{msg.get_sender()} {msg.get_interface()} {msg.get_member()}\n')
    return msg


conn.add_filter(record)
DO_NOT_QUEUE = 4
PRIMARY_OWNER = 1
(result,) = conn.call_sync(
    'org.freedesktop.DBus', '/org/freedesktop/DBus', 'org.freedesktop.DBus',
    'RequestName', GLib.Variant('(su)', ('org.contextd.Broker1', DO_NOT_QUEUE)),
    GLib.VariantType('(u)'), Gio.DBusCallFlags.NONE, 5000, None).unpack()
if result != PRIMARY_OWNER:
    sys.exit(f'cannot own org.contextd.Broker1 (RequestName gave {result})')
print('owned', conn.get_unique_name(), flush=True)

loop = GLib.MainLoop()


def ask():
    app = {'id': GLib.Variant('s', 'org.example.Rogue'),
           'name': GLib.Variant('s', 'Settings')}
    try:
        conn.call_sync(
            'org.gnome.Shell', '/org/contextd/ConsentAgent', 'org.contextd.ConsentAgent1',
            'Ask', GLib.Variant('(a{sv}asss)', (app, ['windows.titles'], 'dbus', 'Verified')),
            None, Gio.DBusCallFlags.NONE, 5000, None)
        return 'answered'
    except GLib.Error as e:
        return Gio.DBusError.get_remote_error(e) or e.message


def on_in(_src, _cond):
    line = sys.stdin.readline().strip()
    if line == 'ask':
        print('ask', ask(), flush=True)
        return True
    loop.quit()
    return False


GLib.io_add_watch(sys.stdin, GLib.IO_IN | GLib.IO_HUP, on_in)
loop.run()
