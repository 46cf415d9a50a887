'''GeoClue2 (org.freedesktop.GeoClue2, system bus) for the contextd tests: a
python-dbusmock template.

What it serves, as GeoClue 2.6 does:
- the Manager (/org/freedesktop/GeoClue2/Manager): GetClient() returns the
  client object (/org/freedesktop/GeoClue2/Client/1, the same one on every
  call), with the properties DesktopId, RequestedAccuracyLevel,
  DistanceThreshold, TimeThreshold (all writable), Location and Active;
- the client's Start() and Stop(); Start() makes it active and, when a
  location is known, points Location at it and emits LocationUpdated;
- Location objects (/org/freedesktop/GeoClue2/Location/N) with Latitude,
  Longitude, Accuracy, Altitude, Speed, Heading (unknown ones as GeoClue
  says it: -DBL_MAX or -1), Description and Timestamp (tt).

Driving it (org.freedesktop.DBus.Mock, on the Manager):
- SetLocation(d latitude, d longitude, d accuracy, s description): a new
  Location object; an active client's Location moves to it, with
  LocationUpdated(old, new);
- SetAgentAllows(b): what GeoClue's agent answers. Refused, Start() fails
  with org.freedesktop.DBus.Error.AccessDenied, as GeoClue's does when the
  agent (or its configuration) disallows the app.

Parameters: {"allowed": false} to start with the agent refusing.
'''

import time

import dbus

from dbusmock import mockobject

BUS_NAME = 'org.freedesktop.GeoClue2'
MAIN_OBJ = '/org/freedesktop/GeoClue2/Manager'
MAIN_IFACE = 'org.freedesktop.GeoClue2.Manager'
SYSTEM_BUS = True

CLIENT_IFACE = 'org.freedesktop.GeoClue2.Client'
LOCATION_IFACE = 'org.freedesktop.GeoClue2.Location'
MOCK_IFACE = 'org.freedesktop.DBus.Mock'
CLIENT_PATH = '/org/freedesktop/GeoClue2/Client/1'
UNKNOWN = -1.7976931348623157e308

state = {'allowed': True, 'location': '/', 'locations': 0, 'client': None}


def load(mock, parameters):
    state['allowed'] = bool((parameters or {}).get('allowed', True))
    mock.AddProperties(MAIN_IFACE, dbus.Dictionary({
        'InUse': False,
        'AvailableAccuracyLevel': dbus.UInt32(8),
    }, signature='sv'))


def client_start(client):
    if not state['allowed']:
        desktop_id = client.props[CLIENT_IFACE].get('DesktopId', '')
        raise dbus.exceptions.DBusException(
            f"'{desktop_id}' disallowed, no agent for UID {0}",
            name='org.freedesktop.DBus.Error.AccessDenied')
    client.props[CLIENT_IFACE]['Active'] = True
    if state['location'] != '/':
        move(client, '/', state['location'])


def client_stop(client):
    client.props[CLIENT_IFACE]['Active'] = False


def move(client, old, new):
    client.props[CLIENT_IFACE]['Location'] = dbus.ObjectPath(new)
    client.EmitSignal(CLIENT_IFACE, 'LocationUpdated', 'oo',
                      [dbus.ObjectPath(old), dbus.ObjectPath(new)])


@dbus.service.method(MAIN_IFACE, in_signature='', out_signature='o')
def GetClient(self):
    if state['client'] is None:
        self.AddObject(CLIENT_PATH, CLIENT_IFACE, {
            'DesktopId': '',
            'RequestedAccuracyLevel': dbus.UInt32(0),
            'DistanceThreshold': dbus.UInt32(0),
            'TimeThreshold': dbus.UInt32(0),
            'Location': dbus.ObjectPath('/'),
            'Active': False,
        }, [
            ('Start', '', '', client_start),
            ('Stop', '', '', client_stop),
        ])
        state['client'] = CLIENT_PATH
    return dbus.ObjectPath(state['client'])


@dbus.service.method(MAIN_IFACE, in_signature='', out_signature='o')
def CreateClient(self):
    return GetClient(self)


@dbus.service.method(MOCK_IFACE, in_signature='ddds', out_signature='o')
def SetLocation(self, latitude, longitude, accuracy, description):
    state['locations'] += 1
    path = f"/org/freedesktop/GeoClue2/Location/{state['locations']}"
    now = time.time()
    self.AddObject(path, LOCATION_IFACE, {
        'Latitude': dbus.Double(latitude),
        'Longitude': dbus.Double(longitude),
        'Accuracy': dbus.Double(accuracy),
        'Altitude': dbus.Double(UNKNOWN),
        'Speed': dbus.Double(-1.0),
        'Heading': dbus.Double(-1.0),
        'Description': dbus.String(description),
        'Timestamp': dbus.Struct((dbus.UInt64(int(now)), dbus.UInt64(int(now % 1 * 1e6))),
                                 signature='tt'),
    }, [])
    old = state['location']
    state['location'] = path
    client = mockobject.objects.get(state['client']) if state['client'] else None
    if client is not None and client.props[CLIENT_IFACE].get('Active'):
        move(client, old, path)
    return dbus.ObjectPath(path)


@dbus.service.method(MOCK_IFACE, in_signature='b', out_signature='')
def SetAgentAllows(self, allowed):
    state['allowed'] = bool(allowed)
