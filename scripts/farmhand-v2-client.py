#!/usr/bin/python3
"""A command-line client of the v2 test-farm API, for CI systems and people.

It behaves as the v2 command-line client that CI systems (Jenkins, GitLab,
Bamboo) run against the original portals, as docs/farm.md ("The v2
command-line client") and the compatibility notes describe it, so it works the
same against a farmhand portal (any node of the farm, by --node-id) and
against a single farmhand node:

    farmhand-v2-client.py run --portal URL --token-file FILE --node-id ID \
        [--revision HEAD] [--category C] [--tag NAME=VALUE ...] [--force] \
        tests/menu.py::test_menu ...
    farmhand-v2-client.py press --portal URL --token-file FILE --node-id ID KEY_OK
    farmhand-v2-client.py download --portal URL --token-file FILE JOB_UID
    farmhand-v2-client.py user --portal URL --token-file FILE

`run`: GET /api/v2/user, POST /api/v2/run_tests (on 409 with --force: the
node's job, stop it, run again), await_completion until the job ends, then
the job's results, their artifacts (skipped when a local copy has the same
size and md5), each result's log as stbt.log, and the jUnit XML in
stbt-results.xml. Exit status: 0 every test passed; 1 a test failed or
errored; 2 bad command line; 3 the server refused a request (4xx, its
message printed) or could not be reached.

Python 3.7+ standard library only.
"""

import argparse
import hashlib
import http.client
import json
import os
import sys
import time
import urllib.parse

USER_AGENT = "farmhand-v2-client/1"
# Clients give each request at most 60 s; await_completion answers 202 after 55 s.
REQUEST_TIMEOUT_SECS = 60
EXIT_OK, EXIT_TESTS_FAILED, EXIT_USAGE, EXIT_HTTP = 0, 1, 2, 3
# CI variables recorded as tags of the run, as the original client does.
JENKINS_VARS = ("BUILD_ID", "BUILD_NUMBER", "BUILD_URL", "JOB_NAME", "GIT_COMMIT", "NODE_NAME")
BAMBOO_VARS = ("buildPlanName", "buildResultKey", "buildResultsUrl", "planRepository_revision")


class UsageError(Exception):
    """A bad command line or token file (exit status 2)."""


class ApiError(Exception):
    """A request the server refused (status >= 400) or that never got an answer."""

    def __init__(self, method, url, status, message):
        Exception.__init__(self, message)
        self.method, self.url, self.status, self.message = method, url, status, message

    def __str__(self):
        where = "%s %s" % (self.method, self.url)
        if self.status is None:
            return "%s: %s" % (where, self.message)
        return "%s: HTTP %d: %s" % (where, self.status, self.message)


class Portal(object):
    """The v2 API of one portal (or node): token auth, 60 s per request, JSON bodies."""

    def __init__(self, url, token, retry_secs=300, log=None):
        self.base = url.rstrip("/")
        self.token = token
        self.retry_secs = retry_secs
        self.log = log or (lambda msg: None)

    def url(self, path):
        return path if path.startswith(("http://", "https://")) else self.base + path

    def request(self, method, path, body=None, query=None, ok=(200,)):
        """(status, bytes) of a request; status in `ok` or 202, else ApiError.

        Connection failures and 502/503/504 of a GET are retried with back-off
        for retry_secs (a portal restarting); a 4xx never is (429 included).
        """
        url = self.url(path)
        if query:
            url += ("&" if "?" in url else "?") + urllib.parse.urlencode(query)
        deadline = time.time() + self.retry_secs
        delay = 1.0
        while True:
            try:
                status, data = self._once(method, url, body)
            except (OSError, http.client.HTTPException) as e:
                status, data = None, str(e) or e.__class__.__name__
            if status in ok or status == 202:
                return status, data
            retriable = method == "GET" and (status is None or status in (502, 503, 504))
            if retriable and time.time() + delay < deadline:
                self.log("%s %s: %s; retrying in %.0f s" % (method, url, status or data, delay))
                time.sleep(delay)
                delay = min(delay * 2, 15.0)
                continue
            if status is None:
                raise ApiError(method, url, None, data)
            raise ApiError(method, url, status, error_message(data))

    def _once(self, method, url, body):
        u = urllib.parse.urlsplit(url)
        cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
        conn = cls(u.hostname, u.port, timeout=REQUEST_TIMEOUT_SECS)
        try:
            headers = {"Authorization": "token %s" % self.token, "User-Agent": USER_AGENT}
            data = None
            if body is not None:
                # As the original client posts json.dumps(...) as raw data: no Content-Type.
                data = json.dumps(body).encode("utf-8")
            target = u.path + ("?" + u.query if u.query else "")
            conn.request(method, target or "/", body=data, headers=headers)
            res = conn.getresponse()
            return res.status, res.read()
        finally:
            conn.close()

    def json(self, method, path, body=None, query=None, ok=(200,)):
        status, data = self.request(method, path, body, query, ok)
        return status, (json.loads(data.decode("utf-8")) if data.strip() else None)

    def download(self, path, dest):
        """Stream a file to dest (through dest.part); returns its md5."""
        url = self.url(path)
        u = urllib.parse.urlsplit(url)
        cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
        conn = cls(u.hostname, u.port, timeout=REQUEST_TIMEOUT_SECS)
        part = dest + ".part"
        try:
            conn.request("GET", u.path + ("?" + u.query if u.query else ""),
                         headers={"Authorization": "token %s" % self.token, "User-Agent": USER_AGENT})
            res = conn.getresponse()
            if res.status != 200:
                raise ApiError("GET", url, res.status, error_message(res.read()))
            md5 = hashlib.md5()
            with open(part, "wb") as f:
                while True:
                    chunk = res.read(1 << 16)
                    if not chunk:
                        break
                    md5.update(chunk)
                    f.write(chunk)
            os.replace(part, dest)
            return md5.hexdigest()
        except (OSError, http.client.HTTPException) as e:
            if isinstance(e, ApiError):
                raise
            raise ApiError("GET", url, None, str(e))
        finally:
            conn.close()
            if os.path.exists(part):
                os.unlink(part)


