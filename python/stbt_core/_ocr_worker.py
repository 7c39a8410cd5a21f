"""The resident OCR worker: one long-lived child process per test process,
holding tesseract in-process through ``python3-tesserocr`` (see
docs/migrating-from-stb-tester.md, section OCR). Started by
``stbt_core._ocr_tesseract`` as ``python3 _ocr_worker.py``; standalone (it imports
nothing of stbt_core).

Protocol on its standard input and output, each message a 4-byte
big-endian length and that many bytes:

- on start it writes one JSON message: ``{"ok": true}``, or
  ``{"ok": false, "error": ...}`` (tesserocr missing) and exits;
- each request is two messages: a JSON header ``{"argv": [...], "sleep": s}``
  (the argv the ``tesseract`` command would run with: ``--psm``, ``--oem``,
  ``-l``, ``--tessdata-dir``, ``--user-words``, ``--user-patterns``, ``-c k=v``) and the PNG
  picture; the answer is one JSON message ``{"ok": true, "out": text}``
  (the command's standard output: text, or its TSV with header when
  ``tessedit_create_tsv=1``, hOCR before the text when
  ``tessedit_create_hocr=1``, no text when ``tessedit_create_txt=0``)
  or ``{"ok": false, "error": ...}``.

The models are loaded once per (lang, engine, folder, config, word lists) and kept
(the four last used); the page segmentation mode is set per read.
``sleep`` is a test hook: the worker sleeps that long before reading.
"""

import collections
import hashlib
import json
import os
import struct
import sys
import time

_TSV_HEADER = "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext\n"
_APIS = 4


def _read_exactly(f, n):
    data = b""
    while len(data) < n:
        chunk = f.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _read_msg(f):
    head = _read_exactly(f, 4)
    if head is None:
        return None
    return _read_exactly(f, struct.unpack(">I", head)[0])


def _write_json(f, obj):
    data = json.dumps(obj).encode("utf-8")
    f.write(struct.pack(">I", len(data)) + data)
    f.flush()


def _parse(argv):
    """(psm, oem, lang, language data folder or None, config dict, user words path, user patterns path)
    from the command's argv."""
    psm, oem, lang, folder, config, words, patterns = 3, 3, "eng", None, {}, None, None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--psm", "--oem", "-l", "--tessdata-dir", "--user-words", "--user-patterns", "-c"):
            v = argv[i + 1]
            i += 2
            if a == "--psm":
                psm = int(v)
            elif a == "--oem":
                oem = int(v)
            elif a == "-l":
                lang = v
            elif a == "--tessdata-dir":
                folder = v
            elif a == "--user-words":
                words = v
            elif a == "--user-patterns":
                patterns = v
            else:
                k, _, val = v.partition("=")
                config[k] = val
        else:
            i += 1
    return psm, oem, lang, folder, config, words, patterns


def _digest(path):
    if path is None:
        return None
    with open(path, "rb") as f:
        return hashlib.blake2b(f.read(), digest_size=16).hexdigest()


def main():
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    # Nothing else may write to our standard output: it is the answer channel.
    sys.stdout = sys.stderr
    try:
        import cv2  # pylint: disable=import-outside-toplevel
        import numpy  # pylint: disable=import-outside-toplevel
        import tesserocr  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        _write_json(stdout, {"ok": False, "error": str(e)})
        return
    _write_json(stdout, {"ok": True, "pid": os.getpid()})
    apis = collections.OrderedDict()
    tessdata = tesserocr.get_languages()[0]
    while True:
        header = _read_msg(stdin)
        if header is None:
            break
        png = _read_msg(stdin)
        if png is None:
            break
        req = json.loads(header.decode("utf-8"))
        if req.get("sleep"):
            time.sleep(float(req["sleep"]))
        try:
            psm, oem, lang, folder, config, words, patterns = _parse(req["argv"])
            tsv = config.pop("tessedit_create_tsv", "0") == "1"
            # The command's output files: hOCR when asked, the plain text unless turned off.
            hocr = config.pop("tessedit_create_hocr", "0") == "1"
            txt = config.pop("tessedit_create_txt", "1") != "0"
            key = (lang, oem, folder, tuple(sorted(config.items())), _digest(words), _digest(patterns))
            api = apis.get(key)
            if api is None:
                variables = dict(config)
                if words is not None:
                    variables["user_words_file"] = words
                if patterns is not None:
                    variables["user_patterns_file"] = patterns
                api = tesserocr.PyTessBaseAPI(init=False)
                api.InitFull(path=folder or tessdata, lang=lang, oem=oem, variables=variables)
                apis[key] = api
                while len(apis) > _APIS:
                    apis.popitem(last=False)[1].End()
            apis.move_to_end(key)
            api.SetPageSegMode(psm)
            grey = cv2.imdecode(numpy.frombuffer(png, numpy.uint8), cv2.IMREAD_GRAYSCALE)
            if grey is None:
                raise ValueError("could not decode the picture")
            grey = numpy.ascontiguousarray(grey)
            h, w = grey.shape
            api.SetImageBytes(grey.tobytes(), w, h, 1, w)
            if tsv:
                out = _TSV_HEADER + api.GetTSVText(0)
            else:
                out = (api.GetHOCRText(0) if hocr else "") + (api.GetUTF8Text() if txt else "")
            api.Clear()
            _write_json(stdout, {"ok": True, "out": out})
        except Exception as e:  # pylint: disable=broad-except
            _write_json(stdout, {"ok": False, "error": "%s: %s" % (type(e).__name__, e)})


if __name__ == "__main__":
    main()
