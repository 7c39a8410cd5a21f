"""Example test cases that need no device: configuration and tags."""
import farmhand


def test_passes():
    greeting = farmhand.get_config("example", "greeting")
    print("the test pack says:", greeting)
    assert greeting.startswith("hello")


def test_reads_tags():
    print("tags:", farmhand.get_config("result.tags", "purpose", "none given"))