def error_message(data):
    """The `message` of a JSON error body, else the body as text."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)
    try:
        body = json.loads(text)
    except ValueError:
        return text.strip() or "(no body)"
    if isinstance(body, dict) and body.get("message"):
        code = body.get("error")
        return "%s (%s)" % (body["message"], code) if code else body["message"]
    return text.strip()


def job_path(job_uid):
    # job_uid always starts with "/": URLs are /api/v2/jobs + job_uid.
    return "/api/v2/jobs" + job_uid


def parse_tags(pairs):
    tags = {}
    for name, var in (("jenkins/" + v, v) for v in JENKINS_VARS):
        if os.environ.get("JENKINS_URL") and os.environ.get(var):
            tags[name] = os.environ[var]
    for v in BAMBOO_VARS:
        if os.environ.get("bamboo_" + v):
            tags["bamboo." + v] = os.environ["bamboo_" + v]
    for pair in pairs or ():
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError("--tag takes NAME=VALUE, got %r" % pair)
        tags[name] = value
    return tags


def say(msg):
    sys.stdout.write(msg + "\n")
    sys.stdout.flush()


def warn(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def read_token(args):
    if args.token_file:
        with open(args.token_file) as f:
            token = f.read().strip()
    else:
        token = os.environ.get("FARMHAND_TOKEN", "").strip()
    if not token:
        raise UsageError("no token: give --token-file FILE (or set FARMHAND_TOKEN)")
    return token


# ---------------------------------------------------------------- run


def start_job(portal, args, body):
    """POST run_tests; on 409 and --force, stop the node's job and try again."""
    try:
        return portal.json("POST", "/api/v2/run_tests", body)[1]
    except ApiError as e:
        if e.status != 409:
            raise
        if not args.force:
            warn("error: node %s is busy: %s" % (args.node_id, e.message))
            warn("Run again with --force to stop the job it is running.")
            raise SystemExit(EXIT_HTTP)
    say("Node %s is busy; --force: stopping its job" % args.node_id)
    node_job = portal.json("GET", "/api/v2/nodes/%s/job" % urllib.parse.quote(args.node_id))[1]
    job = portal.json("GET", job_path(node_job["job_uid"]))[1]
    say("Stopping job %s (%s)" % (job["job_uid"], job["status"]))
    while portal.request("POST", job_path(job["job_uid"]) + "/stop")[0] == 202:
        pass  # stopping, not yet stopped: ask again at once
    return portal.json("POST", "/api/v2/run_tests", body)[1]


def await_job(portal, job):
    """await_completion until 200 (202 is retried at once), then the Job from job_url."""
    while True:
        status, _ = portal.request("GET", job_path(job["job_uid"]) + "/await_completion")
        if status == 200:
            break
    return portal.json("GET", job["job_url"])[1]


def file_md5(path):
    md5 = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 16), b""):
            md5.update(chunk)
    return md5.hexdigest()


def result_dir(root, test_case):
    """Local folder of a test case's latest result: <root>/<file>/<function>."""
    parts = [p for p in test_case.replace("::", "/").split("/") if p not in ("", ".", "..")]
    return os.path.join(root, *parts)


