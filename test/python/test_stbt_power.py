"""stbt.PDU: the test asks the daemon to switch the node's outlet over the
control socket (the "power" request); the stand-in daemon keeps the
outlet's state and every request it got."""

import os
import unittest

from _fake_daemon import WithDaemon
from farmhand import control
from farmhand.errors import ControlError, UITestError
from stbt_core._power import PDU


class Power(WithDaemon, unittest.TestCase):
    CAPTURE = False

    def test_get_reads_the_outlet(self):
        self.assertIs(PDU().get(), True)
        self.daemon.outlet = False
        self.assertIs(PDU().get(), False)
        self.assertEqual(self.daemon.power_requests, [{"op": "power"}, {"op": "power"}])

    def test_power_off_and_on_switch_the_outlet(self):
        pdu = PDU()
        self.assertIsNone(pdu.power_off())
        self.assertIs(self.daemon.outlet, False)
        self.assertIs(pdu.get(), False)
        self.assertIsNone(pdu.power_on())
        self.assertIs(self.daemon.outlet, True)
        self.assertEqual(self.daemon.power_requests,
                         [{"op": "power", "on": False}, {"op": "power"}, {"op": "power", "on": True}])

    def test_set_takes_a_bool(self):
        pdu = PDU()
        pdu.set(False)
        self.assertIs(self.daemon.outlet, False)
        pdu.set(1)
        self.assertIs(self.daemon.outlet, True)
        self.assertEqual(self.daemon.power_requests[-1], {"op": "power", "on": True})

    def test_set_refuses_what_is_not_on_or_off(self):
        for bad in ("off", None, 2, 0.5):
            with self.assertRaises(TypeError):
                PDU().set(bad)
        self.assertEqual(self.daemon.power_requests, [])

    def test_no_outlet_configured_is_an_error_naming_power_uri(self):
        self.daemon.outlet = None
        with self.assertRaises(ControlError) as cm:
            PDU().power_on()
        self.assertIsInstance(cm.exception, UITestError)
        self.assertEqual(cm.exception.code, "not_found")
        self.assertIn("power.uri", str(cm.exception))

    def test_a_named_outlet_is_passed_to_the_daemon_which_refuses_a_name_it_does_not_have(self):
        with self.assertRaises(ControlError) as cm:
            PDU("lamp").power_off()
        self.assertEqual(cm.exception.code, "not_found")
        self.assertIn("lamp", str(cm.exception))
        self.assertEqual(self.daemon.power_requests, [{"op": "power", "on": False, "outlet": "lamp"}])
        self.assertIs(self.daemon.outlet, True)
        with self.assertRaises(TypeError):
            PDU(3)

    def test_a_daemon_without_power_says_so(self):
        self.daemon._power = lambda req: {  # pylint: disable=protected-access
            "ok": False, "error": "invalid_request", "message": 'unknown op "power"; use "press"'}
        with self.assertRaises(ControlError) as cm:
            PDU().get()
        self.assertIn("cannot switch power", str(cm.exception))

    def test_a_malformed_answer_is_an_error(self):
        self.daemon._power = lambda req: {"ok": True}  # pylint: disable=protected-access
        with self.assertRaises(ControlError) as cm:
            PDU().get()
        self.assertIn("on/off", str(cm.exception))

    def test_power_cycle_asks_the_daemon_for_one_cycle(self):
        self.assertIsNone(PDU().power_cycle())
        self.assertIsNone(PDU().power_cycle(off_secs=0.5))
        self.assertEqual(self.daemon.power_requests,
                         [{"op": "power", "cycle": True}, {"op": "power", "cycle": True, "off_secs": 0.5}])
        for bad in ("5", -1, 601, True):
            with self.assertRaises(TypeError):
                PDU().power_cycle(off_secs=bad)
        self.assertEqual(len(self.daemon.power_requests), 2)

    def test_repr(self):
        self.assertEqual(repr(PDU()), "PDU(outlet=None)")
        self.assertEqual(repr(PDU("lamp")), "PDU(outlet='lamp')")


class WithoutDaemon(unittest.TestCase):
    def test_outside_farmhand_it_is_a_test_error(self):
        saved = os.environ.pop(control.SOCKET_ENV, None)
        control._conn = None  # pylint: disable=protected-access
        try:
            with self.assertRaises(UITestError) as cm:
                PDU().get()
            self.assertIn(control.SOCKET_ENV, str(cm.exception))
        finally:
            if saved is not None:
                os.environ[control.SOCKET_ENV] = saved

    def test_exported_as_stbt_pdu(self):
        import stbt  # pylint: disable=import-outside-toplevel
        self.assertIs(stbt.PDU, PDU)
        self.assertIn("PDU", stbt.__all__)


if __name__ == "__main__":
    unittest.main()
