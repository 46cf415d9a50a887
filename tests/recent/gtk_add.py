'''Add files to the recently used list as a GTK 3 app does
(Gtk.RecentManager.add_item), then run the main loop until GTK has written
$XDG_DATA_HOME/recently-used.xbel with every one of them (or 15 s pass).

Usage: gtk_add.py PATH...   (needs a display: GTK reads its settings there)
'''

import os
import sys

import gi

gi.require_version('Gtk', '3.0')
from gi.repository import GLib, Gtk  # noqa: E402

uris = [GLib.filename_to_uri(os.path.abspath(p)) for p in sys.argv[1:]]
path = os.path.join(os.environ['XDG_DATA_HOME'], 'recently-used.xbel')
manager = Gtk.RecentManager.get_default()
loop = GLib.MainLoop()


def written():
    try:
        with open(path, encoding='utf-8') as f:
            text = f.read()
    except OSError:
        return False
    return all(u in text for u in uris)


def check(*_):
    if written():
        loop.quit()
    return True


manager.connect('changed', check)
GLib.timeout_add(50, check)
GLib.timeout_add_seconds(15, loop.quit)
for u in uris:
    if not manager.add_item(u):
        sys.exit(f'add_item({u}) refused')
loop.run()
if not written():
    sys.exit(f'GTK did not write {uris} to {path} within 15 s')
