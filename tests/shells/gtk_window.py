import sys, gi
gi.require_version('Gtk', '3.0')
from gi.repository import GLib, Gtk
app_id, title = sys.argv[1], sys.argv[2]
GLib.set_prgname(app_id)
w = Gtk.Window(title=title)
w.connect('destroy', Gtk.main_quit)
w.show_all()
def on_in(src, cond):
    line = sys.stdin.readline()
    if not line or line.strip() == 'quit':
        Gtk.main_quit()
        return False
    cmd, _, arg = line.strip().partition(' ')
    if cmd == 'title':
        w.set_title(arg)
    print('ok', flush=True)
    return True
GLib.io_add_watch(sys.stdin, GLib.IO_IN | GLib.IO_HUP, on_in)
print('ready', flush=True)
Gtk.main()
