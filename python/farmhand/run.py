"""Run one test case and report its outcome: the child process of a test run.

Usage: ``python -m farmhand.run tests/path/file.py::test_name``

The test file is imported from the test pack (``FARMHAND_TEST_PACK_DIR``,
default the current directory; its root and the file's own folder are on
``sys.path`` so a test pack can import its helpers), the function is called
(``async def`` functions through ``asyncio.run``), and the outcome is written
as JSON ``{"result", "failure_reason", "traceback"}`` to the file named by
``FARMHAND_REPORT``. Exit status: 0 pass, 1 fail, 2 error, 143 after SIGTERM.
"""

import asyncio
import importlib.util
import inspect
import json
import os
import signal
import sys
import traceback

EXIT_STATUS = {"pass": 0, "fail": 1, "error": 2}
SIGTERM_STATUS = 128 + signal.SIGTERM


class TestTerminated(BaseException):
    """Raised in the test when farmhand ends the run (stop or timeout), so
    ``finally`` blocks and context managers still run. A BaseException, so a
    test's ``except Exception`` does not swallow it."""


class _SetupError(Exception):
    """The test case cannot be started; reported without a traceback."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


_terminated = False


def _on_sigterm(signum, frame):
    global _terminated  # pylint: disable=global-statement
    _terminated = True
    raise TestTerminated("the test process received SIGTERM")


def _is_failure(exc):
    # Names, not classes: stb-tester's own UITestFailure (and its subclasses)
    # must count as failures too, without importing stb-tester.
    return isinstance(exc, AssertionError) or any(
        c.__name__ == "UITestFailure" for c in type(exc).__mro__
    )


def failure_reason(exc):
    """``<ExceptionType>: <message>``, or just the type when the message is empty."""
    message = str(exc)
    name = type(exc).__name__
    return "%s: %s" % (name, message) if message else name


def _user_traceback(exc):
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


def _load_function(test_case, root):
    filename, sep, funcname = test_case.partition("::")
    if not sep or not filename or not funcname:
        raise _SetupError("ValueError", "test case %r is not of the form <file>::<function>" % test_case)
    root = os.path.realpath(root)
    path = os.path.realpath(os.path.join(root, filename))
    if not path.startswith(root + os.sep) or not path.endswith(".py"):
        raise _SetupError("ValueError", "%s is not a .py file inside the test pack" % filename)
    if not os.path.isfile(path):
        raise _SetupError("FileNotFoundError", "%s: no such file in the test pack" % filename)
    module_dir = os.path.dirname(path)
    if module_dir not in sys.path:
        sys.path.insert(0, module_dir)  # sibling modules import by name, as in stb-tester
    name = os.path.splitext(os.path.basename(path))[0]
    if name in sys.modules:  # e.g. tests/json.py: keep the real json module importable
        name = "_farmhand_test_" + name
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    function = getattr(module, funcname, None)
    if not callable(function):
        raise _SetupError("AttributeError", "%s has no function %s" % (filename, funcname))
    return filename, function


def run_test(test_case, root):
    """Run a test case; returns the report as a dict. Never raises."""
    try:
        filename, function = _load_function(test_case, root)
        sys.argv = [filename]
        if inspect.iscoroutinefunction(function):
            asyncio.run(function())
        else:
            function()
        return {"result": "pass", "failure_reason": None, "traceback": None}
    except _SetupError as e:
        sys.stderr.write("%s: %s\n" % (e.kind, e))
        return {"result": "error", "failure_reason": "%s: %s" % (e.kind, e), "traceback": None}
    except BaseException as e:  # pylint: disable=broad-except
        text = _user_traceback(e)
        sys.stderr.write(text)
        result = "fail" if _is_failure(e) else "error"
        return {"result": result, "failure_reason": failure_reason(e), "traceback": text}


# The test's own process: only it writes the report. A child the test forked
# (os.fork, multiprocessing) runs on through this module's code when it
# returns or is ended, and must not overwrite its parent's outcome.
_owner_pid = None


def _write_report(path, report):
    if not path or os.getpid() != _owner_pid:
        return
    tmp = "%s.%d.tmp" % (path, os.getpid())
    try:
        os.unlink(tmp)
    except OSError:
        pass
    # O_EXCL | O_NOFOLLOW: a fresh file, never a FIFO or symlink that took the name.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(report, f)
    os.replace(tmp, path)  # the runner never reads half a report


def main(argv):
    if len(argv) != 1:
        sys.stderr.write("usage: python -m farmhand.run tests/file.py::test_name\n")
        return 2
    global _owner_pid  # pylint: disable=global-statement
    _owner_pid = os.getpid()
    signal.signal(signal.SIGTERM, _on_sigterm)
    root = os.environ.get("FARMHAND_TEST_PACK_DIR") or os.getcwd()
    # `python -m` puts the working directory (the result folder) first on sys.path; the test pack goes there instead.
    if sys.path and sys.path[0] in ("", os.getcwd()):
        sys.path[0] = root
    else:
        sys.path.insert(0, root)
    report = run_test(argv[0], root)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    if os.getpid() != _owner_pid:
        # A forked child that came back here: leave without the parent's atexit handlers and report.
        os._exit(EXIT_STATUS[report["result"]])
    _write_report(os.environ.get("FARMHAND_REPORT"), report)
    return SIGTERM_STATUS if _terminated else EXIT_STATUS[report["result"]]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
