"""The same virtual set-top box driven through the stbt API: the module
stb-tester's test packs import (``import stbt``, or ``import stbt_core as
stbt``). farmhand runs such tests unchanged; see docs/test-scripts.md and
docs/migrating-from-stb-tester.md."""

import stbt

TIMEOUT_SECS = 15


def test_open_guide_with_stbt():
    if stbt.is_screen_black():
        stbt.press("KEY_POWER")
    stbt.press("KEY_MENU")
    for _ in range(4):
        stbt.press("KEY_UP")  # paced 0.3 s apart, as stb-tester does
    stbt.wait_for_match("images/menu-live-tv-focused.png", timeout_secs=TIMEOUT_SECS)
    stbt.press("KEY_DOWN")
    stbt.wait_for_match("images/menu-guide-focused.png", timeout_secs=TIMEOUT_SECS)
    stbt.press("KEY_OK")
    title = stbt.wait_for_match("images/title-guide.png", timeout_secs=TIMEOUT_SECS)
    stbt.draw_text("the guide is open: its title is at %r" % (title.region,))