def fetch_result(portal, result, root, counts):
    """The result's artifacts (unchanged local copies kept) and its log as stbt.log."""
    folder = result_dir(root, result["test_case"])
    listing = portal.json("GET", result["result_url"] + "/artifacts/")[1] or {}
    for name in sorted(listing):
        info = listing[name]
        if not isinstance(info, dict) or not info.get("md5"):
            raise ApiError("GET", portal.url(result["result_url"] + "/artifacts/"), 200,
                           "the artifact listing gives no md5 for %s: this client needs a server that lists md5" % name)
        dest = os.path.join(folder, *[p for p in name.split("/") if p not in ("", ".", "..")])
        if os.path.isfile(dest) and os.path.getsize(dest) == info["size"] and file_md5(dest) == info["md5"]:
            counts["unchanged"] += 1
            continue
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        got = portal.download(result["result_url"] + "/artifacts/" + urllib.parse.quote(name), dest)
        if got != info["md5"]:
            raise ApiError("GET", name, None, "md5 %s of the download differs from the listing's %s" % (got, info["md5"]))
        counts["downloaded"] += 1
    os.makedirs(folder, exist_ok=True)
    try:
        portal.download(result["result_url"] + "/stbt.log", os.path.join(folder, "stbt.log"))
    except ApiError as e:
        # A run lost with its node (recorded by the portal as an error) has no log: say so, go on.
        if e.status != 404:
            raise
        warn("warning: %s has no log: %s" % (result["result_id"], e.message))


def list_results(portal, job, wait_secs):
    """The job's results, waiting (up to wait_secs) until the list has one for each run the job completed.

    A farm portal indexes a result once its node has uploaded it; the job may be answered as
    exited before the last upload is in (docs/farm.md, "Read your writes through the portal").
    The runs are pass + fail + error, not total: total counts the test cases asked for, and stays
    above the runs of a job stopped before its last test case.
    """
    query = {"filter": "job:%s" % job["job_uid"], "sort": "date:asc"}
    counts = job.get("result_counts") or {}
    expected = sum(counts.get(k, 0) or 0 for k in ("pass", "fail", "error"))
    deadline = time.time() + wait_secs
    while True:
        results = portal.json("GET", "/api/v2/results", query=query)[1]
        if len(results) >= expected or time.time() >= deadline:
            if len(results) < expected:
                warn("warning: %d of the job's %d results are listed; going on without the others" % (len(results), expected))
            return results
        time.sleep(2)


def report(portal, args, job):
    """Results of the job, their files, and the jUnit XML; the exit status by outcome."""
    results = list_results(portal, job, args.results_wait_secs)
    counts = {"downloaded": 0, "unchanged": 0}
    failed = 0
    for r in results:
        reason = r.get("failure_reason")
        say("%s: %s%s" % (r["test_case"], r["result"], ": " + reason if reason else ""))
        if r["result"] != "pass":
            failed += 1
        if args.artifacts_dir:
            fetch_result(portal, r, args.artifacts_dir, counts)
    if args.artifacts_dir:
        say("Artifacts in %s: %d downloaded, %d unchanged (skipped)" % (args.artifacts_dir, counts["downloaded"], counts["unchanged"]))
    if args.junit_xml:
        _, xml = portal.request("GET", "/api/v2/results.xml",
                                query={"filter": "job:%s" % job["job_uid"], "sort": "date:asc", "tz": "UTC", "include_tz": "true"})
        with open(args.junit_xml, "wb") as f:
            f.write(xml)
        say("jUnit XML in %s" % args.junit_xml)
    rc = job.get("result_counts") or {}
    say("Job %s: %d passed, %d failed, %d errors, %d in all" % (
        job["job_uid"], rc.get("pass", 0), rc.get("fail", 0), rc.get("error", 0), rc.get("total", len(results))))
    if len(results) == 0 and args.test_cases:
        warn("error: the job ended with no results")
        return EXIT_TESTS_FAILED
    return EXIT_TESTS_FAILED if failed else EXIT_OK


def cmd_run(portal, args):
    user = portal.json("GET", "/api/v2/user")[1]
    say("Logged in as %s" % user.get("login"))
    body = {
        "node_id": args.node_id,
        "test_pack_revision": args.revision,
        "test_cases": args.test_cases,
        "shuffle": args.shuffle,
        "tags": parse_tags(args.tag),
    }
    if args.category:
        body["category"] = args.category
    if args.remote_control:
        body["remote_control"] = args.remote_control
    if args.soak:
        body["soak"] = "run forever"
    job = start_job(portal, args, body)
    say("Started job %s on %s" % (job["job_uid"], args.node_id))
    say("job_url: %s" % job["job_url"])
    job = await_job(portal, job)
    return report(portal, args, job)


