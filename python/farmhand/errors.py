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


# Tracebacks name them as test scripts import them: farmhand.UITestFailure.
for _cls in (UITestFailure, UITestError, ConfigurationError):
    _cls.__module__ = "farmhand"
del _cls
