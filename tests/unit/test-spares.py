#!/usr/bin/python3
"""Which spare a call takes (executor/mcp_executor/spare.py), as TAP, with
real spares: children of this process forked as the executor forks them,
in direct mode (no gVisor, no cgroups).  A spare that has warmed up says
so on its status pipe; a call takes the newest warm spare, or else the
oldest, and the warm line does not reach the call's status.  Spares warm
up only while no call runs and while they hold the one token (turns.py),
without it after TOKEN_WAIT seconds; a new token comes once none is left.

make check runs it with MCP_TEST_SRCDIR set (tests/unit/local.am).
"""

import os
import select
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.environ.get("MCP_TEST_SRCDIR", "."), "executor"))

from mcp_executor import status  # noqa: E402
from mcp_executor.spare import Spare, prepare_spare, take_spare  # noqa: E402
from mcp_executor.turns import TOKEN_WAIT  # noqa: E402
from mcp_executor.state import Args, State  # noqa: E402
from tap import done, ok  # noqa: E402  (tests/unit/tap.py, beside this file)


def until(cond, seconds=20.0):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def state():
    return State(Args(["--direct", "--uid=%d" % os.getuid(), "--gid=%d" % os.getgid()]))


def clear(st):
    for spare in st.spares:
        spare.discard()
    st.spares.clear()


def main():
    st = state()

    # A warm spare, then one forked for a request already there (it never
    # warms up): the warm one, though older.
    old = Spare(st)
    st.spares.append(old)
    ok(until(old.warm), "a spare says when it has warmed up")
    new = Spare(st, warm=False)
    st.spares.append(new)
    time.sleep(0.2)
    ok(not new.warm(), "a spare forked without a warm-up does not say so")
    chosen = take_spare(st, {}, "call")
    ok(chosen is old, "a call takes the warm spare, not a newer cold one")
    chosen.discard()
    clear(st)

    # A warm spare closes what it inherited from the executor while it
    # waits for its request: it holds fds 0-2 and its four pipes.
    inherited = os.open(os.devnull, os.O_RDONLY)
    spare = Spare(st)
    st.spares.append(spare)
    os.close(inherited)
    ok(until(spare.warm), "a spare warms up")

    def fds():
        return set(os.listdir("/proc/%d/fd" % spare.pid))

    # (It closes them one by one: wait for the end of its pass, not the
    # first fd gone.  make distcheck's tests inherit more of them.)
    ok(until(lambda: str(inherited) not in fds(), 2.0),
       "once warm it has closed an fd of the executor's (%d)" % inherited)
    ok(until(lambda: len(fds()) == 7, 2.0), "and holds fds 0-2 and its four pipes: %s" % sorted(fds(), key=int))
    clear(st)

    # Neither warm: the oldest, which has warmed longest.
    first = Spare(st, warm=False)
    st.spares.append(first)
    second = Spare(st, warm=False)
    st.spares.append(second)
    chosen = take_spare(st, {}, "call")
    ok(chosen is first, "of spares still warming up, the oldest")
    chosen.discard()
    clear(st)

    # Both warm: the newest.
    a = Spare(st)
    st.spares.append(a)
    b = Spare(st)
    st.spares.append(b)
    ok(until(lambda: a.warm() and b.warm()), "two spares warm up")
    chosen = take_spare(st, {}, "call")
    ok(chosen is b, "of warm spares, the newest")
    chosen.discard()
    clear(st)

    # Turns (turns.py): while the gate is closed (a call runs), a spare
    # does not warm up; once it opens, it does.
    st.turns.close_gate()
    gated = Spare(st)
    st.spares.append(gated)
    time.sleep(0.5)
    ok(not gated.warm(), "a spare does not warm up while a call runs")
    st.turns.open_gate()
    ok(until(gated.warm), "it warms up once the call is over")
    clear(st)

    # A spare waiting at the closed gate still ends when its request pipe
    # does (the executor went away): it never waits for the gate alone.
    st.turns.close_gate()
    waiting = Spare(st)
    waiting.close_ends()
    ok(until(lambda: os.waitpid(waiting.pid, os.WNOHANG)[0] == waiting.pid, 10.0),
       "a spare waiting for its turn ends with its request pipe")
    st.turns.open_gate()
    st.spares.clear()

    # The token: a spare warms up only while it holds it.  One a killed
    # spare took along is missing: a spare then waits TOKEN_WAIT seconds
    # and warms up without it.
    taken = os.read(st.turns.token_r, 16)
    ok(taken == b"t", "one token circulates")
    started = time.monotonic()
    late = Spare(st)
    st.spares.append(late)
    time.sleep(0.5)
    ok(not late.warm(), "without the token a spare does not warm up at once")
    ok(until(late.warm), "it warms up without it after a while")
    ok(time.monotonic() - started >= TOKEN_WAIT, "after TOKEN_WAIT seconds")
    clear(st)

    # ... and once none is left, prepare_spare() puts a new one in: the
    # next spare warms up and gives it back (without it, none comes back).
    prepare_spare(st)
    ok(len(st.spares) == 1 and until(st.spares[0].warm), "the next spare warms up")
    readable = until(lambda: bool(select.select([st.turns.token_r], [], [], 0)[0]))
    ok(readable and os.read(st.turns.token_r, 16) == b"t", "exactly one token again once none was left")
    os.write(st.turns.token_w, b"t")
    clear(st)

    # The call reads the warm line first: it says nothing of the call.
    said = status.parse(b"warm\ndone 0 12 3456\n")
    ok(said.done == (0, 12, 3456), "a done line after the warm line counts")
    ok(not (said.packages_changed or said.install_failed or said.packages_missing or said.input_failed
            or said.memory_error or said.learned or said.value), "the warm line sets nothing else")

    return done()


if __name__ == "__main__":
    sys.exit(main())
