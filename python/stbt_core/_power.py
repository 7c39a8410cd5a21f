"""``stbt.PDU``: switch the mains power of the device under test.

In stb-tester a test script drives the network power switch (PDU) itself.
In farmhand the daemon owns the node's outlet (its configuration key
``power.uri``) and the test asks it over the run's control socket, as it
does for key presses, so a script never holds the PDU's address or
credentials and two runs cannot fight over one outlet.

The request (see ``src/runner/control.ts``)::

    {"id":1,"op":"power"}              -> {"id":1,"ok":true,"on":true}
    {"id":2,"op":"power","on":false}   -> {"id":2,"ok":true,"on":false}

    {"id":3,"op":"power","cycle":true,"off_secs":5} -> {"id":3,"ok":true,"on":true}

The second form answers once the outlet has taken the new state (the driver
read it back); the third once the outlet was off ``off_secs`` and is on again.
``"outlet"`` names one of the node's other outlets (its ``power.outlets``);
the daemon refuses names it does not have, listing the ones it has. Refusals
(no outlet configured, the PDU not answering) raise ``farmhand.ControlError``,
a ``UITestError``: the run is an error, not a failure of the device.

farmhand's own code, written from stb-tester's public manual.
"""

from farmhand import control
from farmhand.errors import ControlError

__all__ = ["PDU"]

# A PDU reached over SNMP or HTTP may take several seconds to switch and to report the new state.
SET_TIMEOUT_SECS = 60.0
GET_TIMEOUT_SECS = 30.0
# The longest off time of a power-cycle the daemon accepts.
MAX_OFF_SECS = 600


class PDU:
    """One outlet of the node's power switch.

    ``stbt.PDU()`` is the outlet that feeds the node's device under test
    (the daemon's ``power.uri``); ``stbt.PDU("router")`` is the outlet the
    node's configuration names so (``power.outlets``).
    """

    def __init__(self, outlet=None):
        if outlet is not None and (not isinstance(outlet, str) or not outlet):
            raise TypeError("outlet is the name of an outlet (a non-empty str) or None, not %r" % (outlet,))
        self.outlet = outlet

    def __repr__(self):
        return "PDU(outlet=%r)" % (self.outlet,)

    def power_on(self):
        """Switch the outlet on; returns once it is on."""
        self.set(True)

    def power_off(self):
        """Switch the outlet off; returns once it is off."""
        self.set(False)

    def set(self, power):
        """Switch the outlet on (``True``) or off (``False``); returns once
        the outlet reports that state."""
        if not isinstance(power, (bool, int)) or power not in (0, 1):
            raise TypeError("power must be True or False, not %r" % (power,))
        self._request(SET_TIMEOUT_SECS, on=bool(power))

    def power_cycle(self, off_secs=None):
        """Switch the outlet off, leave it off ``off_secs`` seconds (default:
        the node's, the ``off_secs`` of its ``power.uri``, 5 unless set), and
        on again; returns once it is on. A farmhand addition: the daemon does
        the three steps, so nothing else switches the outlet in between."""
        fields = {"cycle": True}
        if off_secs is not None:
            if isinstance(off_secs, bool) or not isinstance(off_secs, (int, float)) or not 0 <= off_secs <= MAX_OFF_SECS:
                raise TypeError("off_secs must be a number of seconds from 0 to %d, not %r" % (MAX_OFF_SECS, off_secs))
            fields["off_secs"] = off_secs
        self._request(SET_TIMEOUT_SECS * 2 + (MAX_OFF_SECS if off_secs is None else off_secs), **fields)

    def get(self):
        """``True`` when the outlet is on, ``False`` when it is off."""
        return self._request(GET_TIMEOUT_SECS)

    def _request(self, timeout, **fields):
        if self.outlet is not None:
            fields["outlet"] = self.outlet
        try:
            header, _ = control.request("power", timeout=timeout, **fields)
        except ControlError as e:
            if e.code == "invalid_request" and "unknown op" in str(e):
                raise ControlError(
                    e.code, "this farmhand daemon cannot switch power: it does not know the control "
                    "request \"power\" (update the node)") from e
            raise
        on = header.get("on")
        if not isinstance(on, bool):
            raise ControlError("internal", "the daemon's answer to power has no on/off state: %r" % (header,))
        return on


PDU.__module__ = "stbt_core"
