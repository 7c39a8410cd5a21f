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
        ts, cs = [], []
        t, c = time.perf_counter(), time.process_time()
        for r in stbt.detect_motion(frames=seq, differ=differ, timeout_secs=None):
            n, m = time.perf_counter(), time.process_time(); ts.append(n - t); cs.append(m - c); t, c = n, m
        wall, cpu = statistics.median(ts) * 1000, statistics.median(cs) * 1000
        print("%s, %s: median %.1f ms per 720p frame [cpu %.1f ms]  limit 8 ms  %.2fx (cpu %.2fx)"
              % (type(differ).__name__, name, wall, cpu, wall / 8, cpu / 8))
