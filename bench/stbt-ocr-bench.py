#!/usr/bin/python3
"""stbt.ocr speed and accuracy (issue 18's limits), printed against the limits.

Run from the repository root:  /usr/bin/python3 bench/stbt-ocr-bench.py [--runs N] [--no-accuracy]

Speed, each the median (and 90th percentile) of N calls on a 1280x720 frame
rendered here (DejaVu Sans, white on dark blue), the cache of identical
reads emptied before each call unless said otherwise:

- ocr of one line of text, a 400x40 region: median <= 80 ms;
- ocr of the whole frame: median <= 800 ms;
- match_text over the whole frame: median <= 1 s;
- an identical repeated read (same pixels, same parameters, from the cache): <= 2 ms;
- each through the resident tesserocr worker (python3-tesserocr in one
  long-lived child process, the default) and through the ``tesseract``
  command per read (the fallback when python3-tesserocr is missing), with
  the worker's ratio to the command;
- for reference: the same 400x40 line and whole frame read in-process
  through python3-tesserocr, same preprocessing, same tesseract and model.

The CPU time (this process, its reaped tesseract children and the resident
worker, read from /proc) is printed beside the wall clock (in brackets): on
a shared machine the wall clock also counts time other processes held the
cores.

Accuracy, the share of lines read exactly, with ``text_color`` given
(target >= 98 %) and without:

- set 1: 100 lines, five DejaVu faces, sizes 14 to 40 px, light on dark, dark
  on light and on coloured backgrounds (the figures first measured);
- random sets: 300 lines each of words, times and numbers not in set 1, eight
  DejaVu faces, sizes 14-40 px, random text and background colours at least
  110 apart in luminance, random margins. The preprocessing (upsample towards
  UPSAMPLE_LINE_HEIGHT, padding, single-line mode) was chosen on set 1 and
  seed 1 (seeds 2 and 3 were looked at while developing it); ``--seed``
  (default 4) is a held-out set no choice was made on;
- the virtual box's own screens (bench/virtual-menus.ts);
- the TV-screen corpus (test/python/_ocr_corpus.py: condensed and light fonts, gradients and
  photo-like backgrounds, contrast down to 70, 1080p drawn and captured at 720p, 4:2:0, JPEG,
  a second text of another colour in a quarter of the cases): ``--corpus N`` lines of the
  training split (the text_color preprocessing was chosen on it) and of the held-out split, of
  the "tv" variant (text to background contrast ratio at least WCAG's 3:1) and of the "hard"
  one (any colours); ``--corpus-only`` measures only that.
"""

import argparse
import collections
import os
import random
import resource
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "python")]
os.environ["FARMHAND_TEST_PACK_DIR"] = tempfile.mkdtemp(prefix="stbt-ocr-bench-")  # built-in defaults
os.environ.pop("FARMHAND_CONFIG", None)
os.environ.pop("FARMHAND_CONTROL_SOCKET", None)
# One OpenMP thread, as _ocr_tesseract gives each tesseract child: the in-process comparison on equal terms.
os.environ.setdefault("OMP_THREAD_LIMIT", "1")

import cv2  # noqa: E402  pylint: disable=wrong-import-position
import numpy  # noqa: E402  pylint: disable=wrong-import-position
import stbt_core as stbt  # noqa: E402  pylint: disable=wrong-import-position
from stbt_core import _ocr, _ocr_prepare, _ocr_tesseract  # noqa: E402  pylint: disable=wrong-import-position

FONTS = "/usr/share/fonts/truetype/dejavu/"
FACES = ["DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSerif.ttf", "DejaVuSansMono.ttf",
         "DejaVuSansCondensed.ttf"]
LINES = ["Channel 104: Evening News", "Recordings", "Settings and Help", "BBC One HD", "Series 3, Episode 12",
         "Parental Control PIN", "Sports 2 (HD)", "Watch from start", "Now 19:30 - Next 20:00", "Audio: English"]
# (text BGR, background BGR)
COLOURS = [((255, 255, 255), (60, 30, 20)), ((20, 20, 20), (230, 230, 230)), ((0, 220, 255), (30, 20, 120)),
           ((120, 40, 0), (200, 240, 250))]
SIZES = [14, 18, 24, 32, 40]
_fonts = {}


