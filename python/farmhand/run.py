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


def _import_traceback(exc):
    """The traceback of a failed import without the import machinery's own frames."""
    importlib_init = importlib.__file__
    keep = [f for f in traceback.extract_tb(exc.__traceback__)
            if f.filename != __file__ and f.filename != importlib_init and not f.filename.startswith("<frozen importlib")]
    lines = ["Traceback (most recent call last):\n"] if keep else []
    lines += traceback.format_list(keep)
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines)


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
    module = _import_test_file(filename, path, root)
    function = getattr(module, funcname, None)
    if not callable(function):
        raise _SetupError("AttributeError", "%s has no function %s" % (filename, funcname))
    return filename, function


class _ImportFailed(Exception):
    """The test file (or a module it imports) could not be imported."""

    def __init__(self, reason, original):
        super().__init__(reason)
        self.original = original


# Modules only Python 2 has: a pack that imports them was written for Python 2.
_PY2_MODULES = {"urllib2", "ConfigParser", "StringIO", "cStringIO", "__builtin__", "httplib",
                "Queue", "cPickle", "urlparse", "HTMLParser", "Tkinter", "commands", "thread"}
_PY2_SYNTAX = ("Missing parentheses in call to", "multiple exception types must be parenthesized",
               "leading zeros in decimal integer literals are not permitted")


def _package_name(path, root):
    """``(dotted name, folder to put on sys.path)`` of a file inside packages
    (folders with ``__init__.py``, up to the pack root), or None outside."""
    folder = os.path.dirname(path)
    parts = [os.path.splitext(os.path.basename(path))[0]]
    while folder != root and folder.startswith(root + os.sep) and os.path.isfile(os.path.join(folder, "__init__.py")):
        parts.insert(0, os.path.basename(folder))
        folder = os.path.dirname(folder)
    if len(parts) == 1 or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts), folder


def _where(exc, root):
    """``file line N`` of the innermost traceback entry (or syntax error) inside the test pack."""
    if isinstance(exc, SyntaxError) and exc.filename:
        f = os.path.realpath(exc.filename)
        if f.startswith(root + os.sep):
            return "%s line %s" % (os.path.relpath(f, root), exc.lineno)
    where = None
    tb = exc.__traceback__
    while tb is not None:
        f = os.path.realpath(tb.tb_frame.f_code.co_filename)
        if f.startswith(root + os.sep):
            where = "%s line %d" % (os.path.relpath(f, root), tb.tb_lineno)
        tb = tb.tb_next
    return where


def _python2_hint(exc):
    if isinstance(exc, SyntaxError) and (any(s in str(exc.msg) for s in _PY2_SYNTAX) or _looks_py2(exc.text)):
        return True
    return isinstance(exc, ModuleNotFoundError) and exc.name in _PY2_MODULES


def _looks_py2(line):
    text = (line or "").strip()
    return text.startswith(("print ", "exec ")) or ("except " in text and ", " in text and " as " not in text) or "`" in text or " <> " in text


def _import_test_file(filename, path, root):
    """Import the test file: under its dotted name when it sits in packages
    (``tests/roku/tests.py`` -> ``tests.roku.tests``, so relative imports
    work), else by its file name as before. A failure is ``_ImportFailed``
    whose reason says which file and why."""
    package = _package_name(path, root)
    try:
        if package is not None:
            name, top = package
            # The package root first; the file's own folder after it, so sibling modules still
            # import by name but never hide the top package (tests/roku/tests.py is not "tests").
            for folder in (top, os.path.dirname(path)):
                while folder in sys.path:
                    sys.path.remove(folder)
            sys.path[0:0] = [top, os.path.dirname(path)]
            module = importlib.import_module(name)
            if os.path.realpath(getattr(module, "__file__", "") or "") != path:
                raise ImportError("the module name %s is taken by %s" % (name, getattr(module, "__file__", "a built-in module")))
            return module
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
        return module
    except TestTerminated:
        raise
    except BaseException as e:  # pylint: disable=broad-except
        where = _where(e, root)
        at = " (%s)" % where if where and not where.startswith(filename + " ") else ""
        if _python2_hint(e):
            why = "it is Python 2 code (%s%s); farmhand runs test packs with Python 3" % (
                failure_reason(e), " at " + where if where else "")
            raise _ImportFailed("%s cannot be imported: %s" % (filename, why), e) from e
        detail = failure_reason(e)
        if where and where.startswith(filename + " "):
            detail += " at " + where
        raise _ImportFailed("%s cannot be imported: %s%s" % (filename, detail, at), e) from e


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
    except _ImportFailed as e:
        # The reason first, then the import's own traceback: what to fix is on the first line.
        text = _import_traceback(e.original)
        sys.stderr.write("ImportError: %s\n%s" % (e, text))
        return {"result": "error", "failure_reason": "ImportError: %s" % e, "traceback": "ImportError: %s\n\n%s" % (e, text)}
    except BaseException as e:  # pylint: disable=broad-except
        text = _user_traceback(e)
        sys.stderr.write(text)
        result = "fail" if _is_failure(e) else "error"
        return {"result": result, "failure_reason": failure_reason(e) + _test_line(e, root), "traceback": text}


def _test_line(exc, root):
    """`` (at tests/x.py line N)``, the test pack's innermost line, when the
    exception was raised outside the test pack (inside stbt, farmhand or a
    library: a ``MatchTimeout`` from ``wait_for_match``); else nothing (the
    raising line is the test's own, and the reason stays as before)."""
    if isinstance(exc, TestTerminated):
        return ""
    root = os.path.realpath(root)
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    if last is None or os.path.realpath(last.tb_frame.f_code.co_filename).startswith(root + os.sep):
        return ""
    where = _where(exc, root)
    return " (at %s)" % where if where else ""


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
