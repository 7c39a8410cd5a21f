"""Exceptions of the test-script API (named and arranged as in stb-tester,
so test packs written for it keep their meaning)."""


class UITestFailure(Exception):
    """The device under test did not behave as the test expects: the test
    *fails*. Raise it (or a subclass) like an ``AssertionError``."""


class UITestError(Exception):
    """The test could not be carried out (a problem of the test setup, not of
    the device under test): the run is an *error*."""


class ConfigurationError(UITestError):
    """A configuration value is missing or has the wrong type."""


class ControlError(UITestError):
    """The daemon refused or could not carry out a request (a key press, a
    frame). ``code`` is the daemon's error code: ``not_found`` (no such key),
    ``invalid_request``, ``device_unavailable`` (no IR blaster, capture
    offline, the run has ended), ``internal``."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class MatchTimeout(UITestFailure):
    """``wait_for_match`` did not find the template in time: the test
    *fails*. ``template`` names what was looked for, ``timeout_secs`` how
    long, ``last`` is the best ``MatchResult`` of the last frame seen (its
    ``frame`` is that frame)."""

    def __init__(self, message, template=None, timeout_secs=None, last=None):
        super().__init__(message)
        self.template = template
        self.timeout_secs = timeout_secs
        self.last = last


# Tracebacks name them as test scripts import them: farmhand.UITestFailure.
for _cls in (UITestFailure, UITestError, ConfigurationError, ControlError, MatchTimeout):
    _cls.__module__ = "farmhand"
del _cls
