#!/usr/bin/python3
"""Make and change a calendar and a task list through Evolution Data
Server's own API (EDataServer's registry, ECal's client), as GNOME
Calendar does, for tests/it/calendar_eds.rs.

    eds.py setup NOW      a local calendar and task list with the test's
                          events and tasks (NOW: seconds since the epoch)
    eds.py retitle UID T  the event UID gets the title T
    eds.py remove UID     the event UID goes
    eds.py list           connects (starting EDS by D-Bus activation) and
                          prints the calendars' uids

Times are written relative to NOW, in UTC and in Europe/Berlin.
"""
import sys
import time

import gi

gi.require_version("EDataServer", "1.2")
gi.require_version("ECal", "2.0")
gi.require_version("ICalGLib", "3.0")
from gi.repository import ECal, EDataServer, ICalGLib  # noqa: E402

CAL = "contextd-test-cal"
TASKS = "contextd-test-tasks"


def registry():
    return EDataServer.SourceRegistry.new_sync(None)


def utc(t):
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(t))


def client(reg, uid, kind):
    src = reg.ref_source(uid)
    assert src is not None, f"no source {uid}"
    # The client waits up to this many seconds for the backend to say it is
    # connected, which a local one does not do here (0 waits without end).
    return ECal.Client.connect_sync(src, kind, 1, None)


def add(c, ics):
    comp = ICalGLib.Component.new_from_string(ics)
    assert comp is not None, ics
    ok, _uid = c.create_object_sync(comp, ECal.OperationFlags.NONE, None)
    assert ok, ics


def setup(now):
    reg = registry()
    for uid, name, ext in [
        (CAL, "Test calendar", EDataServer.SOURCE_EXTENSION_CALENDAR),
        (TASKS, "Test tasks", EDataServer.SOURCE_EXTENSION_TASK_LIST),
    ]:
        if reg.ref_source(uid) is None:
            src = EDataServer.Source.new_with_uid(uid, None)
            src.set_display_name(name)
            src.get_extension(ext).set_backend_name("local")
            reg.commit_source_sync(src, None)
    cal = client(reg, CAL, ECal.ClientSourceType.EVENTS)
    # Going on now, with everything a detail is.
    add(cal, "\r\n".join([
        "BEGIN:VEVENT", "UID:now@test", f"DTSTART:{utc(now - 1800)}",
        f"DTEND:{utc(now + 1800)}", "SUMMARY:EDS-NOW-TITLE",
        "LOCATION:EDS-PLACE", "ATTENDEE;CN=EDS-PERSON:mailto:person@example.com",
        "END:VEVENT"]))
    # In two hours.
    add(cal, "\r\n".join([
        "BEGIN:VEVENT", "UID:next@test", f"DTSTART:{utc(now + 7200)}",
        f"DTEND:{utc(now + 9000)}", "SUMMARY:EDS-NEXT-TITLE", "END:VEVENT"]))
    # Daily for three days from tomorrow, in Berlin time.
    start = time.strftime("%Y%m%dT090000", time.gmtime(now + 86400))
    add(cal, "\r\n".join([
        "BEGIN:VEVENT", "UID:daily@test",
        f"DTSTART;TZID=Europe/Berlin:{start}",
        "DURATION:PT30M", "RRULE:FREQ=DAILY;COUNT=3", "SUMMARY:EDS-DAILY",
        "END:VEVENT"]))
    # Over, and far away: neither shows.
    add(cal, "\r\n".join([
        "BEGIN:VEVENT", "UID:past@test", f"DTSTART:{utc(now - 7200)}",
        f"DTEND:{utc(now - 3600)}", "SUMMARY:EDS-PAST", "END:VEVENT"]))
    add(cal, "\r\n".join([
        "BEGIN:VEVENT", "UID:far@test", f"DTSTART:{utc(now + 60 * 86400)}",
        f"DTEND:{utc(now + 60 * 86400 + 3600)}", "SUMMARY:EDS-FAR", "END:VEVENT"]))
    tasks = client(reg, TASKS, ECal.ClientSourceType.TASKS)
    add(tasks, "\r\n".join([
        "BEGIN:VTODO", "UID:task@test", "SUMMARY:EDS-TASK",
        f"DUE:{utc(now + 86400)}", "STATUS:NEEDS-ACTION", "END:VTODO"]))
    add(tasks, "\r\n".join([
        "BEGIN:VTODO", "UID:done@test", "SUMMARY:EDS-DONE",
        "STATUS:COMPLETED", f"COMPLETED:{utc(now - 60)}", "END:VTODO"]))


def retitle(uid, title):
    cal = client(registry(), CAL, ECal.ClientSourceType.EVENTS)
    ok, comp = cal.get_object_sync(uid, None, None)
    assert ok
    comp.set_summary(title)
    ok = cal.modify_object_sync(comp, ECal.ObjModType.ALL, ECal.OperationFlags.NONE, None)
    assert ok


def remove(uid):
    cal = client(registry(), CAL, ECal.ClientSourceType.EVENTS)
    ok = cal.remove_object_sync(uid, None, ECal.ObjModType.ALL, ECal.OperationFlags.NONE, None)
    assert ok


def main():
    cmd = sys.argv[1]
    if cmd == "setup":
        setup(int(sys.argv[2]))
    elif cmd == "retitle":
        retitle(sys.argv[2], sys.argv[3])
    elif cmd == "remove":
        remove(sys.argv[2])
    elif cmd == "list":
        print(" ".join(sorted(s.get_uid() for s in registry().list_sources(None))))
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
