"""TAP for the Python unit tests (test-*.py beside this file): ok() prints
one test point, done() the plan, and returns the exit status."""

import sys

_count = 0
_failed = 0


def ok(cond, what):
    global _count, _failed
    _count += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", _count, what), flush=True)
    if not cond:
        _failed += 1
    return bool(cond)


def done():
    print("1..%d" % _count, flush=True)
    return 1 if _failed else 0


if __name__ == "__main__":
    sys.exit("tap.py is a module of the unit tests, not a test")
