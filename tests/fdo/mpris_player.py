'''A tiny MPRIS player for the contextd tests: a python-dbusmock template.

Its properties are in place before the main loop answers anything, as with
a real player. Change them with org.freedesktop.DBus.Mock.UpdateProperties
on /org/mpris/MediaPlayer2. With the parameter {"broken": true} its
properties have the wrong types (bad input for the broker).
'''

import dbus
import dbus.service

BUS_NAME = 'org.mpris.MediaPlayer2.contextdtest'
MAIN_OBJ = '/org/mpris/MediaPlayer2'
MAIN_IFACE = 'org.mpris.MediaPlayer2'
PLAYER_IFACE = 'org.mpris.MediaPlayer2.Player'
SYSTEM_BUS = False


def load(mock, parameters):
    parameters = parameters or {}
    broken = parameters.get('broken', False)
    mock.AddProperties(MAIN_IFACE, dbus.Dictionary({
        'Identity': dbus.UInt32(7) if broken else parameters.get('Identity', 'Test Player'),
        'CanQuit': False,
        'CanRaise': False,
        'HasTrackList': False,
        'SupportedUriSchemes': dbus.Array([], signature='s'),
        'SupportedMimeTypes': dbus.Array([], signature='s'),
    }, signature='sv'))
    if broken:
        player = {
            'PlaybackStatus': dbus.Int32(3),
            'Metadata': dbus.String('not a dict'),
        }
    else:
        player = {
            'PlaybackStatus': 'Stopped',
            'Metadata': dbus.Dictionary({}, signature='sv'),
        }
    player.update({
        'Rate': 1.0,
        'Volume': 1.0,
        'Position': dbus.Int64(0),
        'CanPlay': True,
        'CanPause': True,
        'CanControl': True,
    })
    mock.AddProperties(PLAYER_IFACE, dbus.Dictionary(player, signature='sv'))


@dbus.service.method('org.freedesktop.DBus.Mock', in_signature='sa{sv}', out_signature='')
def SetPlayback(self, status, metadata):
    '''Set PlaybackStatus and Metadata in one PropertiesChanged, as players
    do (python-dbusmock's UpdateProperties cannot send a dict).'''
    status = dbus.String(status)
    metadata = dbus.Dictionary(metadata, signature='sv')
    self.props[PLAYER_IFACE]['PlaybackStatus'] = status
    self.props[PLAYER_IFACE]['Metadata'] = metadata
    self.EmitSignal(dbus.PROPERTIES_IFACE, 'PropertiesChanged', 'sa{sv}as', [
        PLAYER_IFACE,
        dbus.Dictionary({'PlaybackStatus': status, 'Metadata': metadata}, signature='sv'),
        dbus.Array([], signature='s'),
    ])
