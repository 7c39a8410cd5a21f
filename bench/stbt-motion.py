"""detect_motion per 720p frame (issue 18: <= 8 ms): PYTHONPATH=python /usr/bin/python3 bench/stbt-motion.py"""
import statistics, time
import numpy as np
import stbt
rng = np.random.default_rng(1)
base = rng.integers(0, 255, (720, 1280, 3), dtype=np.uint8)
box = []
for i in range(100):
    f = base.copy(); f[300:400, 100 + 10 * i:300 + 10 * i] = 255; box.append(stbt.Frame(f, time=i / 25))
rnd = [stbt.Frame(rng.integers(0, 255, (720, 1280, 3), dtype=np.uint8), time=i / 25) for i in range(100)]
for name, seq in (("moving box", box), ("every pixel changes", rnd)):
    for differ in (stbt.BGRDiff(), stbt.GrayscaleDiff()):
        ts = []
        t = time.perf_counter()
        for r in stbt.detect_motion(frames=seq, differ=differ, timeout_secs=None):
            n = time.perf_counter(); ts.append(n - t); t = n
        print("%s, %s: median %.1f ms per 720p frame" % (type(differ).__name__, name, statistics.median(ts) * 1000))