def put_text(frame, text, x, y, size, colour, face="DejaVuSans.ttf"):
    if face not in _fonts:
        ft = cv2.freetype.createFreeType2()
        ft.loadFontData(FONTS + face, 0)
        _fonts[face] = ft
    _fonts[face].putText(frame, text, (x, y), size, colour, -1, cv2.LINE_AA, False)
    w, h = _fonts[face].getTextSize(text, size, -1)[0]
    return stbt.Region(x, y, width=w, height=h)


MENU_TEXT = (255, 255, 255)  # the menu's white text, for the text_color timings


def menu_frame():
    frame = numpy.zeros((720, 1280, 3), numpy.uint8)
    frame[:] = (60, 30, 20)
    put_text(frame, "Channel 104: Evening News", 110, 62, 24, (255, 255, 255))
    for i, text in enumerate(["Recordings", "Settings and Help", "Watch from start", "Parental Control PIN",
                              "Audio: English", "Series 3, Episode 12"]):
        put_text(frame, text, 110, 160 + 70 * i, 26, (255, 255, 255))
    put_text(frame, "Now 19:30 - Next 20:00", 760, 620, 24, (200, 200, 200))
    return stbt.Frame(frame, time=0.0)


def worker_cpu():
    """CPU seconds used so far by the resident worker (0 when none runs)."""
    pid = _ocr_tesseract._worker_pid()  # pylint: disable=protected-access
    if pid is None:
        return 0.0
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(fn, runs, clear=True):
    fn()
    times, cpu = [], []
    for _ in range(runs):
        if clear:
            _ocr_tesseract._cache.clear()  # pylint: disable=protected-access
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        before_worker = worker_cpu()
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        times.append((time.perf_counter() - start) * 1000.0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((time.process_time() - start_cpu + after.ru_utime - before.ru_utime
                    + after.ru_stime - before.ru_stime + worker_cpu() - before_worker) * 1000.0)
    times.sort()
    cpu.sort()
    return times[len(times) // 2], times[int(len(times) * 0.9)], cpu[len(cpu) // 2]


def report(name, figures, limit):
    median, p90, cpu = figures
    verdict = "ok" if median <= limit else "OVER"
    print("%-52s median %8.1f ms  p90 %8.1f ms  [cpu %7.1f ms]  limit %6g ms  %.2fx (cpu %.2fx)  %s"
          % (name, median, p90, cpu, limit, median / limit, cpu / limit, verdict))
    return figures


def tesserocr_reader():
    """A function reading a grey picture in-process with python3-tesserocr, or None when it is not installed."""
    try:
        import tesserocr  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    api = tesserocr.PyTessBaseAPI(lang="eng", oem=tesserocr.OEM.LSTM_ONLY,
                                  psm=tesserocr.PSM.AUTO)

    def read(grey):
        grey = numpy.ascontiguousarray(grey)
        api.SetImageBytes(grey.tobytes(), grey.shape[1], grey.shape[0], 1, grey.shape[1])
        return api.GetUTF8Text().strip()
    return read


def set_one():
    """(frame, region, text, text colour, description) of the 100 lines of set 1."""
    cases, total = [], 0
    for face in FACES:
        for size in SIZES:
            for n, (fg, bg) in enumerate(COLOURS):
                text = LINES[(total + n) % len(LINES)]
                frame = numpy.zeros((720, 1280, 3), numpy.uint8)
                frame[:] = bg
                where = put_text(frame, text, 100, 300, size, fg, face)
                region = where.extend(-12, -12, 12, 12 + size // 2)  # the descenders too
                total += 1
                cases.append((frame, region, text, fg, "%s %dpx colours %d" % (face, size, n)))
    return cases


WORDS = ["Movies", "Kids", "Drama", "Weather", "Live", "Guide", "Today", "Tomorrow", "Premier", "League",
         "Highlights", "Documentary", "Comedy", "Music", "Store", "Rent", "Buy", "Favourites", "Search",
         "Subtitles", "On", "Off", "Volume", "Network", "Wi-Fi", "Connected", "Update", "Version", "Storage",
         "Free", "Used", "Record", "Series", "Reminder", "Cancel", "OK", "Back", "Exit", "Info", "Play", "Pause",
         "Resume", "Delete", "Episode", "Season", "Film4", "ITV2", "More4", "Quiz", "Night", "Morning",
         "Cooking", "Travel", "Garden", "Planet", "History", "Science", "Cartoon", "Nature"]
RANDOM_FACES = FACES + ["DejaVuSerif-Bold.ttf", "DejaVuSansCondensed-Bold.ttf", "DejaVuSansMono-Bold.ttf"]


def random_set(seed, count=300):
    """``count`` random lines: 1-4 tokens (words, times, numbers; the first a word or a number), a random
    face, size 14-40 px, text and background colours at least 110 apart in luminance, random margins."""
    r = random.Random(seed)

    def luminance(c):
        return 0.114 * c[0] + 0.587 * c[1] + 0.299 * c[2]
    cases = []
    for _ in range(count):
        face, size = r.choice(RANDOM_FACES), r.randint(14, 40)
        while True:
            fg, bg = tuple(r.randint(0, 255) for _ in range(3)), tuple(r.randint(0, 255) for _ in range(3))
            if abs(luminance(fg) - luminance(bg)) >= 110:
                break
        parts = []
        for i in range(r.randint(1, 4)):
            k = r.random() if i else r.random() * 0.9
            if k < 0.7:
                parts.append(r.choice(WORDS))
            elif k < 0.8:
                parts.append("%02d:%02d" % (r.randint(0, 23), r.choice([0, 15, 30, 45])))
            elif k < 0.9:
                parts.append(str(r.randint(1, 999)))
            else:
                parts.append(r.choice(["(HD)", "-", "&", "S%dE%d" % (r.randint(1, 9), r.randint(1, 20))]))
        text = " ".join(parts)
        frame = numpy.zeros((720, 1280, 3), numpy.uint8)
        frame[:] = bg
        where = put_text(frame, text, 100, 300, size, fg, face)
        region = where.extend(-r.randint(4, 16), -r.randint(4, 16), r.randint(4, 16), r.randint(4, 16) + size // 2)
        cases.append((frame, region, text, fg, "%s %dpx text %s on %s" % (face, size, fg, bg)))
    return cases


def accuracy(name, cases, without=True):
    for with_colour in (True, False) if without else (True,):
        exact, misses = 0, []
        for frame, region, text, fg, desc in cases:
            got = stbt.ocr(frame, region, text_color=fg if with_colour else None)
            if got == text:
                exact += 1
            else:
                misses.append("%s: %r, read %r" % (desc, text, got))
        share = 100.0 * exact / len(cases)
        print("accuracy, %-44s %3d/%d lines exact = %5.1f %%  %s" % (
            name + (", text_color given:" if with_colour else ", without text_color:"), exact, len(cases),
            share, ("target 98 %: " + ("ok" if share >= 98 else "UNDER")) if with_colour else ""))
        for miss in misses[:8]:
            print("    missed: " + miss)


def virtual_box_accuracy():
    """The virtual set-top box's own screens, rendered by its renderFrame (bench/virtual-menus.ts): each
    line of text as drawn (deduplicated: the logo and the clock are on every screen), read in a region
    around it with text_color its fill colour. Lines drawn at partial opacity (the live picture's faint
    channel name) are left out: their colour on screen is not their fill. Runs of spaces count as one, as
    SVG draws them."""
    import json  # pylint: disable=import-outside-toplevel
    import subprocess  # pylint: disable=import-outside-toplevel
    out = tempfile.mkdtemp(prefix="stbt-ocr-virtual-")
    tsx = os.path.join(ROOT, "node_modules", ".bin", "tsx")
    try:
        subprocess.run([tsx, os.path.join(ROOT, "bench", "virtual-menus.ts"), out], check=True, cwd=ROOT,
                       stdout=subprocess.DEVNULL)
    except (OSError, subprocess.CalledProcessError) as e:
        print("virtual box menus: not rendered (%s): skipped" % e)
        return
    with open(os.path.join(out, "manifest.json")) as f:
        manifest = json.load(f)
    seen, exact, misses, faint, eq = set(), 0, [], 0, 0
    for entry in manifest:
        rgb = numpy.fromfile(os.path.join(out, entry["file"]), numpy.uint8).reshape(720, 1280, 3)
        frame = stbt.Frame(numpy.ascontiguousarray(rgb[:, :, ::-1]), time=0.0)
        for line in entry["lines"]:
            key = (line["text"], line["x"], line["y"], line["size"], line["fill"], entry["page"])
            if line["opacity"] is not None:
                faint += 1
                continue
            if key in seen:
                continue
            seen.add(key)
            face = "DejaVuSansMono.ttf" if line["mono"] else "DejaVuSans-Bold.ttf" if line["bold"] else "DejaVuSans.ttf"
            if face not in _fonts:
                _fonts[face] = cv2.freetype.createFreeType2()
                _fonts[face].loadFontData(FONTS + face, 0)
            size = line["size"]
            width = _fonts[face].getTextSize(line["text"], size, -1)[0][0]
            left = {"start": line["x"], "middle": line["x"] - width / 2, "end": line["x"] - width}[line["anchor"]]
            region = stbt.Region(int(left) - 8, int(line["y"] - size) - 4, right=int(left + width) + 10,
                                 bottom=int(line["y"] + size * 0.3) + 4)
            got = stbt.ocr(frame, region, text_color=line["fill"])
            # SVG (xml:space default) draws runs of spaces as one: "Mon 18:00  58 min" is shown with one.
            if stbt.ocr_eq(got, line["text"]):
                eq += 1
            if got == " ".join(line["text"].split()):
                exact += 1
            else:
                misses.append("%s %dpx %s: %r, read %r" % (entry["page"], size, line["fill"], line["text"], got))
    share = 100.0 * exact / max(1, len(seen))
    print("accuracy, virtual box menus, text_color given: %3d/%d lines exact = %5.1f %%  target 98 %%: %s "
          "(%d faint lines left out); %d/%d equal by ocr_eq" % (exact, len(seen), share,
                                                               "ok" if share >= 98 else "UNDER", faint, eq,
                                                               len(seen)))
    for miss in misses[:12]:
        print("    missed: " + miss)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--no-accuracy", action="store_true")
    parser.add_argument("--virtual-only", action="store_true", help="only the virtual box menus' accuracy")
    parser.add_argument("--accuracy-only", action="store_true", help="only the accuracy figures")
    parser.add_argument("--seed", type=int, default=4, help="the held-out random set's seed (default 4)")
    parser.add_argument("--corpus", type=int, default=300, help="lines of each corpus split (default 300)")
    parser.add_argument("--corpus-only", action="store_true", help="only the TV-screen corpus's accuracy")
    parser.add_argument("--engine", choices=list(stbt.OcrEngine.__members__),
                        help="with --corpus-only: read the corpus with this OcrEngine (default: [ocr] engine, LSTM)")
    args = parser.parse_args()
    if args.corpus_only:
        corpus_accuracy(args.corpus, engine=args.engine and stbt.OcrEngine[args.engine])
        return
    if args.virtual_only:
        virtual_box_accuracy()
        return
    if args.accuracy_only:
        all_accuracy(args.seed, args.corpus)
        return
    frame = menu_frame()
    line = stbt.Region(100, 154, width=400, height=40)
    assert stbt.ocr(frame, line) == "Recordings", stbt.ocr(frame, line)
    assert _ocr_tesseract.legacy_tessdata("eng"), "no legacy-engine data: run scripts/setup.sh"
    print("stbt OCR bench: tesseract %s, %d runs each, cache emptied before each call" % (
        _ocr_tesseract._run([_ocr_tesseract.TESSERACT, "--version"], None, 10).decode().splitlines()[0],  # pylint: disable=protected-access
        args.runs))
    few = max(3, args.runs // 3)
    cases = [("ocr, one line (400x40 region of a 720p frame)", lambda: stbt.ocr(frame, line), args.runs, 80),
             ("ocr, whole 720p frame", lambda: stbt.ocr(frame), few, 800),
             ("match_text, whole 720p frame", lambda: stbt.match_text("Parental Control", frame), few, 1000),
             ("ocr, one line, text_color", lambda: stbt.ocr(frame, line, text_color=MENU_TEXT), args.runs, 80),
             ("ocr, whole 720p frame, text_color", lambda: stbt.ocr(frame, text_color=MENU_TEXT), few, 800),
             # Beside the default (LSTM): stb-tester's default engine, tesseract's legacy one (OcrEngine).
             ("ocr, one line, engine=TESSERACT (legacy)",
              lambda: stbt.ocr(frame, line, engine=stbt.OcrEngine.TESSERACT), args.runs, 80),
             ("ocr, whole 720p frame, engine=TESSERACT (legacy)",
              lambda: stbt.ocr(frame, engine=stbt.OcrEngine.TESSERACT), few, 800)]
    got = {}
    for use_worker in (True, False):
        _ocr_tesseract.USE_WORKER = use_worker
        print("through the %s:" % ("resident tesserocr worker" if use_worker else "tesseract command per read"))
        for name, fn, runs, limit in cases:
            got[use_worker, name] = report("  " + name, measure(fn, runs), limit)
        report("  ocr, identical repeated read (cached)", measure(lambda: stbt.ocr(frame, line), args.runs * 10,
                                                                  clear=False), 2)
    _ocr_tesseract.USE_WORKER = True
    print("worker / command:")
    for name, _, _, _ in cases:
        w, c = got[True, name], got[False, name]
        print("  %-50s wall %.2f  cpu %.2f  (command %.1fx the worker's cpu)" % (
            name, w[0] / c[0], w[2] / c[2], c[2] / w[2]))
    read = tesserocr_reader()
    if read is None:
        print("python3-tesserocr is not installed: no in-process comparison")
    else:
        params = _ocr._Params(stbt.OcrMode.PAGE_SEGMENTATION_WITHOUT_OSD, None, None, None, None, None, None,  # pylint: disable=protected-access
                              None, None, None)
        grey_line = _ocr_prepare.prepare(frame, line, params)[2]
        grey_frame = _ocr_prepare.prepare(frame, stbt.Region.ALL, params)[2]
        assert read(grey_line) == "Recordings"
        report("  in-process tesserocr, same line (for comparison)", measure(lambda: read(grey_line), args.runs),
               80)
        report("  in-process tesserocr, whole frame (comparison)",
               measure(lambda: read(grey_frame), max(3, args.runs // 3)), 800)
    if not args.no_accuracy:
        all_accuracy(args.seed, args.corpus)


def corpus_accuracy(count, variants=("tv", "hard"), engine=None):
    """The TV-screen corpus, each variant ("tv": WCAG contrast ratio at least 3:1; "hard": any colours):
    with text_color on every case, without it on the cases with no second text; exact lines, by
    category."""
    sys.path.insert(0, os.path.join(ROOT, "test", "python"))
    import _ocr_corpus  # pylint: disable=import-outside-toplevel,import-error
    print("corpus fonts: %s" % ", ".join(name for name, _ in _ocr_corpus.available_fonts()))
    print("engine: %s" % (engine.name if engine is not None else "[ocr] engine (LSTM)"))
    for variant in variants:
        for split in ("train", "heldout"):
            name = "corpus %s %s (%s)" % (variant, split, "tuned on" if split == "train" else "held out")
            cases = _ocr_corpus.cases(split, count, variant=variant)
            for with_colour in (True, False):
                tally = collections.defaultdict(lambda: [0, 0])
                for c in cases:
                    if c.distractor and not with_colour:
                        continue
                    region = stbt.Region(*c.region[:2], right=c.region[2], bottom=c.region[3])
                    ok = stbt.ocr(c.frame, region, text_color=c.text_color if with_colour else None,
                                  engine=engine) == c.text
                    for key in _corpus_categories(c):
                        tally[key][0] += ok
                        tally[key][1] += 1
                exact, total = tally["all"]
                print("accuracy, %-40s %3d/%d lines exact = %5.1f %%%s" % (
                    name + (", text_color given:" if with_colour else ", without text_color:"), exact, total,
                    100.0 * exact / max(1, total),
                    "  target 98 %: " + ("ok" if exact >= 0.98 * total else "UNDER") if with_colour else ""))
                print("    " + ", ".join("%s %d/%d" % (k, v[0], v[1]) for k, v in sorted(tally.items())
                                         if k != "all"))


def _corpus_categories(c):
    """The corpus case's categories for the breakdown: its size, background and second text."""
    words = c.description.split()
    size = next(w for w in words if w.endswith("px"))
    background = next(w for w in ("flat", "gradient", "photo") if w in words)
    return ["all", "%3s" % size, background, "beside another text" if c.distractor else "alone"]


def all_accuracy(seed, corpus=300):
    accuracy("set 1 (100 lines, tuned on)", set_one())
    accuracy("random seed 1 (tuned on)", random_set(1), without=False)
    accuracy("random seed %d (%s)" % (seed, "held out" if seed > 3 else "seen while tuning"), random_set(seed))
    virtual_box_accuracy()
    if corpus:
        corpus_accuracy(corpus)


if __name__ == "__main__":
    main()
