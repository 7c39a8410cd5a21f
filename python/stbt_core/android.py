"""``stbt.android``: drive an Android device (an Android TV box, a phone or
a tablet) with ADB, the Android Debug Bridge.

Everything goes through the ``adb`` command (Debian package ``adb``), run as
a child process: key presses (``input keyevent``), taps and swipes (``input
tap`` / ``input swipe``), screenshots (``exec-out screencap -p``), logcat,
and any other ``adb`` command through ``AdbDevice.adb`` or the module's
``adb``. Defaults come from the ``[android]`` section of the test pack's
configuration::

    [android]
    address = 192.168.1.50       # a Network ADB address, or a USB serial number
    adb_server =                 # host[:port] of the ADB server (default: this machine)
    adb_binary = adb
    tcpip =                      # true/false (default: true for an IP address or host:port)
    coordinate_system = HDMI_720P

The test sees the device's screen in the coordinates of its video capture
(``CoordinateSystem``); taps and swipes are translated to the device's own
pixels, and ``AdbDevice.get_frame`` scales its screenshot the other way.

farmhand's own code, written from stb-tester's public manual and the
behaviour its tests show; no code of stb-tester's.
"""

import contextlib
import enum
import re
import subprocess
import time
from collections import namedtuple

from stbt_core._config import get_config
from stbt_core._errors import ConfigurationError
from stbt_core._logging import debug

__all__ = ["adb", "AdbDevice", "AdbError", "CoordinateSystem"]

# How long the input commands may take: the device answers in well under a second when it is there.
_INPUT_TIMEOUT_SECS = 10
_SCREENCAP_TIMEOUT_SECS = 30
_LOGCAT_STOP_SECS = 5


class CoordinateSystem(enum.Enum):
    """How the test sees the device's screen, which decides how ``tap`` and
    ``swipe`` coordinates map to the device's pixels and how ``get_frame``
    scales its screenshot.

    - ``ADB_NATIVE``: screenshots over ADB at the device's own resolution;
      coordinates are the device's pixels.
    - ``ADB_720P``: screenshots over ADB scaled to 720p: 1280x720 in
      landscape, 720x1280 in portrait.
    - ``HDMI_720P``: the node's video capture of the device's HDMI output at
      1280x720 (an Android TV box, or a phone through an MHL adapter). A
      portrait screen is shown upright in the middle, at the full height,
      with black bars left and right.
    - ``CAMERA_720P``: a camera filming the screen at 1280x720, the device
      lying in landscape; a portrait screen appears turned a quarter turn
      anticlockwise (its top on the left), filling the picture.
    """

    ADB_NATIVE = "ADB_NATIVE"
    ADB_720P = "ADB_720P"
    HDMI_720P = "HDMI_720P"
    CAMERA_720P = "CAMERA_720P"


CoordinateSystem.__module__ = "stbt_core.android"


class AdbError(subprocess.CalledProcessError):
    """An ``adb`` command failed: ``returncode``, ``cmd`` (the argument
    list), ``output`` (what it printed, when captured) and ``devices``
    (what ``adb devices -l`` listed then, when known). A subclass of
    ``subprocess.CalledProcessError``."""

    def __init__(self, returncode, cmd, output=None, devices=None, stderr=None):
        super().__init__(returncode, cmd, output, stderr)
        self.devices = devices

    def __str__(self):
        text = "adb command %s failed with exit status %s" % (
            " ".join(str(a) for a in self.cmd), self.returncode)
        for label, value in (("output", self.output), ("stderr", self.stderr)):
            value = _text(value).strip()
            if value:
                text += "\n%s: %s" % (label, value)
        if self.devices is not None:
            text += "\ndevices: %s" % (_text(self.devices).strip() or "(none listed)")
        return text


AdbError.__module__ = "stbt_core.android"


def _text(value):
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def adb(args, **kwargs):
    """Run an ``adb`` command on the configured device: the same as
    ``AdbDevice().adb(args, **kwargs)``, with every default from the
    ``[android]`` configuration."""
    return AdbDevice().adb(args, **kwargs)


