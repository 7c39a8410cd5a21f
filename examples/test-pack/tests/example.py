"""Example test cases: one passes, one fails on purpose, so you see both."""
import time

import farmhand


def test_passes():
    greeting = farmhand.get_config("example", "greeting")
    print("the test pack says:", greeting)
    assert greeting.startswith("hello")


def test_fails():
    # Fails on purpose: the result shows failure_reason "AssertionError: ..." and a traceback.
    time.sleep(1)
    assert 1 + 1 == 3, "arithmetic is broken (this test fails on purpose)"


def test_reads_tags():
    print("tags:", farmhand.get_config("result.tags", "purpose", "none given"))
