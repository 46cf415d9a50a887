"""Answer the desktop portal's Access dialog as a screen-reader user would:
through AT-SPI, the accessibility bus every toolkit speaks.

usage: answer_dialog.py APP_NAME CHOICE BUTTON
  APP_NAME  the accessible application that shows the dialog
            (xdg-desktop-portal-gtk, xdg-desktop-portal-kde)
  CHOICE    the radio button to select first ("Always"), or "-"
  BUTTON    the push button to press ("Allow", "Deny"), "-" to only
            read the dialog, or "gone" to wait until no dialog is left

Waits (up to 30 s) for a dialog of APP_NAME with BUTTON, prints one JSON
line: {"texts": [every label's text], "buttons": [...], "radios": [...]},
then selects CHOICE and presses BUTTON. Exit status 1 when no such dialog
came.
"""

import json
import sys

# GTK names a push button "push button", Qt Quick "button"; Qt Quick's
# dialog title is a "heading".
BUTTONS = ("push button", "button")
TEXTS = ("label", "heading")
import time
import warnings

import gi

gi.require_version("Atspi", "2.0")
from gi.repository import Atspi  # noqa: E402

# Atspi 2.46 marks the per-interface getters deprecated in its typelib;
# they are what every AT-SPI client of Debian 12 and 13 has.
warnings.filterwarnings("ignore", category=DeprecationWarning)


def walk(node, depth=0):
    if node is None or depth > 40:
        return
    yield node
    try:
        n = node.get_child_count()
    except Exception:
        return
    for i in range(n):
        try:
            child = node.get_child_at_index(i)
        except Exception:
            continue
        yield from walk(child, depth + 1)


def role(node):
    try:
        return node.get_role_name()
    except Exception:
        return ""


def name(node):
    try:
        return node.get_name() or ""
    except Exception:
        return ""


def text_of(node):
    # GTK's labels give their text through the Text interface; Qt Quick's
    # give an empty one and their text as the accessible name.
    try:
        text = Atspi.Text.get_text(node, 0, Atspi.Text.get_character_count(node))
    except Exception:
        text = ""
    return text or name(node)


def find_dialog(app_name, button):
    desktop = Atspi.get_desktop(0)
    for i in range(desktop.get_child_count()):
        app = desktop.get_child_at_index(i)
        if app is None or name(app) != app_name:
            continue
        for node in walk(app):
            if role(node) in ("dialog", "alert", "frame", "window"):
                buttons = [n for n in walk(node) if role(n) in BUTTONS]
                if button == "-" or any(name(b) == button for b in buttons):
                    if buttons:
                        return node
    return None


def press(node):
    for i in range(Atspi.Action.get_n_actions(node)):
        if Atspi.Action.get_action_name(node, i) in ("click", "press", "activate"):
            return Atspi.Action.do_action(node, i)
    return Atspi.Action.do_action(node, 0)


def main():
    app_name, choice, button = sys.argv[1:4]
    deadline = time.monotonic() + 30
    if button == "gone":
        while time.monotonic() < deadline:
            if find_dialog(app_name, "-") is None:
                print(json.dumps({"gone": True}), flush=True)
                return 0
            time.sleep(0.2)
        print(json.dumps({"gone": False}), flush=True)
        return 1
    dialog = None
    while time.monotonic() < deadline:
        dialog = find_dialog(app_name, button)
        if dialog is not None:
            break
        time.sleep(0.2)
    if dialog is None:
        print(json.dumps({"error": "no dialog"}), flush=True)
        return 1
    # Qt Quick fills the dialog's labels after its window and buttons
    # appear: read until there is more than the title.
    while True:
        nodes = list(walk(dialog))
        texts = [text_of(n) for n in nodes if role(n) in TEXTS and text_of(n)]
        if len(texts) > 1 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    buttons = [n for n in nodes if role(n) in BUTTONS]
    radios = [n for n in nodes if role(n) == "radio button"]
    print(
        json.dumps(
            {
                "texts": texts,
                "buttons": [name(b) for b in buttons],
                "radios": [name(r) for r in radios],
            },
            ensure_ascii=False,
        ),
        flush=True,
    )
    if choice != "-":
        radio = next(r for r in radios if name(r) == choice)
        press(radio)
    if button != "-":
        press(next(b for b in buttons if name(b) == button))
    return 0


if __name__ == "__main__":
    sys.exit(main())
