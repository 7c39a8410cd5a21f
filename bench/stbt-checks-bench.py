"""What recording a check adds to it (issue 18: <= 1 ms; the frame is saved off the test's thread):
PYTHONPATH=python /usr/bin/python3 bench/stbt-checks-bench.py"""
import os, statistics, tempfile, time
import numpy as np
os.environ["FARMHAND_CHECKS_DIR"] = tempfile.mkdtemp(prefix="stbt-checks-bench-")
os.environ["FARMHAND_TEST_PACK_DIR"] = os.environ["FARMHAND_CHECKS_DIR"]
import stbt
from stbt_core import _checks
rng = np.random.default_rng(1)
frames = [stbt.Frame(rng.integers(0, 255, (720, 1280, 3), dtype=np.uint8), time=i / 25) for i in range(40)]
region = stbt.Region(100, 100, 400, 40)


def timed(passed, n):
    ts = []
    for i in range(n):
        f = frames[i % len(frames)]
        t = time.perf_counter()
        _checks.record("match", passed, f, region, {"match_threshold": 0.8}, score=0.5, threshold=0.8)
        ts.append(time.perf_counter() - t)
        time.sleep(0.04)  # a check per 25 fps frame, as wait_for_match makes them
    return ts


_checks.record("warm", True, frames[0])
_checks.flush()
for label, passed, n in (("passing, sampled in (first 20)", True, 20), ("passing (first 20 kept, then 1 in 10)", True, 200),
                         ("failing (always kept, frame queued)", False, 40)):
    ts = timed(passed, n)
    print("%s: median %.3f ms, max %.3f ms per 720p check (%d checks)" % (
        label, statistics.median(ts) * 1000, max(ts) * 1000, n))
    _checks.flush()
