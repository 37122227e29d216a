#!/usr/bin/python3
"""The executor's spares wait while other sessions' calls wait
(executor/mcp_executor/main.py, Loop.between_calls), as TAP.  The
supervisor says L (with a number of milliseconds) right after a call's
answer when calls of other sessions wait for a slot, and N once none does.
Here the test is the supervisor: fd 0 of this process is a pipe it writes
frames into, and the Loop's spares are real children forked in direct
mode (no gVisor, no cgroups).

make check runs it with MCP_TEST_SRCDIR set (tests/unit/local.am).
"""

import os
import sys
import time
from types import SimpleNamespace

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.environ.get("MCP_TEST_SRCDIR", "."), "executor"))

import mcp_executor.main as executor_main  # noqa: E402
from mcp_executor.main import SPARE_DELAY, Loop  # noqa: E402
from mcp_executor.protocol import HEADER, SPARES_LATER, SPARES_NOW, FrameReader  # noqa: E402
from mcp_executor.state import Args, State  # noqa: E402
from tap import done, ok  # noqa: E402  (tests/unit/tap.py, beside this file)

SAID = SimpleNamespace(packages_changed=False, learned=[])


def frame(kind, payload=b""):
    return HEADER.pack(kind, len(payload)) + payload


def clear(st):
    for spare in st.spares:
        spare.discard()
    st.spares.clear()


def steps_until(loop, cond, seconds):
    """Run the loop as Loop.serve does (the frames read so far, then one
    step, which waits for what comes next) until cond."""
    end = time.monotonic() + seconds
    while True:
        loop.frames()
        if cond() or time.monotonic() >= end:
            return cond()
        loop.step()


def main():
    r, w = os.pipe()
    os.dup2(r, 0)
    os.close(r)
    st = State(Args(["--direct", "--uid=%d" % os.getuid(), "--gid=%d" % os.getgid()]))
    wake_r, _ = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    loop = Loop(st, FrameReader(0), wake_r)

    # Nobody waits: the spare is forked after SPARE_DELAY, as before.
    loop.between_calls(SAID)
    ok(len(st.spares) == 1 and st.turns.open, "no L: the next spare is forked after the answer")
    clear(st)

    # L, then N: nothing is forked until N; then the spare, and warm-ups go on.
    os.write(w, frame(SPARES_LATER, b"5000"))
    t0 = time.monotonic()
    loop.between_calls(SAID)
    ok(not st.spares and loop.spare_due, "L: no spare is forked after the answer")
    ok(not st.turns.open, "L: and spares forked earlier do not warm up (the gate is closed)")
    ok(time.monotonic() - t0 < SPARE_DELAY + 1.0, "L: the loop goes on (it does not block until N)")
    loop.step()
    ok(not st.spares, "L: a step without N forks nothing")
    os.write(w, frame(SPARES_NOW))
    ok(steps_until(loop, lambda: len(st.spares) == 1, 5.0), "N: the spare that waited is forked")
    ok(st.turns.open and not loop.spare_due and loop.later_until == 0, "N: the gate is open, nothing waits")
    clear(st)

    # L without N: the spare is forked once L's milliseconds have passed.
    os.write(w, frame(SPARES_LATER, b"400"))
    t0 = time.monotonic()
    loop.between_calls(SAID)
    ok(not st.spares, "L 400: no spare at first")
    ok(steps_until(loop, lambda: len(st.spares) == 1, 5.0), "L 400: the spare is forked without N")
    waited = time.monotonic() - t0
    ok(0.35 <= waited < 2.0, "L 400: after about 400 ms (%.0f ms)" % (waited * 1000))
    ok(st.turns.open and loop.later_until == 0, "L 400: and the gate opened again")
    clear(st)

    # A stale N (none waits) changes nothing; an L whose number is not one
    # holds for no time at all.
    os.write(w, frame(SPARES_NOW))
    loop.between_calls(SAID)
    ok(len(st.spares) == 1 and st.turns.open, "a stale N: the spare is forked as without it")
    clear(st)
    os.write(w, frame(SPARES_LATER, b"soon"))
    loop.between_calls(SAID)
    ok(steps_until(loop, lambda: len(st.spares) == 1, 1.0), "an L without a number holds nothing back")
    clear(st)

    # L while a call runs (the next request overtook it): ignored.
    st.foreground = object()
    loop.spares_word(SPARES_LATER, b"5000")
    ok(loop.later_until == 0, "an L while a call runs is stale: ignored")
    st.foreground = None

    # L after the fork (it came late): warm-ups stop until N.
    loop.between_calls(SAID)
    os.write(w, frame(SPARES_LATER, b"5000"))
    ok(steps_until(loop, lambda: not st.turns.open, 2.0) and len(st.spares) == 1,
       "a late L closes the gate for the spare already forked")
    os.write(w, frame(SPARES_NOW))
    ok(steps_until(loop, lambda: st.turns.open, 2.0) and len(st.spares) == 1, "and N opens it, with no second fork")
    clear(st)

    # N right after the answer (the supervisor's word when nothing waits):
    # with no spare left, a request sent on the answer would wait for a
    # fork anyway, so the fork waits no longer than the word; with a spare
    # left, the loop still waits SPARE_DELAY for such a request, which
    # that spare serves at once.  (A long delay, so that the two differ
    # whatever the machine's load.)
    executor_main.SPARE_DELAY = 3.0

    def between_calls_after(word):
        """The supervisor's word, then between_calls: how long it took."""
        os.write(w, frame(word, b"5000" if word == SPARES_LATER else b""))
        t0 = time.monotonic()
        loop.between_calls(SAID)
        return time.monotonic() - t0

    try:
        took = between_calls_after(SPARES_NOW)
        ok(len(st.spares) == 1 and took < 1.5,
           "N, no spare left: the next spare is forked at once (%.0f ms)" % (took * 1000))
        took = between_calls_after(SPARES_NOW)
        ok(len(st.spares) == 1 and took >= 2.9,
           "N, a spare left: the loop waits for a request sent on the answer (%.0f ms)" % (took * 1000))
        clear(st)
        # A persistent interpreter lives: its next cell takes no spare,
        # and would wait for the fork (its start kills the spare), so the
        # loop waits for a request sent on the answer, as before.
        st.interpreters["python"] = SimpleNamespace(alive=True)
        took = between_calls_after(SPARES_NOW)
        del st.interpreters["python"]
        ok(len(st.spares) == 1 and took >= 2.9,
           "N, no spare left, an interpreter alive: the loop waits for a request sent on the answer (%.0f ms)"
           % (took * 1000))
        clear(st)
        took = between_calls_after(SPARES_LATER)
        ok(not st.spares and loop.spare_due and took < 1.5,
           "L, no spare left: the loop goes on at once, the fork waits for N (%.0f ms)" % (took * 1000))
        os.write(w, frame(SPARES_NOW))
        ok(steps_until(loop, lambda: len(st.spares) == 1, 5.0), "and N forks it")
        clear(st)
    finally:
        executor_main.SPARE_DELAY = SPARE_DELAY

    # A request behind the L is pending: between_calls pairs, forks nothing.
    os.write(w, frame(SPARES_LATER, b"5000") + frame(b"R", b"{}"))
    ok(loop.pending(), "a request behind an L is pending")
    ok(loop.later_until > 0, "and the L before it was taken")
    done()


if __name__ == "__main__":
    main()
