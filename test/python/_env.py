"""Environment variables a test sets for the code under test, put back as they were afterwards."""

import os


def restore_env(saved):
    """Put back each variable of ``saved``: its old value, or unset when it was unset."""
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
