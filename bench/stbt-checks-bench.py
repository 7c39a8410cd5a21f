"""What recording a check adds to it (issue 18: <= 1 ms; the frame is saved off the test's thread):
PYTHONPATH=python /usr/bin/python3 bench/stbt-checks-bench.py [--n N]

Each line: the wall time of ``_checks.record`` per 720p check (median, p95, p99, max) and the most CPU
time the test's thread spent in one call (``time.thread_time``): a max wall far above that max CPU is time
the thread spent off the CPU (the scheduler of a loaded machine, or waiting for the GIL). The control line
does the same loop with a dict built in place of the record and nothing written: its max is what the
scheduler alone adds on this machine at this moment; the second control does it while another process
(no GIL shared) encodes a 720p JPEG per frame, the writer's work: the scheduler with the writer's CPU load.
"""
import argparse
import os
import tempfile
import time

import numpy as np

os.environ["FARMHAND_CHECKS_DIR"] = tempfile.mkdtemp(prefix="stbt-checks-bench-")
os.environ["FARMHAND_TEST_PACK_DIR"] = os.environ["FARMHAND_CHECKS_DIR"]
import stbt  # noqa: E402  pylint: disable=wrong-import-position
from stbt_core import _checks  # noqa: E402  pylint: disable=wrong-import-position

rng = np.random.default_rng(1)
frames = [stbt.Frame(rng.integers(0, 255, (720, 1280, 3), dtype=np.uint8), time=i / 25) for i in range(40)]
region = stbt.Region(100, 100, 400, 40)


def control(f, passed):
    return {"time": f.time, "wall": time.time(), "kind": "match", "passed": passed, "region": region,
            "params": {"match_threshold": 0.8}, "score": 0.5, "threshold": 0.8}


def encoder_process():
    """A child process encoding a 720p JPEG every 40 ms (the writer's work, in another process)."""
    pid = os.fork()
    if pid == 0:
        try:
            import cv2  # pylint: disable=import-outside-toplevel
            while True:
                cv2.imencode(".jpg", frames[0], [cv2.IMWRITE_JPEG_QUALITY, 80])
                time.sleep(0.04)
        finally:
            os._exit(0)  # pylint: disable=protected-access
    return pid


def timed(passed, n, pause, fn):
    wall, cpu = [], []
    for i in range(n):
        f = frames[i % len(frames)]
        t, c = time.perf_counter(), time.thread_time()
        fn(f, passed)
        cpu.append(time.thread_time() - c)
        wall.append(time.perf_counter() - t)
        if pause:
            time.sleep(pause)  # a check per 25 fps frame, as wait_for_match makes them
    return sorted(wall), max(cpu)


def record(f, passed):
    _checks.record("match", passed, f, region, {"match_threshold": 0.8}, score=0.5, threshold=0.8)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=400)
    n = parser.parse_args().n
    _checks.record("warm", True, frames[0])
    _checks.flush()
    import signal  # pylint: disable=import-outside-toplevel
    pid = encoder_process()
    ts, cpu = timed(False, n, 0.04, control)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    report("control: a dict, another process encoding JPEGs", ts, cpu, n)
    for label, passed, count, pause, fn in (
            ("control: a dict, nothing recorded (the scheduler alone)", False, n, 0.04, control),
            ("passing, sampled in (first 20)", True, 20, 0.04, record),
            ("passing (first 20 kept, then 1 in 10)", True, n, 0.04, record),
            ("failing (always kept, frame queued), 25 a second", False, n, 0.04, record),
            ("failing back to back (a polling loop, no pause)", False, n, 0, record)):
        ts, cpu = timed(passed, count, pause, fn)
        report(label, ts, cpu, count)
        _checks.flush()


def report(label, ts, cpu, count):
    print("%-58s median %.3f ms  p95 %.3f  p99 %.3f  max %.3f ms  over 1 ms: %d  (max cpu %.3f ms; %d checks)" % (
        label, ts[len(ts) // 2] * 1000, ts[int(len(ts) * 0.95)] * 1000,
        ts[min(len(ts) - 1, int(len(ts) * 0.99))] * 1000, ts[-1] * 1000, sum(t > 0.001 for t in ts), cpu * 1000,
        count))


if __name__ == "__main__":
    main()
