"""Test cases for farmhand's virtual set-top box: navigate its menus with the
remote control and check the screen against template images.

Each template in ``images/`` is a piece of the box's screen at 1280x720 (the
default capture size); ``wait_for_match`` looks for it in the live picture
until it appears or the timeout passes. The box keeps its state between test
cases, like a real device, so every test starts by going to a known screen.

``test_menu_wraps_around`` fails on purpose: open its result to see what a
failure looks like (the reason, the screenshot, the video).
"""

import farmhand

# A key press takes effect within a few frames, well under a second on an idle box; the bound is
# generous because a loaded 2-core appliance (or CI) can take seconds to render, encode and match.
TIMEOUT_SECS = 15


def go_home():
    """Wake the box if it is in standby, open the main menu, focus "Live TV"."""
    if farmhand.is_screen_black():
        farmhand.press("KEY_POWER")
    farmhand.press("KEY_MENU")
    for _ in range(4):  # the menu has 5 items; UP stops at the top one
        farmhand.press("KEY_UP")
    farmhand.wait_for_match("images/menu-live-tv-focused.png", timeout_secs=TIMEOUT_SECS)


def test_open_guide_and_go_back():
    go_home()
    farmhand.press("KEY_DOWN")
    farmhand.wait_for_match("images/menu-guide-focused.png", timeout_secs=TIMEOUT_SECS)
    farmhand.press("KEY_OK")
    farmhand.wait_for_match("images/title-guide.png", timeout_secs=TIMEOUT_SECS)
    farmhand.press("KEY_BACK")
    # BACK returns to the menu with the focus where it was.
    farmhand.wait_for_match("images/menu-guide-focused.png", timeout_secs=TIMEOUT_SECS)


def test_open_settings():
    go_home()
    for _ in range(4):
        farmhand.press("KEY_DOWN")
    farmhand.wait_for_match("images/menu-settings-focused.png", timeout_secs=TIMEOUT_SECS)
    farmhand.press("KEY_OK")
    farmhand.wait_for_match("images/title-settings.png", timeout_secs=TIMEOUT_SECS)


def test_move_in_apps_grid():
    go_home()
    for _ in range(3):
        farmhand.press("KEY_DOWN")
    farmhand.wait_for_match("images/menu-apps-focused.png", timeout_secs=TIMEOUT_SECS)
    farmhand.press("KEY_OK")
    farmhand.wait_for_match("images/title-apps.png", timeout_secs=TIMEOUT_SECS)
    # The apps page opens with "Weather" (top left) focused; DOWN focuses "Music" below it.
    farmhand.press("KEY_DOWN")
    match = farmhand.wait_for_match("images/app-music-focused.png", timeout_secs=TIMEOUT_SECS)
    print("Music tile found at", match.region, "confidence", match.confidence)


def test_tune_channel_with_digits():
    go_home()
    for key in ["KEY_1", "KEY_0", "KEY_5"]:
        farmhand.press(key)
    # Three digits tune at once: Live TV opens with the channel banner.
    farmhand.wait_for_match("images/banner-ch-105.png", timeout_secs=TIMEOUT_SECS)


def test_channel_up():
    go_home()
    for key in ["KEY_1", "KEY_0", "KEY_1"]:
        farmhand.press(key)
    farmhand.press("KEY_CHANNELUP")
    farmhand.wait_for_match("images/banner-ch-102.png", timeout_secs=TIMEOUT_SECS)


def test_standby_and_wake_up():
    go_home()
    farmhand.press("KEY_POWER")
    assert farmhand.wait_until(farmhand.is_screen_black, timeout_secs=TIMEOUT_SECS), \
        "the screen did not go black in standby"
    farmhand.press("KEY_POWER")
    farmhand.wait_for_match("images/menu-live-tv-focused.png", timeout_secs=TIMEOUT_SECS)


def test_menu_wraps_around():
    """Fails on purpose: this box's menu does not wrap around.

    Pressing UP on the first item ("Live TV") leaves the focus there, so the
    focused "Settings" item never appears and wait_for_match raises
    MatchTimeout: the result is a failure, with the screenshot showing
    "Live TV" still focused.
    """
    go_home()
    farmhand.press("KEY_UP")
    farmhand.wait_for_match("images/menu-settings-focused.png", timeout_secs=3)