_Dimensions = namedtuple("_Dimensions", "width height")
_Device = namedtuple("_Device", "serial state attributes")


class AdbDevice:
    """An Android device reached through ADB.

    - ``address``: the device's Network ADB address (``192.168.1.50`` or
      ``host:port``; port 5555 when none is given) or its USB serial number
      (``adb devices -l`` lists them). Default ``[android] address``; with
      none, the ADB server's only device.
    - ``adb_server``: ``host`` or ``host:port`` of the ADB server (the
      machine the device is plugged into); default ``[android]
      adb_server``, else this machine.
    - ``adb_binary``: the ``adb`` executable; default ``[android]
      adb_binary``, else ``adb`` from ``PATH``.
    - ``tcpip``: reach the device over the network: its address is
      ``adb connect``-ed before the first command when the server does not
      list it as connected. Default ``[android] tcpip``, else true when the
      address is an IP address or ends in ``:port``.
    - ``coordinate_system``: a ``CoordinateSystem``; default ``[android]
      coordinate_system``, else ``HDMI_720P``.
    """

    def __init__(self, address=None, adb_server=None, adb_binary=None, tcpip=None, coordinate_system=None):
        self.address = address if address is not None else _setting("address")
        self.adb_server = adb_server if adb_server is not None else _setting("adb_server")
        self.adb_binary = adb_binary or _setting("adb_binary") or "adb"
        if tcpip is None:
            tcpip = get_config("android", "tcpip", default=None, type_=bool) if _setting("tcpip") else None
        if tcpip is None:
            tcpip = _looks_like_a_network_address(self.address)
        self.tcpip = bool(tcpip)
        if self.tcpip and not self.address:
            raise ConfigurationError("AdbDevice(tcpip=True) needs the device's address ([android] address)")
        if coordinate_system is None:
            coordinate_system = get_config("android", "coordinate_system", default=CoordinateSystem.HDMI_720P,
                                           type_=CoordinateSystem)
        if not isinstance(coordinate_system, CoordinateSystem):
            raise TypeError("coordinate_system must be a stbt.android.CoordinateSystem, not %r"
                            % (coordinate_system,))
        self.coordinate_system = coordinate_system
        self._connected = False

    def __repr__(self):
        return "AdbDevice(address=%r, adb_server=%r, adb_binary=%r, tcpip=%r, coordinate_system=%s)" % (
            self.address, self.adb_server, self.adb_binary, self.tcpip, self.coordinate_system)

    # The device's serial as the ADB server names it (a network device: host:port).
    @property
    def _serial(self):
        if self.address and self.tcpip and not _has_port(self.address):
            return self.address + ":5555"
        return self.address

    def _server_args(self):
        if not self.adb_server:
            return []
        host, port = _split_port(self.adb_server)
        return ["-H", host] + (["-P", port] if port else [])

    def _command(self, args, device=True):
        serial = ["-s", self._serial] if device and self._serial else []
        return [self.adb_binary] + self._server_args() + serial + list(args)

    def adb(self, args, timeout=None, **kwargs):
        """Run ``adb <args>`` on this device, as ``subprocess.run`` does:
        ``args`` is a list of arguments (``["shell", "am", "start", "-n",
        "com.example/.Main"]``), ``timeout`` is in seconds, and the other
        keyword arguments (``capture_output=True``, ``text=True``,
        ``check=True``, ``stdout=``, ...) go to ``subprocess.run``. Returns
        its ``subprocess.CompletedProcess``. With ``check=True`` a failure
        raises ``AdbError``; a network device that cannot be connected
        raises ``AdbError`` too."""
        if isinstance(args, (str, bytes)) or not all(isinstance(a, (str, bytes, int)) for a in args):
            raise TypeError("args is a list of adb's arguments, such as [\"shell\", \"ls\"], not %r" % (args,))
        args = [str(a) if isinstance(a, int) else a for a in args]
        if self.tcpip:
            self._connect()
        command = self._command(args)
        debug("adb: %s", " ".join(_text(a) for a in command))
        try:
            return subprocess.run(command, timeout=timeout, **kwargs)  # pylint: disable=subprocess-run-check
        except subprocess.CalledProcessError as e:
            raise AdbError(e.returncode, e.cmd, e.output, self._devices_or_none(), e.stderr) from None
        except FileNotFoundError as e:
            raise _no_adb(self.adb_binary) from e

    def devices(self):
        """What ``adb devices -l`` prints: each device the ADB server knows,
        its state (``device``, ``offline``, ``unauthorized``) and details."""
        command = [self.adb_binary] + self._server_args() + ["devices", "-l"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=_INPUT_TIMEOUT_SECS, check=False)
        except FileNotFoundError as e:
            raise _no_adb(self.adb_binary) from e
        if done.returncode != 0:
            raise AdbError(done.returncode, command, done.stdout, None, done.stderr)
        return done.stdout

    def _devices_or_none(self):
        try:
            return self.devices()
        except (AdbError, subprocess.TimeoutExpired, OSError):
            return None

    def _connect(self):
        """``adb connect`` a network device unless the server lists it as connected already."""
        serial = self._serial
        listed = _parse_devices(self.devices()).get(serial)
        if listed is not None and listed.state == "device":
            self._connected = True
            return
        command = [self.adb_binary] + self._server_args() + ["connect", serial]
        debug("adb: %s", " ".join(command))
        done = subprocess.run(command, capture_output=True, text=True, timeout=_INPUT_TIMEOUT_SECS, check=False)
        said = (done.stdout + done.stderr).strip()
        # adb connect exits 0 even when it could not connect; its words say what happened.
        if done.returncode != 0 or not re.search(r"\bconnected to\b", said) or "failed" in said:
            raise AdbError(done.returncode, command, said, self._devices_or_none())
        self._connected = True

    def _run_checked(self, args, timeout):
        return self.adb(args, timeout=timeout, check=True, capture_output=True)

    def press(self, key):
        """Press a key: an Android key code (``"KEYCODE_HOME"``,
        ``"KEYCODE_DPAD_CENTER"``, the names of Android's ``KeyEvent``) or
        one of stb-tester's names with an Android equivalent (``"KEY_OK"``,
        ``"KEY_BACK"``). An unknown name raises ``ValueError`` before
        anything is sent (the device would accept any name silently)."""
        code = _android_keycode(key)
        debug("AdbDevice.press(%r)", code)
        self._run_checked(["shell", "input", "keyevent", code], _INPUT_TIMEOUT_SECS)

    def tap(self, position):
        """Tap the screen at ``position``: an ``(x, y)`` pair or a
        ``stbt.Region`` (its centre), in this device's coordinate system."""
        x, y = self._native(position)
        debug("AdbDevice.tap(%r) -> input tap %d %d", position, x, y)
        self._run_checked(["shell", "input", "tap", str(x), str(y)], _INPUT_TIMEOUT_SECS)

    def swipe(self, start_position, end_position):
        """Swipe from ``start_position`` to ``end_position`` (each an ``(x,
        y)`` pair or a ``stbt.Region``, in this device's coordinate system)."""
        x1, y1 = self._native(start_position)
        x2, y2 = self._native(end_position)
        debug("AdbDevice.swipe(%r, %r) -> input swipe %d %d %d %d", start_position, end_position, x1, y1, x2, y2)
        self._run_checked(["shell", "input", "swipe", str(x1), str(y1), str(x2), str(y2)], _INPUT_TIMEOUT_SECS)

    def _native(self, position):
        x, y = _centre_point(position)
        if self.coordinate_system is CoordinateSystem.ADB_NATIVE:
            return x, y
        return _to_native_coordinates(x, y, self.coordinate_system, self._display_dimensions())

    def _display_dimensions(self):
        done = self._run_checked(["shell", "dumpsys", "window"], _INPUT_TIMEOUT_SECS)
        return _parse_display_dimensions(_text(done.stdout))

    def get_frame(self, coordinate_system=None):
        """A screenshot taken over ADB, as a ``stbt.Frame`` scaled (and, for
        a portrait screen, placed or turned) as ``coordinate_system``
        (default: this device's) shows the screen, so it compares with the
        frames of the node's capture. Its ``time`` is when the screenshot
        was asked for."""
        import numpy  # pylint: disable=import-outside-toplevel
        import cv2  # pylint: disable=import-outside-toplevel
        from stbt_core._frames import Frame  # pylint: disable=import-outside-toplevel

        system = coordinate_system or self.coordinate_system
        asked = time.time()
        png = self._run_checked(["exec-out", "screencap", "-p"], _SCREENCAP_TIMEOUT_SECS).stdout
        image = cv2.imdecode(numpy.frombuffer(png, dtype=numpy.uint8), cv2.IMREAD_COLOR) if png else None
        if image is None:
            raise AdbError(0, self._command(["exec-out", "screencap", "-p"]),
                           "screencap did not give a PNG picture (%d bytes)" % len(png or b""))
        return Frame(_resize(image, system), time=asked)

    def logcat(self, filename="logcat.log", logcat_args=None):
        """Save the device's log (``adb logcat``) into ``filename`` (in the
        test's working directory, its result folder, unless absolute) while
        a ``with`` block or a decorated test function runs::

            with device.logcat():
                ...

            @stbt.android.AdbDevice().logcat("app.log", ["-s", "MyApp:V"])
            def test_launch():
                ...

        ``logcat_args`` are extra arguments of ``adb logcat`` (filters,
        ``-b all``, ``-v`` format). The file starts with what the device's
        log buffer holds already (appended to what the file had); logcat is
        stopped when the block ends."""
        return _Logcat(self, filename, list(logcat_args or ()))


