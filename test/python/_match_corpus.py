"""Pictures for the matching tests and benchmark, drawn here with OpenCV
(farmhand's own; nothing copied): a 1280x720 "menu" screen of the kind a
set-top box shows, and helpers that cut templates out of it."""

import cv2
import numpy as np

FONT = cv2.FONT_HERSHEY_SIMPLEX
WIDTH, HEIGHT = 1280, 720
BUTTON_COLOR = (150, 90, 30)      # BGR: a blue button
TEXT_COLOR = (255, 255, 255)
LABELS = ["Home", "Search", "Movies", "Series", "Sport", "Kids"]


def background(width=WIDTH, height=HEIGHT):
    """A dark vertical gradient with a soft diagonal pattern (no flat areas)."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    b = 40 + 30 * y / height + 10 * np.sin((x + y) / 37.0)
    g = 20 + 20 * y / height + 8 * np.sin((x - y) / 53.0)
    r = 15 + 10 * np.cos(x / 91.0)
    return np.clip(np.dstack([b, g, r]), 0, 255).astype(np.uint8)


def button(img, x, y, label, w=200, h=100, color=BUTTON_COLOR, border=None):
    """A rounded-ish button with a label; ``border`` (colour) draws a 1-pixel outline."""
    cv2.rectangle(img, (x + 4, y), (x + w - 5, y + h - 1), color, -1)
    cv2.rectangle(img, (x, y + 4), (x + w - 1, y + h - 5), color, -1)
    for cx, cy in ((x + 4, y + 4), (x + w - 5, y + 4), (x + 4, y + h - 5), (x + w - 5, y + h - 5)):
        cv2.circle(img, (cx, cy), 4, color, -1)
    size = cv2.getTextSize(label, FONT, 1.1, 3)[0]
    cv2.putText(img, label, (x + (w - size[0]) // 2, y + (h + size[1]) // 2), FONT, 1.1, TEXT_COLOR, 3,
                cv2.LINE_AA)
    if border is not None:
        cv2.rectangle(img, (x, y), (x + w - 1, y + h - 1), border, 1)
    return img


def logo(img, cx, cy):
    """A round badge with a letter: drawn on whatever is beneath."""
    cv2.circle(img, (cx, cy), 40, (40, 200, 240), -1)
    cv2.circle(img, (cx, cy), 40, (255, 255, 255), 3, cv2.LINE_AA)
    cv2.putText(img, "F", (cx - 17, cy + 17), FONT, 1.5, (60, 30, 10), 4, cv2.LINE_AA)
    return img


def logo_template():
    """The badge alone, transparent around it (alpha 0 outside the circle)."""
    size = 100
    img = np.zeros((size, size, 3), np.uint8)
    logo(img, size // 2, size // 2)
    alpha = np.zeros((size, size), np.uint8)
    cv2.circle(alpha, (size // 2, size // 2), 42, 255, -1)
    return np.dstack([img, alpha])


def menu_screen():
    """The screen: a row of six buttons at y=203, x=25 + 205*i, a badge at (1150, 80)."""
    img = background()
    for i, label in enumerate(LABELS):
        button(img, 25 + 205 * i, 203, label)
    logo(img, 1150, 80)
    cv2.putText(img, "Recordings and Settings", (120, 500), FONT, 1.0, TEXT_COLOR, 2, cv2.LINE_AA)
    return img


def crop(img, x, y, w, h):
    return np.ascontiguousarray(img[y:y + h, x:x + w])


def with_alpha(bgr, transparent_regions=()):
    """``bgr`` with an alpha channel, 0 inside each (x, y, w, h) given."""
    alpha = np.full(bgr.shape[:2], 255, np.uint8)
    for x, y, w, h in transparent_regions:
        alpha[y:y + h, x:x + w] = 0
    return np.dstack([bgr, alpha])


def first_pass_score(frame, template_bgra, x, y):
    """The first pass's score of ``template`` at (x, y), straight from its
    definition (docs/stbt-matching.md): 1 - the mean square difference of
    the compared values (opaque pixels, 3 channels) over 255²."""
    t = template_bgra.astype(np.float64)
    h, w = t.shape[:2]
    opaque = (template_bgra[:, :, 3] == 255) if t.shape[2] == 4 else np.ones((h, w), bool)
    d = frame[y:y + h, x:x + w].astype(np.float64) - t[:, :, :3]
    return 1.0 - (d[opaque] ** 2).sum() / (opaque.sum() * 3 * 255.0 ** 2)


def jpeg(img, quality=70):
    ok, data = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, quality])
    assert ok
    return cv2.imdecode(data, cv2.IMREAD_COLOR)


def noisy(img, sigma, seed=7):
    rng = np.random.default_rng(seed)
    return np.clip(img.astype(np.float64) + rng.normal(0, sigma, img.shape), 0, 255).astype(np.uint8)