def cmd_download(portal, args):
    job = portal.json("GET", job_path(args.job_uid))[1]
    if job["status"] != "exited":
        job = await_job(portal, job)
    args.test_cases = None
    return report(portal, args, job)


def cmd_press(portal, args):
    body = {"key": args.key}
    if args.remote_control:
        body["remote_control"] = args.remote_control
    if args.revision:
        body["test_pack_revision"] = args.revision
    portal.request("POST", "/api/v2/nodes/%s/press" % urllib.parse.quote(args.node_id), body, ok=(200, 204))
    say("Pressed %s on %s" % (args.key, args.node_id))
    return EXIT_OK


def cmd_user(portal, args):
    say(portal.json("GET", "/api/v2/user")[1]["login"])
    return EXIT_OK


def parser():
    common = argparse.ArgumentParser(add_help=False)
    # Accepted before and after the command; SUPPRESS so a subcommand's default does not undo the first.
    common.add_argument("--portal", "--portal-url", dest="portal", default=argparse.SUPPRESS,
                        help="base URL of the portal or node (default $FARMHAND_PORTAL)")
    common.add_argument("--token-file", "--portal-auth-file", dest="token_file", default=argparse.SUPPRESS,
                        help="file holding a v2 access token (default: $FARMHAND_TOKEN)")
    common.add_argument("--node-id", default=argparse.SUPPRESS, help="node to use (default $FARMHAND_NODE_ID)")
    common.add_argument("--retry-secs", type=float, default=argparse.SUPPRESS,
                        help="how long a GET is retried while the server is unreachable or answers 502/503/504 (default 300)")
    common.add_argument("--results-wait-secs", type=float, default=argparse.SUPPRESS,
                        help="how long to wait for a job's results to be listed after it ends (default 120)")
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS)

    p = argparse.ArgumentParser(description="Command-line client of the v2 test-farm API.", parents=[common])
    sub = p.add_subparsers(dest="command")
    run = sub.add_parser("run", parents=[common], help="run test cases on a node and collect the results")
    run.add_argument("--revision", "--test-pack-revision", dest="revision", default="HEAD",
                     help="test-pack revision: branch, tag or SHA (default HEAD)")
    run.add_argument("--category", help="category of the results")
    run.add_argument("--remote-control", help="remote-control configuration of the test pack")
    run.add_argument("--tag", action="append", metavar="NAME=VALUE", help="a tag of the run (repeatable)")
    run.add_argument("--shuffle", action="store_true", help="run the test cases in random order")
    run.add_argument("--soak", action="store_true", help="run forever, until stopped")
    run.add_argument("--force", action="store_true", help="stop the node's job if it is busy")
    run.add_argument("--junit-xml", default="stbt-results.xml", help="where to write the jUnit XML (default stbt-results.xml; '' for none)")
    run.add_argument("--artifacts-dir", default="stbt-artifacts",
                     help="where to download each test case's files and stbt.log (default stbt-artifacts; '' for none)")
    run.add_argument("test_cases", nargs="+", metavar="TEST_CASE")
    dl = sub.add_parser("download", parents=[common], help="collect a job's results, files and jUnit XML again")
    dl.add_argument("--junit-xml", default="stbt-results.xml")
    dl.add_argument("--artifacts-dir", default="stbt-artifacts")
    dl.add_argument("job_uid")
    press = sub.add_parser("press", parents=[common], help="press a key of the remote control on the node")
    press.add_argument("--remote-control")
    press.add_argument("--revision", "--test-pack-revision", dest="revision")
    press.add_argument("key")
    sub.add_parser("user", parents=[common], help="print the user name of the token")
    return p


def main(argv=None):
    p = parser()
    args = p.parse_args(argv)
    for name, default in (("portal", os.environ.get("FARMHAND_PORTAL")), ("token_file", None),
                          ("node_id", os.environ.get("FARMHAND_NODE_ID")), ("retry_secs", 300.0), ("results_wait_secs", 120.0), ("verbose", False)):
        if not hasattr(args, name):
            setattr(args, name, default)
    if not args.command:
        p.error("a command is required: run, download, press or user")
    if not args.portal:
        p.error("--portal URL is required")
    if args.command in ("run", "press") and not args.node_id:
        p.error("--node-id is required")
    command = {"run": cmd_run, "download": cmd_download, "press": cmd_press, "user": cmd_user}[args.command]
    try:
        portal = Portal(args.portal, read_token(args), args.retry_secs, warn if args.verbose else None)
        return command(portal, args)
    except (UsageError, OSError) as e:
        warn("error: %s" % e)
        return EXIT_USAGE
    except ApiError as e:
        warn("error: %s" % e)
        return EXIT_HTTP
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