class _Logcat(contextlib.ContextDecorator):
    """``adb logcat`` into a file for the length of a ``with`` block or a call."""

    def __init__(self, device, filename, args):
        self.device, self.filename, self.args = device, filename, args
        self._runs = []

    def __enter__(self):
        if self.device.tcpip:
            self.device._connect()  # pylint: disable=protected-access
        command = self.device._command(["logcat"] + self.args)  # pylint: disable=protected-access
        debug("adb: %s > %s", " ".join(command), self.filename)
        # Both stay open after this method returns: __exit__ stops logcat and closes the file.
        out = open(self.filename, "ab")  # pylint: disable=consider-using-with
        try:
            process = subprocess.Popen(  # pylint: disable=consider-using-with
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        except FileNotFoundError as e:
            out.close()
            raise _no_adb(self.device.adb_binary) from e
        self._runs.append((process, out))
        return self

    def __exit__(self, *exc):
        process, out = self._runs.pop()
        try:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(_LOGCAT_STOP_SECS)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        finally:
            out.close()
        return False


def _setting(key):
    """``[android] key``, or None when missing or empty."""
    value = get_config("android", key, default=None)
    if value is None or not value.strip():
        return None
    return value.strip()


def _no_adb(binary):
    return ConfigurationError(
        "cannot run %r: ADB is not installed (Debian package adb) or [android] adb_binary is wrong" % (binary,))


_IPV4 = re.compile(r"^\d{1,3}(\.\d{1,3}){3}(:\d+)?$")


def _has_port(address):
    return re.search(r":\d+$", address) is not None


def _looks_like_a_network_address(address):
    return bool(address) and (_IPV4.match(address) is not None or _has_port(address))


def _split_port(server):
    host, sep, port = server.rpartition(":")
    if sep and port.isdigit() and host:
        return host, port
    return server, None


def _centre_point(position):
    """``(x, y)`` integers of a Region's centre, or of an ``(x, y)`` pair (numbers or numeric strings)."""
    from stbt_core._types import Region  # pylint: disable=import-outside-toplevel

    if isinstance(position, Region):
        return (position.x + position.right) // 2, (position.y + position.bottom) // 2
    if isinstance(position, (str, bytes)) or not hasattr(position, "__len__") or len(position) != 2:
        raise TypeError("a position is an (x, y) pair or a stbt.Region, not %r" % (position,))
    try:
        return int(position[0]), int(position[1])
    except (TypeError, ValueError) as e:
        raise TypeError("a position is an (x, y) pair of numbers, not %r" % (position,)) from e


def _parse_display_dimensions(dumpsys_output):
    """The display's current size (``cur=WIDTHxHEIGHT`` in ``dumpsys window``), in its current orientation."""
    m = re.search(r"\bcur=(\d+)x(\d+)\b", dumpsys_output)
    if m is None:
        raise ValueError("the display's size (cur=WIDTHxHEIGHT) is not in dumpsys window's output")
    return _Dimensions(int(m.group(1)), int(m.group(2)))


def _parse_devices(devices_output):
    """``adb devices -l`` as ``{serial: _Device(serial, state, attributes)}``."""
    found = {}
    for line in devices_output.splitlines():
        if not line.strip() or line.startswith("*") or line.startswith("List of devices"):
            continue
        parts = line.split(None, 2)
        if len(parts) < 2:
            continue
        attributes = parts[2].strip() if len(parts) == 3 else ""
        found[parts[0]] = _Device(parts[0], parts[1], attributes)
    return found


def _is_portrait(width, height):
    return height > width


def _hdmi_portrait_columns(width, height):
    """The columns of a 720p HDMI picture that a portrait screen of ``width``
    x ``height`` fills, upright at the full height: ``(left, shown)``."""
    shown = int(round(width * 720.0 / height))
    return (1280 - shown) // 2, shown


def _scaled(image, size):
    # OpenCV's default (bilinear) scaling, as stb-tester's frames are scaled: a reference image
    # cut from one of its frames matches the same pixels here.
    import cv2  # pylint: disable=import-outside-toplevel
    return cv2.resize(image, size)


def _resize(image, coordinate_system):
    """A screenshot at the device's resolution, as ``coordinate_system`` shows the screen."""
    import numpy  # pylint: disable=import-outside-toplevel

    height, width = image.shape[:2]
    if coordinate_system is CoordinateSystem.ADB_NATIVE:
        return image
    portrait = _is_portrait(width, height)
    if coordinate_system is CoordinateSystem.ADB_720P:
        return _scaled(image, (720, 1280) if portrait else (1280, 720))
    if not portrait:
        return _scaled(image, (1280, 720))
    if coordinate_system is CoordinateSystem.HDMI_720P:
        left, shown = _hdmi_portrait_columns(width, height)
        out = numpy.zeros((720, 1280) + image.shape[2:], dtype=image.dtype)
        out[:, left:left + shown] = _scaled(image, (shown, 720))
        return out
    # CAMERA_720P: the screen turned a quarter turn anticlockwise, filling the picture.
    return _scaled(numpy.ascontiguousarray(numpy.rot90(image)), (1280, 720))


def _to_native_coordinates(x, y, coordinate_system, device_resolution):
    """``(x, y)`` in ``coordinate_system``'s picture, as the device's own
    pixels (``device_resolution``: its current width and height), truncated
    to whole pixels as stb-tester does. A point in the black bars beside (or
    below) a portrait screen's HDMI picture is a ``ValueError``: it is on no
    pixel of the device."""
    width, height = device_resolution
    if coordinate_system is CoordinateSystem.ADB_NATIVE:
        return int(x), int(y)
    portrait = _is_portrait(width, height)
    if not portrait or coordinate_system is CoordinateSystem.ADB_720P:
        frame_w, frame_h = (720, 1280) if portrait else (1280, 720)
        nx, ny = x * width / frame_w, y * height / frame_h
    elif coordinate_system is CoordinateSystem.HDMI_720P:
        left, shown = _hdmi_portrait_columns(width, height)
        if not (left <= x < left + shown and 0 <= y < 720):
            raise ValueError(
                "(%s, %s) is outside the device's picture: in HDMI_720P this portrait screen fills x %d to %d "
                "and y 0 to 719" % (x, y, left, left + shown - 1))
        scale = height / 720.0
        # The picture's own middle over the device's (the bars' half pixel kept), within its edges.
        nx = min(max((x - (1280 - width / scale) / 2.0) * scale, 0), width - 1)
        ny = y * scale
    else:  # CAMERA_720P, portrait: undo the quarter turn anticlockwise
        nx, ny = width - y * width / 720.0, x * height / 1280.0
    return int(nx), int(ny)


# stb-tester's key names with an Android equivalent.
_KEYCODE_MAPPINGS = {
    "KEY_BACK": "KEYCODE_BACK", "KEY_BACKSPACE": "KEYCODE_DEL", "KEY_BLUE": "KEYCODE_PROG_BLUE",
    "KEY_CHANNELDOWN": "KEYCODE_CHANNEL_DOWN", "KEY_CHANNELUP": "KEYCODE_CHANNEL_UP",
    "KEY_DELETE": "KEYCODE_FORWARD_DEL", "KEY_DOWN": "KEYCODE_DPAD_DOWN", "KEY_END": "KEYCODE_MOVE_END",
    "KEY_ENTER": "KEYCODE_ENTER", "KEY_EPG": "KEYCODE_GUIDE", "KEY_ESC": "KEYCODE_ESCAPE",
    "KEY_EXIT": "KEYCODE_BACK", "KEY_FASTFORWARD": "KEYCODE_MEDIA_FAST_FORWARD", "KEY_FORWARD": "KEYCODE_FORWARD",
    "KEY_GREEN": "KEYCODE_PROG_GREEN", "KEY_GUIDE": "KEYCODE_GUIDE", "KEY_HELP": "KEYCODE_HELP",
    "KEY_HOME": "KEYCODE_HOME", "KEY_INFO": "KEYCODE_INFO", "KEY_INSERT": "KEYCODE_INSERT",
    "KEY_LEFT": "KEYCODE_DPAD_LEFT", "KEY_MENU": "KEYCODE_MENU", "KEY_MUTE": "KEYCODE_VOLUME_MUTE",
    "KEY_NEXT": "KEYCODE_MEDIA_NEXT", "KEY_OK": "KEYCODE_DPAD_CENTER", "KEY_PAGEDOWN": "KEYCODE_PAGE_DOWN",
    "KEY_PAGEUP": "KEYCODE_PAGE_UP", "KEY_PAUSE": "KEYCODE_MEDIA_PAUSE", "KEY_PLAY": "KEYCODE_MEDIA_PLAY",
    "KEY_PLAYPAUSE": "KEYCODE_MEDIA_PLAY_PAUSE", "KEY_POWER": "KEYCODE_POWER",
    "KEY_PREVIOUS": "KEYCODE_MEDIA_PREVIOUS", "KEY_RECORD": "KEYCODE_MEDIA_RECORD", "KEY_RED": "KEYCODE_PROG_RED",
    "KEY_REWIND": "KEYCODE_MEDIA_REWIND", "KEY_RIGHT": "KEYCODE_DPAD_RIGHT", "KEY_SEARCH": "KEYCODE_SEARCH",
    "KEY_SELECT": "KEYCODE_DPAD_CENTER", "KEY_SETTINGS": "KEYCODE_SETTINGS", "KEY_SLEEP": "KEYCODE_SLEEP",
    "KEY_SPACE": "KEYCODE_SPACE", "KEY_STOP": "KEYCODE_MEDIA_STOP", "KEY_SUBTITLE": "KEYCODE_CAPTIONS",
    "KEY_TAB": "KEYCODE_TAB", "KEY_TEXT": "KEYCODE_TV_TELETEXT", "KEY_TV": "KEYCODE_TV", "KEY_UP": "KEYCODE_DPAD_UP",
    "KEY_VOLUMEDOWN": "KEYCODE_VOLUME_DOWN", "KEY_VOLUMEUP": "KEYCODE_VOLUME_UP", "KEY_WAKEUP": "KEYCODE_WAKEUP",
    "KEY_YELLOW": "KEYCODE_PROG_YELLOW", "KEY_ZOOMIN": "KEYCODE_ZOOM_IN", "KEY_ZOOMOUT": "KEYCODE_ZOOM_OUT",
}
_KEYCODE_MAPPINGS.update({"KEY_%d" % n: "KEYCODE_%d" % n for n in range(10)})
_KEYCODE_MAPPINGS.update({"KEY_F%d" % n: "KEYCODE_F%d" % n for n in range(1, 13)})

# The key names of Android's KeyEvent (KEYCODE_ + each), in key-code order.
_ANDROID_KEYCODES = frozenset("KEYCODE_" + name for name in (
    "UNKNOWN SOFT_LEFT SOFT_RIGHT HOME BACK CALL ENDCALL 0 1 2 3 4 5 6 7 8 9 STAR POUND DPAD_UP DPAD_DOWN "
    "DPAD_LEFT DPAD_RIGHT DPAD_CENTER VOLUME_UP VOLUME_DOWN POWER CAMERA CLEAR "
    "A B C D E F G H I J K L M N O P Q R S T U V W X Y Z "
    "COMMA PERIOD ALT_LEFT ALT_RIGHT SHIFT_LEFT SHIFT_RIGHT TAB SPACE SYM EXPLORER ENVELOPE ENTER DEL GRAVE "
    "MINUS EQUALS LEFT_BRACKET RIGHT_BRACKET BACKSLASH SEMICOLON APOSTROPHE SLASH AT NUM HEADSETHOOK FOCUS "
    "PLUS MENU NOTIFICATION SEARCH MEDIA_PLAY_PAUSE MEDIA_STOP MEDIA_NEXT MEDIA_PREVIOUS MEDIA_REWIND "
    "MEDIA_FAST_FORWARD MUTE PAGE_UP PAGE_DOWN PICTSYMBOLS SWITCH_CHARSET BUTTON_A BUTTON_B BUTTON_C "
    "BUTTON_X BUTTON_Y BUTTON_Z BUTTON_L1 BUTTON_R1 BUTTON_L2 BUTTON_R2 BUTTON_THUMBL BUTTON_THUMBR "
    "BUTTON_START BUTTON_SELECT BUTTON_MODE ESCAPE FORWARD_DEL CTRL_LEFT CTRL_RIGHT CAPS_LOCK SCROLL_LOCK "
    "META_LEFT META_RIGHT FUNCTION SYSRQ BREAK MOVE_HOME MOVE_END INSERT FORWARD MEDIA_PLAY MEDIA_PAUSE "
    "MEDIA_CLOSE MEDIA_EJECT MEDIA_RECORD F1 F2 F3 F4 F5 F6 F7 F8 F9 F10 F11 F12 NUM_LOCK "
    "NUMPAD_0 NUMPAD_1 NUMPAD_2 NUMPAD_3 NUMPAD_4 NUMPAD_5 NUMPAD_6 NUMPAD_7 NUMPAD_8 NUMPAD_9 "
    "NUMPAD_DIVIDE NUMPAD_MULTIPLY NUMPAD_SUBTRACT NUMPAD_ADD NUMPAD_DOT NUMPAD_COMMA NUMPAD_ENTER "
    "NUMPAD_EQUALS NUMPAD_LEFT_PAREN NUMPAD_RIGHT_PAREN VOLUME_MUTE INFO CHANNEL_UP CHANNEL_DOWN ZOOM_IN "
    "ZOOM_OUT TV WINDOW GUIDE DVR BOOKMARK CAPTIONS SETTINGS TV_POWER TV_INPUT STB_POWER STB_INPUT AVR_POWER "
    "AVR_INPUT PROG_RED PROG_GREEN PROG_YELLOW PROG_BLUE APP_SWITCH BUTTON_1 BUTTON_2 BUTTON_3 BUTTON_4 "
    "BUTTON_5 BUTTON_6 BUTTON_7 BUTTON_8 BUTTON_9 BUTTON_10 BUTTON_11 BUTTON_12 BUTTON_13 BUTTON_14 "
    "BUTTON_15 BUTTON_16 LANGUAGE_SWITCH MANNER_MODE 3D_MODE CONTACTS CALENDAR MUSIC CALCULATOR "
    "ZENKAKU_HANKAKU EISU MUHENKAN HENKAN KATAKANA_HIRAGANA YEN RO KANA ASSIST BRIGHTNESS_DOWN BRIGHTNESS_UP "
    "MEDIA_AUDIO_TRACK SLEEP WAKEUP PAIRING MEDIA_TOP_MENU 11 12 LAST_CHANNEL TV_DATA_SERVICE VOICE_ASSIST "
    "TV_RADIO_SERVICE TV_TELETEXT TV_NUMBER_ENTRY TV_TERRESTRIAL_ANALOG TV_TERRESTRIAL_DIGITAL TV_SATELLITE "
    "TV_SATELLITE_BS TV_SATELLITE_CS TV_SATELLITE_SERVICE TV_NETWORK TV_ANTENNA_CABLE TV_INPUT_HDMI_1 "
    "TV_INPUT_HDMI_2 TV_INPUT_HDMI_3 TV_INPUT_HDMI_4 TV_INPUT_COMPOSITE_1 TV_INPUT_COMPOSITE_2 "
    "TV_INPUT_COMPONENT_1 TV_INPUT_COMPONENT_2 TV_INPUT_VGA_1 TV_AUDIO_DESCRIPTION "
    "TV_AUDIO_DESCRIPTION_MIX_UP TV_AUDIO_DESCRIPTION_MIX_DOWN TV_ZOOM_MODE TV_CONTENTS_MENU "
    "TV_MEDIA_CONTEXT_MENU TV_TIMER_PROGRAMMING HELP NAVIGATE_PREVIOUS NAVIGATE_NEXT NAVIGATE_IN NAVIGATE_OUT "
    "STEM_PRIMARY STEM_1 STEM_2 STEM_3 DPAD_UP_LEFT DPAD_DOWN_LEFT DPAD_UP_RIGHT DPAD_DOWN_RIGHT "
    "MEDIA_SKIP_FORWARD MEDIA_SKIP_BACKWARD MEDIA_STEP_FORWARD MEDIA_STEP_BACKWARD SOFT_SLEEP CUT COPY PASTE "
    "SYSTEM_NAVIGATION_UP SYSTEM_NAVIGATION_DOWN SYSTEM_NAVIGATION_LEFT SYSTEM_NAVIGATION_RIGHT ALL_APPS "
    "REFRESH THUMBS_UP THUMBS_DOWN PROFILE_SWITCH VIDEO_APP_1 VIDEO_APP_2 VIDEO_APP_3 VIDEO_APP_4 VIDEO_APP_5 "
    "VIDEO_APP_6 VIDEO_APP_7 VIDEO_APP_8 FEATURED_APP_1 FEATURED_APP_2 FEATURED_APP_3 FEATURED_APP_4 "
    "DEMO_APP_1 DEMO_APP_2 DEMO_APP_3 DEMO_APP_4 KEYBOARD_BACKLIGHT_DOWN KEYBOARD_BACKLIGHT_UP "
    "KEYBOARD_BACKLIGHT_TOGGLE STYLUS_BUTTON_PRIMARY STYLUS_BUTTON_SECONDARY STYLUS_BUTTON_TERTIARY "
    "STYLUS_BUTTON_TAIL RECENT_APPS MACRO_1 MACRO_2 MACRO_3 MACRO_4"
).split())


def _android_keycode(key):
    if isinstance(key, enum.Enum):
        key = key.value
    if not isinstance(key, str):
        raise ValueError("a key is a name such as \"KEYCODE_HOME\" or \"KEY_OK\", not %r" % (key,))
    code = _KEYCODE_MAPPINGS.get(key, key)
    if code not in _ANDROID_KEYCODES:
        raise ValueError("unknown key %r: use an Android key code (KEYCODE_HOME, KEYCODE_DPAD_CENTER, ...) "
                         "or a stbt name with an Android equivalent (KEY_OK, KEY_BACK, ...)" % (key,))
    return code
