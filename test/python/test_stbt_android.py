"""stbt.android: AdbDevice and adb() drive the ``adb`` command.

Most tests run against a stand-in ``adb`` (FAKE_ADB below, written to a
temporary folder): it checks its arguments as adb does (global options, one
device chosen with -s or the only one there), records each call, and
answers from a JSON state file (the devices the server knows, the addresses
``adb connect`` reaches, the display size, the screenshot). The last class
runs Debian's real ``adb`` when it is installed: its server starts without
any device, so only the refusals are checked there.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

import numpy

from stbt_core import _config
from stbt_core._errors import ConfigurationError
from stbt_core._types import Region
from stbt_core.android import (AdbDevice, AdbError, CoordinateSystem, _centre_point, _Device, _Dimensions,
                               _parse_devices, _parse_display_dimensions, _resize, _to_native_coordinates, adb)
from _env import restore_env

try:
    import cv2
except ImportError:  # pragma: no cover - the tests that need pictures are skipped
    cv2 = None

FAKE_ADB = r'''#!/usr/bin/env python3
import json, os, sys, time
state_dir = os.environ["FAKE_ADB_DIR"]
state = json.load(open(os.path.join(state_dir, "state.json")))
argv = sys.argv[1:]
with open(os.path.join(state_dir, "calls.jsonl"), "a") as f:
    f.write(json.dumps(argv) + "\n")
def fail(text, status=1):
    sys.stderr.write(text + "\n")
    sys.exit(status)
server, serial = None, None
while argv and argv[0] in ("-H", "-P", "-s"):
    if len(argv) < 2:
        fail("adb: option %s needs an argument" % argv[0])
    if argv[0] == "-s":
        serial = argv[1]
    argv = argv[2:]
if not argv:
    fail("adb: no command")
command, rest = argv[0], argv[1:]
devices = state["devices"]
def save():
    json.dump(state, open(os.path.join(state_dir, "state.json"), "w"))
if command == "devices":
    print("List of devices attached")
    for s, st in devices.items():
        print("%-22s %s%s" % (s, st, " product:fake model:Fake_TV transport_id:1" if rest == ["-l"] else ""))
    print()
    sys.exit(0)
if command == "connect":
    target = rest[0]
    if target in state.get("connectable", []):
        was = devices.get(target) == "device"
        devices[target] = "device"
        save()
        print(("already connected to %s" if was else "connected to %s") % target)
    else:
        print("failed to connect to '%s': Connection refused" % target)
    sys.exit(0)
ready = [s for s, st in devices.items() if st == "device"]
if serial is None:
    if not ready:
        fail("adb: no devices/emulators found")
    if len(ready) > 1:
        fail("adb: more than one device/emulator")
    serial = ready[0]
elif devices.get(serial) != "device":
    fail("adb: device '%s' not found" % serial)
if command == "exec-out" and rest == ["screencap", "-p"]:
    sys.stdout.buffer.write(open(os.path.join(state_dir, "screen.png"), "rb").read())
    sys.exit(0)
if command == "logcat":
    print("logcat %s" % " ".join(rest), flush=True)
    for line in state.get("logcat", []):
        print(line, flush=True)
    time.sleep(60)
    sys.exit(0)
if command != "shell":
    fail("adb: unknown command %s" % command)
if rest == ["dumpsys", "window"]:
    w, h = state["display"]
    print("WINDOW MANAGER DISPLAY CONTENTS (dumpsys window displays)")
    print("  Display: mDisplayId=0")
    print("    init=%dx%d 320dpi cur=%dx%d app=%dx%d" % (min(w, h), max(w, h), w, h, w, h))
    sys.exit(0)
if rest[:2] == ["input", "keyevent"] and len(rest) == 3:
    sys.exit(0)
if rest[:2] == ["input", "tap"] and len(rest) == 4 and all(a.lstrip("-").isdigit() for a in rest[2:]):
    sys.exit(0)
if rest[:2] == ["input", "swipe"] and len(rest) == 6 and all(a.lstrip("-").isdigit() for a in rest[2:]):
    sys.exit(0)
if rest[:1] == ["echo"]:
    print(" ".join(rest[1:]))
    sys.exit(0)
if rest == ["false"]:
    sys.exit(1)
fail("/system/bin/sh: %s: inaccessible or not found" % " ".join(rest), 127)
'''


class WithFakeAdb:
    """A stand-in ``adb`` on PATH and an empty test pack for ``[android]``."""

    def setUp(self):  # pylint: disable=invalid-name
        self.dir = tempfile.mkdtemp(prefix="stbt-android-")
        self.bin = os.path.join(self.dir, "bin")
        os.mkdir(self.bin)
        path = os.path.join(self.bin, "adb")
        with open(path, "w", encoding="utf-8") as f:
            f.write(FAKE_ADB.replace("/usr/bin/env python3", sys.executable, 1))
        os.chmod(path, 0o755)
        self.pack = os.path.join(self.dir, "pack")
        os.makedirs(os.path.join(self.pack, "config"))
        self.saved = {k: os.environ.get(k) for k in ("PATH", "FAKE_ADB_DIR", "FARMHAND_TEST_PACK_DIR",
                                                     "FARMHAND_CONFIG", "FARMHAND_CONTROL_SOCKET")}
        os.environ["PATH"] = self.bin + os.pathsep + os.environ.get("PATH", "")
        os.environ["FAKE_ADB_DIR"] = self.dir
        os.environ["FARMHAND_TEST_PACK_DIR"] = self.pack
        for k in ("FARMHAND_CONFIG", "FARMHAND_CONTROL_SOCKET"):
            os.environ.pop(k, None)
        _config._reset()  # pylint: disable=protected-access
        self.state = {"devices": {"SERIAL1": "device"}, "connectable": [], "display": [1920, 1080]}
        self.save_state()

    def tearDown(self):  # pylint: disable=invalid-name
        restore_env(self.saved)
        _config._reset()  # pylint: disable=protected-access
        shutil.rmtree(self.dir, ignore_errors=True)

    def save_state(self):
        with open(os.path.join(self.dir, "state.json"), "w", encoding="utf-8") as f:
            json.dump(self.state, f)

    def configure(self, text):
        with open(os.path.join(self.pack, "config", "stbt.conf"), "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(text))
        _config._reset()  # pylint: disable=protected-access

    def calls(self):
        try:
            with open(os.path.join(self.dir, "calls.jsonl"), encoding="utf-8") as f:
                return [json.loads(line) for line in f]
        except FileNotFoundError:
            return []


class Helpers(unittest.TestCase):
    def test_centre_point_of_a_region_or_a_pair(self):
        self.assertEqual(_centre_point(Region(100, 40, width=50, height=21)), (125, 50))
        self.assertEqual(_centre_point((7, 9)), (7, 9))
        self.assertEqual(_centre_point(["7", "9"]), (7, 9))
        self.assertEqual(_centre_point((7.8, 9.2)), (7, 9))

    def test_centre_point_refuses_other_things(self):
        for bad in (7, (7,), (1, 2, 3), "79", ("a", "b"), None):
            with self.assertRaises(TypeError, msg=repr(bad)):
                _centre_point(bad)

    def test_display_size_in_the_current_orientation(self):
        newer = "Display: mDisplayId=0\n    init=720x1280 320dpi cur=1280x720 app=1280x672 rng=720x672-1280x1232\n"
        self.assertEqual(_parse_display_dimensions(newer), _Dimensions(width=1280, height=720))
        older = "  Window #2 Window{x StatusBar}:\n\n  Display: init=540x960 cur=540x960 app=540x912\n"
        self.assertEqual(_parse_display_dimensions(older), _Dimensions(540, 960))
        with self.assertRaises(ValueError):
            _parse_display_dimensions("no display here\n")

    def test_parse_devices(self):
        text = ("* daemon not running; starting now at tcp:5037\n* daemon started successfully\n"
                "List of devices attached\n"
                "10.0.0.7:5555          device product:box model:Box_4K device:box transport_id:3\n"
                "ZX1G22                 unauthorized usb:1-2 transport_id:4\n"
                "emulator-5554 offline\n\n")
        self.assertEqual(_parse_devices(text), {
            "10.0.0.7:5555": _Device("10.0.0.7:5555", "device", "product:box model:Box_4K device:box transport_id:3"),
            "ZX1G22": _Device("ZX1G22", "unauthorized", "usb:1-2 transport_id:4"),
            "emulator-5554": _Device("emulator-5554", "offline", ""),
        })
        self.assertEqual(_parse_devices("List of devices attached\n\n"), {})

    def test_native_coordinates_by_system(self):
        hdmi, adb720, camera = CoordinateSystem.HDMI_720P, CoordinateSystem.ADB_720P, CoordinateSystem.CAMERA_720P
        # landscape 1080p: every 720p system is a plain 1.5x scale
        for system in (hdmi, adb720, camera):
            self.assertEqual(_to_native_coordinates(640, 360, system, _Dimensions(1920, 1080)), (960, 540))
        self.assertEqual(_to_native_coordinates(17, 33, CoordinateSystem.ADB_NATIVE, _Dimensions(1920, 1080)), (17, 33))
        # portrait 1080x1920 over HDMI: 405 px wide in the middle of 1280 (a bar of 437.5 px each side)
        self.assertEqual(_to_native_coordinates(640, 360, hdmi, _Dimensions(1080, 1920)), (540, 960))
        self.assertEqual(_to_native_coordinates(438, 0, hdmi, _Dimensions(1080, 1920)), (1, 0))
        # portrait over ADB at 720p: 720x1280
        self.assertEqual(_to_native_coordinates(360, 640, adb720, _Dimensions(1080, 1920)), (540, 960))
        # portrait through the camera: its top is on the left of the picture
        self.assertEqual(_to_native_coordinates(0, 720, camera, _Dimensions(1080, 1920)), (0, 0))
        self.assertEqual(_to_native_coordinates(1280, 0, camera, _Dimensions(1080, 1920)), (1080, 1920))

    @unittest.skipIf(cv2 is None, "needs OpenCV")
    def test_resize_and_native_coordinates_agree(self):
        # A dot drawn at a known place of the device's screen, seen through each system, maps back to it.
        for size in ((1080, 1920), (750, 1334), (1920, 1080)):
            for native in ((100, 150), (size[0] - 120, size[1] - 60)):
                screen = numpy.zeros((size[1], size[0], 3), dtype=numpy.uint8)
                cv2.circle(screen, native, 12, (255, 255, 255), -1)
                for system in CoordinateSystem:
                    seen = _resize(screen, system)
                    expected = {CoordinateSystem.ADB_NATIVE: size,
                                CoordinateSystem.ADB_720P: (720, 1280) if size[1] > size[0] else (1280, 720)
                                }.get(system, (1280, 720))
                    self.assertEqual((seen.shape[1], seen.shape[0]), expected, (size, system))
                    ys, xs = numpy.nonzero(seen[:, :, 0] > 128)
                    back = _to_native_coordinates(xs.mean(), ys.mean(), system, _Dimensions(*size))
                    tolerance = 3 * max(size) / 1280.0
                    self.assertLessEqual(abs(back[0] - native[0]), tolerance, (size, native, system, back))
                    self.assertLessEqual(abs(back[1] - native[1]), tolerance, (size, native, system, back))

    @unittest.skipIf(cv2 is None, "needs OpenCV")
    def test_frames_are_scaled_bilinearly_as_stb_testers_are(self):
        # A reference image cut from a frame stb-tester scaled must find the same pixels here.
        screen = numpy.random.RandomState(3).randint(0, 256, (1080, 1920, 3)).astype(numpy.uint8)
        seen = _resize(screen, CoordinateSystem.HDMI_720P)
        self.assertTrue(numpy.array_equal(seen, cv2.resize(screen, (1280, 720), interpolation=cv2.INTER_LINEAR)))
        self.assertFalse(numpy.array_equal(seen, cv2.resize(screen, (1280, 720), interpolation=cv2.INTER_AREA)))

    @unittest.skipIf(cv2 is None, "needs OpenCV")
    def test_hdmi_portrait_has_black_bars(self):
        screen = numpy.full((1920, 1080, 3), 200, dtype=numpy.uint8)
        seen = _resize(screen, CoordinateSystem.HDMI_720P)
        self.assertEqual(seen[:, :430].max(), 0)
        self.assertEqual(seen[:, 1280 - 430:].max(), 0)
        self.assertEqual(seen[:, 440:840].min(), 200)


class Construction(WithFakeAdb, unittest.TestCase):
    def test_defaults(self):
        d = AdbDevice()
        self.assertEqual((d.address, d.adb_server, d.adb_binary, d.tcpip), (None, None, "adb", False))
        self.assertIs(d.coordinate_system, CoordinateSystem.HDMI_720P)

    def test_defaults_come_from_the_android_section(self):
        self.configure("""\
            [android]
            address = 10.0.0.7
            adb_server = farmpc:5038
            adb_binary = /opt/adb
            coordinate_system = adb_native
            """)
        d = AdbDevice()
        self.assertEqual((d.address, d.adb_server, d.adb_binary, d.tcpip),
                         ("10.0.0.7", "farmpc:5038", "/opt/adb", True))
        self.assertIs(d.coordinate_system, CoordinateSystem.ADB_NATIVE)
        self.assertEqual(AdbDevice(address="ZX1G22").tcpip, False)  # an argument wins over the configuration

    def test_tcpip_guess_and_setting(self):
        self.assertTrue(AdbDevice(address="192.168.1.50").tcpip)
        self.assertTrue(AdbDevice(address="box.local:5555").tcpip)
        self.assertFalse(AdbDevice(address="emulator-5554").tcpip)
        self.assertFalse(AdbDevice(address="192.168.1.50", tcpip=False).tcpip)
        with self.assertRaises(ConfigurationError):
            AdbDevice(tcpip=True)  # a network device needs its address
        self.configure("[android]\naddress = box.local\ntcpip = true\n")
        self.assertTrue(AdbDevice().tcpip)

    def test_bad_coordinate_system(self):
        with self.assertRaises(TypeError):
            AdbDevice(coordinate_system="HDMI_720P")
        self.configure("[android]\ncoordinate_system = VGA\n")
        with self.assertRaises(ConfigurationError):
            AdbDevice()


class Commands(WithFakeAdb, unittest.TestCase):
    def test_adb_is_like_subprocess_run(self):
        done = AdbDevice().adb(["shell", "echo", "hello"], capture_output=True, text=True)
        self.assertIsInstance(done, subprocess.CompletedProcess)
        self.assertEqual((done.returncode, done.stdout), (0, "hello\n"))
        self.assertEqual(self.calls(), [["shell", "echo", "hello"]])
        self.assertEqual(AdbDevice().adb(["shell", "false"]).returncode, 1)  # no check: no exception

    def test_adb_with_check_raises_adb_error_with_the_devices(self):
        with self.assertRaises(AdbError) as cm:
            AdbDevice(address="GONE").adb(["shell", "echo"], check=True, capture_output=True, text=True)
        e = cm.exception
        self.assertIsInstance(e, subprocess.CalledProcessError)
        self.assertEqual(e.returncode, 1)
        self.assertEqual(e.cmd, ["adb", "-s", "GONE", "shell", "echo"])
        self.assertIn("device 'GONE' not found", e.stderr)
        self.assertIn("SERIAL1", e.devices)
        self.assertIn("GONE", str(e))

    def test_adb_takes_a_list(self):
        with self.assertRaises(TypeError):
            AdbDevice().adb("shell ls")
        self.assertEqual(self.calls(), [])

    def test_module_adb_uses_the_configuration(self):
        self.state["devices"]["OTHER"] = "device"
        self.save_state()
        self.configure("[android]\naddress = OTHER\nadb_server = farmpc:5038\n")
        self.assertEqual(adb(["shell", "echo", "x"], capture_output=True).stdout, b"x\n")
        self.assertEqual(self.calls(), [["-H", "farmpc", "-P", "5038", "-s", "OTHER", "shell", "echo", "x"]])

    def test_devices_lists_what_the_server_knows(self):
        text = AdbDevice(adb_server="farmpc").devices()
        self.assertIn("SERIAL1", text)
        self.assertIn("model:Fake_TV", text)
        self.assertEqual(self.calls(), [["-H", "farmpc", "devices", "-l"]])

    def test_a_missing_adb_is_a_configuration_error(self):
        with self.assertRaises(ConfigurationError) as cm:
            AdbDevice(adb_binary=os.path.join(self.dir, "no-adb")).adb(["devices"])
        self.assertIn("Debian package adb", str(cm.exception))

    def test_timeout(self):
        with self.assertRaises(subprocess.TimeoutExpired):
            AdbDevice().adb(["logcat"], timeout=0.5, stdout=subprocess.DEVNULL)


class Input(WithFakeAdb, unittest.TestCase):
    def test_press_sends_an_android_keycode(self):
        d = AdbDevice(address="SERIAL1")
        d.press("KEYCODE_HOME")
        d.press("KEY_OK")
        d.press("KEY_BACK")
        d.press("KEY_5")
        self.assertEqual([c[-1] for c in self.calls()],
                         ["KEYCODE_HOME", "KEYCODE_DPAD_CENTER", "KEYCODE_BACK", "KEYCODE_5"])
        self.assertEqual(self.calls()[0], ["-s", "SERIAL1", "shell", "input", "keyevent", "KEYCODE_HOME"])

    def test_press_refuses_unknown_keys_before_sending(self):
        for bad in ("KEYCODE_HOMEE", "KEY_NOT_A_KEY", "home", 3, ""):
            with self.assertRaises(ValueError, msg=repr(bad)):
                AdbDevice().press(bad)
        self.assertEqual(self.calls(), [])

    def test_press_fails_when_the_device_is_not_there(self):
        with self.assertRaises(AdbError):
            AdbDevice(address="GONE").press("KEY_OK")

    def test_tap_in_hdmi_coordinates(self):
        AdbDevice().tap((640, 360))
        AdbDevice().tap(Region(0, 0, width=20, height=10))
        # The Region's centre (10, 5) is 15, 7.5 on the device: truncated to whole pixels, as stb-tester does.
        self.assertEqual(self.calls(), [["shell", "dumpsys", "window"], ["shell", "input", "tap", "960", "540"],
                                        ["shell", "dumpsys", "window"], ["shell", "input", "tap", "15", "7"]])

    def test_tap_in_a_portrait_device(self):
        self.state["display"] = [1080, 1920]
        self.save_state()
        AdbDevice().tap((640, 360))
        self.assertEqual(self.calls()[-1], ["shell", "input", "tap", "540", "960"])

    def test_a_point_in_the_black_bars_of_a_portrait_hdmi_picture_is_refused_before_sending(self):
        self.state["display"] = [1080, 1920]
        self.save_state()
        for point in ((436, 360), (842, 360), (640, 720), (0, 0)):
            with self.assertRaises(ValueError) as cm:
                AdbDevice().tap(point)
            self.assertIn("outside the device's picture", str(cm.exception))
        with self.assertRaises(ValueError):
            AdbDevice().swipe((100, 200), (600, 700))
        self.assertNotIn("input", [c[1] for c in self.calls() if len(c) > 1])
        AdbDevice().tap((437, 0))
        AdbDevice().tap((841, 719))
        self.assertEqual([c[-2:] for c in self.calls() if "input" in c], [["0", "0"], ["1076", "1917"]])

    def test_native_coordinates_need_no_display_size(self):
        AdbDevice(coordinate_system=CoordinateSystem.ADB_NATIVE).tap((3, 4))
        self.assertEqual(self.calls(), [["shell", "input", "tap", "3", "4"]])

    def test_swipe(self):
        AdbDevice().swipe((100, 200), Region(600, 300, width=2, height=2))
        self.assertEqual(self.calls()[-1], ["shell", "input", "swipe", "150", "300", "901", "451"])
        with self.assertRaises(TypeError):
            AdbDevice().swipe((1, 2), 3)


class Network(WithFakeAdb, unittest.TestCase):
    def test_connects_once_then_names_the_device(self):
        self.state["connectable"] = ["192.168.1.50:5555"]
        self.save_state()
        d = AdbDevice(address="192.168.1.50")
        d.press("KEY_UP")
        d.press("KEY_DOWN")
        calls = self.calls()
        self.assertEqual(calls[:3], [["devices", "-l"], ["connect", "192.168.1.50:5555"],
                                     ["-s", "192.168.1.50:5555", "shell", "input", "keyevent", "KEYCODE_DPAD_UP"]])
        self.assertEqual(calls[-1], ["-s", "192.168.1.50:5555", "shell", "input", "keyevent", "KEYCODE_DPAD_DOWN"])
        self.assertEqual(sum(c[:1] == ["connect"] for c in calls), 1)

    def test_no_connect_when_already_connected(self):
        self.state["devices"]["box.local:5556"] = "device"
        self.save_state()
        AdbDevice(address="box.local:5556", adb_server="farmpc").press("KEY_OK")
        self.assertEqual(self.calls(), [
            ["-H", "farmpc", "devices", "-l"],
            ["-H", "farmpc", "-s", "box.local:5556", "shell", "input", "keyevent", "KEYCODE_DPAD_CENTER"]])

    def test_a_device_that_cannot_be_connected(self):
        with self.assertRaises(AdbError) as cm:
            AdbDevice(address="10.9.9.9").press("KEY_OK")
        self.assertIn("failed to connect", str(cm.exception))
        self.assertFalse(any("shell" in c for c in self.calls()))


@unittest.skipIf(cv2 is None, "needs OpenCV")
class Screenshots(WithFakeAdb, unittest.TestCase):
    def screen(self, width, height):
        picture = numpy.zeros((height, width, 3), dtype=numpy.uint8)
        picture[:, :, 1] = 90
        picture[10:30, 10:30] = (0, 0, 255)
        cv2.imwrite(os.path.join(self.dir, "screen.png"), picture)
        return picture

    def test_native_screenshot(self):
        import stbt_core  # pylint: disable=import-outside-toplevel
        picture = self.screen(1920, 1080)
        frame = AdbDevice().get_frame(CoordinateSystem.ADB_NATIVE)
        self.assertIsInstance(frame, stbt_core.Frame)
        self.assertTrue((frame == picture).all())
        self.assertIsInstance(frame.time, float)
        self.assertEqual(self.calls(), [["exec-out", "screencap", "-p"]])

    def test_default_system_scales_to_720p(self):
        self.screen(1080, 1920)
        frame = AdbDevice().get_frame()
        self.assertEqual(frame.shape, (720, 1280, 3))
        self.assertEqual(frame[:, :400].max(), 0)  # the bar left of the portrait screen
        self.assertEqual(tuple(frame[360, 640]), (0, 90, 0))

    def test_not_a_picture(self):
        with open(os.path.join(self.dir, "screen.png"), "wb") as f:
            f.write(b"error: closed\n")
        with self.assertRaises(AdbError):
            AdbDevice().get_frame()


class Logcat(WithFakeAdb, unittest.TestCase):
    def setUp(self):
        super().setUp()
        self.state["logcat"] = ["I ActivityManager: Start proc", "W MyApp: slow frame"]
        self.save_state()
        self.out = os.path.join(self.dir, "logcat.log")

    def read(self):
        with open(self.out, encoding="utf-8") as f:
            return f.read()

    def wait_for(self, text, times=1):
        """Until the stand-in logcat has written ``text`` (it starts in a process of its own)."""
        for _ in range(400):
            if self.read().count(text) >= times:
                return
            subprocess.run(["sleep", "0.05"], check=True)

    def test_with_block_saves_the_log(self):
        d = AdbDevice()
        with d.logcat(self.out, ["-v", "threadtime"]):
            self.wait_for("slow frame")
        self.assertEqual(self.read().splitlines(),
                         ["logcat -v threadtime", "I ActivityManager: Start proc", "W MyApp: slow frame"])
        self.assertEqual(self.calls(), [["logcat", "-v", "threadtime"]])

    def test_decorator_runs_logcat_during_each_call(self):
        seen = []

        @AdbDevice(address="SERIAL1").logcat(self.out)
        def test_something(n):
            seen.append(n)
            self.wait_for("slow frame", times=len(seen))  # each call appends its own log
            return n * 2

        self.assertEqual(test_something(2), 4)
        self.assertEqual(test_something(3), 6)
        self.assertEqual(seen, [2, 3])
        self.assertEqual(self.read().count("W MyApp: slow frame"), 2)
        self.assertEqual(self.calls(), [["-s", "SERIAL1", "logcat"], ["-s", "SERIAL1", "logcat"]])

    def test_logcat_stops_when_the_block_raises(self):
        with self.assertRaises(KeyError):
            with AdbDevice().logcat(self.out):
                raise KeyError("x")
        self.assertTrue(os.path.exists(self.out))


REAL_ADB = shutil.which("adb", path="/usr/bin:/usr/local/bin")


@unittest.skipIf(REAL_ADB is None, "Debian's adb is not installed")
class RealAdb(unittest.TestCase):
    """Debian's adb with its own server on a private port, and no device."""

    PORT = "15093"

    @classmethod
    def setUpClass(cls):
        cls.home = tempfile.mkdtemp(prefix="stbt-adb-home-")
        cls.saved_home = os.environ.get("HOME")
        os.environ["HOME"] = cls.home  # adb keeps its keys in ~/.android

    @classmethod
    def tearDownClass(cls):
        # The server the first command started (it outlives its client): stopped by adb itself.
        subprocess.run([REAL_ADB, "-P", cls.PORT, "kill-server"], capture_output=True, timeout=30, check=False)
        if cls.saved_home is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = cls.saved_home
        shutil.rmtree(cls.home, ignore_errors=True)

    def setUp(self):
        self.device = AdbDevice(address="emulator-5554", adb_server="localhost:" + self.PORT, adb_binary=REAL_ADB)

    def test_devices_lists_none(self):
        self.assertEqual(_parse_devices(self.device.devices()), {})

    def test_press_on_a_missing_device_is_an_adb_error(self):
        with self.assertRaises(AdbError) as cm:
            self.device.press("KEY_OK")
        self.assertIn("emulator-5554", str(cm.exception))
        self.assertEqual(cm.exception.returncode, 1)

    def test_connect_refused(self):
        with self.assertRaises(AdbError) as cm:
            AdbDevice(address="127.0.0.1:9", adb_server="localhost:" + self.PORT, adb_binary=REAL_ADB).press("KEY_OK")
        self.assertIn("127.0.0.1:9", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
