"""Helpers for the stbt tests: a throw-away test pack, and running one test
case of it the way the daemon does (``python -m farmhand.run`` in a child
process, with the environment the runner gives)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

PYTHON_DIR = os.environ.get("STBT_TEST_PYTHON_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "python"))


class Pack:
    def __init__(self, files):
        self.root = os.path.realpath(tempfile.mkdtemp(prefix="stbt-pack-"))
        for name, text in files.items():
            path = os.path.join(self.root, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            mode = "wb" if isinstance(text, bytes) else "w"
            with open(path, mode) as f:
                f.write(text)

    def path(self, name):
        return os.path.join(self.root, name)

    def cleanup(self):
        shutil.rmtree(self.root, ignore_errors=True)

    def run(self, test_case, env=None, config=None):
        """``(report, stdout+stderr)`` of one run of ``test_case``."""
        work = tempfile.mkdtemp(prefix="stbt-run-")
        try:
            report = os.path.join(work, "report.json")
            full_env = {k: v for k, v in os.environ.items() if not k.startswith("FARMHAND_")}
            full_env.update({
                "PYTHONPATH": os.pathsep.join([PYTHON_DIR, self.root]),
                "PYTHONDONTWRITEBYTECODE": "1",
                "FARMHAND_TEST_PACK_DIR": self.root,
                "FARMHAND_REPORT": report,
            })
            if config is not None:
                cfg = os.path.join(work, "config.json")
                with open(cfg, "w") as f:
                    json.dump(config, f)
                full_env["FARMHAND_CONFIG"] = cfg
            full_env.update(env or {})
            result_dir = os.path.join(work, "result")
            os.mkdir(result_dir)
            proc = subprocess.run([sys.executable, "-m", "farmhand.run", test_case], cwd=result_dir,
                                  env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
            with open(report) as f:
                return json.load(f), proc.stdout.decode("utf-8", "replace")
        finally:
            shutil.rmtree(work, ignore_errors=True)
