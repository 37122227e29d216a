"""The executor's main loop: start up (preload, the first spares, the Y
frame), then serve the frames of fd 0 as they come, with several
activities at once: the call of the R frame (the foreground: one at a
time, accepted with A, answered with D), background runs (G frames,
answered with d when they end, ended early by C) and the persistent
interpreters between their cells.  Between foreground calls it imports
what the last one learned and forks the next spares, later when the
supervisor says other sessions' calls wait or run on busy cores (L, then
N).  A wake frame
(W) comes after the sandbox was restored from its checkpoint, H before
the checkpoint (restore.py).
"""

import json
import os
import select
import signal
import socket
import sys
import time

from .call import Call, send_done
from .limits import set_dumpable
from .persistent import Interpreter, Cell
from .processes import clear_scratch, reap, sweep
from .protocol import (ACCEPTED, CANCEL, DONE, HIBERNATE, PROCESSES, REQUEST, RUN_CANCEL, RUN_DONE, RUN_START,
                       SPARES_LATER, SPARES_NOW, WAKE, FrameReader, write_frame, write_ready)
from .restore import before_checkpoint, wake
from .spare import drop_killed, drop_python_spares, drop_spares, pair_spares, prepare_spare
from .state import Args, State

SPARE_DELAY = 0.05  # seconds between a call's answer and the next spare's fork
LATER_MAX = 10.0  # seconds an L frame may hold the spares at most, whatever it says
SPARES_WORDS = (SPARES_LATER, SPARES_NOW)  # the supervisor's word on the spares


def main():
    st = State(Args(sys.argv[1:]))
    if not st.args.direct:
        set_dumpable(False)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    wake_r, wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    import_modules(st, st.args.preload)
    prepare_spare(st)
    write_ready(st.preloaded)
    Loop(st, FrameReader(0), wake_r).serve()


def with_relay(st, req, payload):
    """A call with egress: the relay listens, and the request (the
    payload the spare gets) says on which port."""
    egress = req.get("egress")
    if not isinstance(egress, dict) or st.args.direct:
        req.pop("egress", None)
        return payload
    port = st.relay.ensure()
    if not port:
        req.pop("egress", None)
    else:
        egress["port"] = port
    return json.dumps(req).encode()


class Loop:
    """The frames of fd 0 and every activity's descriptors, in one select."""

    def __init__(self, st, reader, wake_r):
        self.st = st
        self.reader = reader
        self.wake_r = wake_r
        self.lost = set()  # languages whose interpreter died between two calls
        self.later_until = 0.0  # the spares wait for N until then (L; 0: they do not wait)
        self.spare_due = False  # the last call's spares are not forked yet (they waited)
        self.answered_at = float("-inf")  # monotonic time of the last call's answer

    def serve(self):
        while True:
            self.frames()
            self.step()

    # ---- frames ----

    def frames(self):
        """Every whole frame buffered so far."""
        while True:
            frame = self.reader.next()
            if frame is None:
                return
            kind, payload = frame
            if kind in SPARES_WORDS:
                self.spares_word(kind, payload)
            elif kind == REQUEST and self.st.foreground is None:
                self.start(payload, None)
            elif kind == CANCEL and self.st.foreground is not None:
                self.st.foreground.cancel()
            elif kind == RUN_START:
                self.start(payload, "run")
            elif kind == RUN_CANCEL and payload and payload[0] in self.st.runs:
                self.st.runs[payload[0]].cancel()
            elif kind == PROCESSES:
                self.cut()
            elif kind == WAKE:
                self.spares_now(fork=False)  # wake() forks them
                wake(self.st, payload)
            elif kind == HIBERNATE:
                self.spares_now(fork=False)  # none now, and new ones after the wake
                before_checkpoint(self.st)

    def cut(self):
        """The supervisor's host-task guard (sandbox/supervisor.c): the
        sandbox's host tasks near their backstop, which a fork bomb's
        failed forks keep growing.  The call or run with the most
        processes is stopped (its result says processes_exceeded)."""
        acts = [act for _, act in self.activities() if not act.finished]
        if not acts:
            return
        if self.st.cgroups.ok:
            acts.sort(key=lambda act: len(self.st.cgroups.members(act.cgroup)), reverse=True)
        acts[0].cut()

    def refuse(self, tag, why):
        res = {"exit_code": 126, "refused": why, "duration_ms": 0}
        if tag is None:
            write_frame(DONE, json.dumps(res).encode())
        else:
            write_frame(RUN_DONE, json.dumps(res).encode(), bytes([tag]))

    def start(self, payload, kind):
        """Start the activity of an R frame (kind None) or a G frame."""
        try:
            req = json.loads(payload)
        except ValueError:
            req = None
        tag = None
        if kind == "run":
            tag = req.get("run") if isinstance(req, dict) else None
            if not isinstance(tag, int) or not 1 <= tag <= 255 or tag in self.st.runs:
                return
        if not isinstance(req, dict):
            write_frame(DONE, json.dumps({"exit_code": 126, "error": "bad request"}).encode())
            return
        if tag is None:
            # From here on a lost sandbox is the call's doing (or its fate);
            # before it, the supervisor may hand the call to a new sandbox.
            write_frame(ACCEPTED, b"")
            self.st.turns.close_gate()  # spares warming up wait (turns.py)
            # The call takes a spare, or forks its own: what waited is due
            # no more, and what its end says decides the next ones.
            self.later_until = 0.0
            self.spare_due = False
            if time.monotonic() - self.answered_at < SPARE_DELAY:
                pair_spares(self.st)  # back to back, though the next spare's fork came first
            payload = with_relay(self.st, req, payload)
        else:
            req.pop("egress", None)
        try:
            act = self.activity(req, payload, tag)
        except OSError:
            act = None
            self.refuse(tag, "start-failed")
        except Refused as e:
            act = None
            self.refuse(tag, str(e))
        if act is None:
            if tag is None:
                self.st.turns.open_gate()
            return
        if tag is None:
            self.st.foreground = act
        else:
            self.st.runs[tag] = act

    def activity(self, req, payload, tag):
        """A fresh call, or a cell of the language's interpreter."""
        lang = "javascript" if req.get("language") == "javascript" else "python"
        interp = self.interpreter(lang)
        if req.get("reset"):
            if interp is not None and interp.busy is not None:
                raise Refused("interpreter-busy")
            if interp is not None:
                interp.kill()
                del self.st.interpreters[lang]
                interp = None
            self.lost.discard(lang)  # its end was asked for: no state is lost
        if not req.get("persistent"):
            return Call(self.st, req, payload, tag)
        if interp is not None and interp.busy is not None:
            raise Refused("interpreter-busy")
        # interpreter_lost: the supervisor knows it died with an earlier sandbox.
        lost = lang in self.lost or (bool(req.get("interpreter_lost")) and not req.get("reset"))
        self.lost.discard(lang)
        if interp is None:
            interp = self.st.interpreters[lang] = Interpreter(self.st, req)
        # A persistent cell holds the sandbox as a call does: no spare beside it.
        drop_spares(self.st)
        return Cell(self.st, req, payload, tag, interp, state_lost=lost)

    def interpreter(self, lang):
        """The language's live interpreter, or None (one that died between
        calls is noted: the next persistent call's state is lost)."""
        interp = self.st.interpreters.get(lang)
        if interp is not None and interp.busy is None and not interp.check():
            del self.st.interpreters[lang]
            self.lost.add(lang)
            interp = None
        return interp

    # ---- the activities ----

    def activities(self):
        acts = [(None, self.st.foreground)] if self.st.foreground is not None else []
        return acts + list(self.st.runs.items())

    def step(self):
        """One select over fd 0, the wake-up pipe, every activity's
        descriptors and the egress relay; then each activity moves on."""
        st = self.st
        now = time.monotonic()
        acts = self.activities()
        # Idle (nothing runs): sleep until a frame or a signal comes, or
        # until the spares wait no more.
        timeout = min([act.wait_seconds(now) for _, act in acts] + [1.0]) if acts else None
        if self.later_until > 0:
            timeout = max(0.0, min(timeout if timeout is not None else 1.0, self.later_until - now))
        owner = {}
        for tag, act in acts:
            for fd in act.fds():
                owner[fd] = act
        relay_r, relay_w = st.relay.select_sets() if st.foreground is not None else ([], [])
        try:
            ready, writable, _ = select.select(list(owner) + [self.wake_r, 0] + relay_r, relay_w, [], timeout)
        except InterruptedError:
            ready, writable = [], []
        socks = [s for s in ready if isinstance(s, socket.socket)]
        if socks or writable:
            st.relay.on_ready(socks, writable)
        for fd in ready:
            if isinstance(fd, socket.socket):
                continue
            if fd == self.wake_r:
                drain(self.wake_r)
            elif fd == 0:
                if not self.reader.fill():
                    self.quit()
            elif fd in owner:
                owner[fd].on_ready(fd)
        reap(st)
        now = time.monotonic()
        for tag, act in acts:
            if act.poll(now):
                self.finish(tag, act)
        for lang in list(st.interpreters):
            self.interpreter(lang)
        if self.later_until > 0 and time.monotonic() >= self.later_until:
            self.spares_now()  # no N came in time

    def finish(self, tag, act):
        """An activity is over: its result frame, then (the foreground's)
        what comes between calls."""
        st = self.st
        res, said = act.finish()
        for lang, interp in list(st.interpreters.items()):
            if not interp.alive and interp.busy is None:
                del st.interpreters[lang]  # its loss is in this result
        # The languages whose interpreter lives on: the supervisor tells the
        # next persistent call of a language whose interpreter died with
        # the sandbox that its state is lost (interpreter_lost).
        res["interpreters"] = sorted(lang for lang, i in st.interpreters.items() if i.alive)
        if tag is None:
            st.relay.end_call()
            st.foreground = None
        else:
            del st.runs[tag]
        send_done(tag, res)
        if tag is None:
            self.answered_at = time.monotonic()
            st.turns.open_gate()  # the spares warm up again, one at a time
        if any(getattr(act, why, False) for why in ("timed_out", "cancelled", "processes_exceeded")):
            drop_spares(st)  # a stopped call may have taken them with it (kill_round)
        else:
            drop_killed(st)
        # What it started is killed; once it has answered, make sure none of
        # it is left (a fork bomb outruns one kill), before the next spare.
        sweep(st, act)
        if tag is None:
            self.between_calls(said)

    def between_calls(self, said):
        st = self.st
        quiet = not st.runs and not any(i.alive for i in st.interpreters.values())
        if said.packages_changed and st.preloaded and quiet:
            # A preloaded template module could shadow what was just
            # installed: start over as a fresh interpreter (still PID 1),
            # with the same command line (python3 -I -B <folder> ...).
            clear_scratch(st.args)
            os.execv(sys.executable, sys.orig_argv)
        if import_modules(st, [name for name in said.learned if name in st.args.learn]):
            drop_python_spares(st)  # forked without them
        # The next call's child is forked once this call's answer has gone
        # on: a fork keeps gVisor busy for 15-80 ms, and on a small machine
        # that delays the answer on its way out.  The supervisor says so
        # (N), or says L before the answer when other sessions' calls wait
        # for the CPU or run on busy cores: then the fork and the warm-up
        # wait until none does (N), as they are this session's bet on its
        # next call and theirs are calls already made
        # (tests/bench/FINDINGS.md, "Bursts").  With a spare left, or a
        # persistent interpreter or a run alive (not quiet), the fork
        # waits SPARE_DELAY too: a request sent on the answer (back to
        # back) is then served at once, by that spare or by the cell's
        # interpreter, rather than after the fork.  With no spare left it
        # would wait for a fork anyway, and with numpy and pandas loaded
        # the 50 ms were a fifth of the pause between paced calls in which
        # the fork and the warm-up must fit (tests/bench/FINDINGS.md, "The
        # next spare sooner").
        if self.pending(SPARE_DELAY, word=not st.spares and quiet):
            pair_spares(st)
        elif self.later_until > 0:
            self.spare_due = True
        else:
            self.fork_spares()
        # /tmp and /dev/shm do not persist: emptied before the next request
        # is read, after the spare's fork (which the next call waits for
        # more often than for this), unless a run or an interpreter (whose
        # files they may be) lives on.
        if quiet:
            clear_scratch(st.args)

    def fork_spares(self):
        # After the imports: the spares have them too.  A request, or an L,
        # between two forks stops the second.
        prepare_spare(self.st, lambda: self.pending() or self.later_until > 0)
        if self.pending():
            pair_spares(self.st)  # it came while the spare was forked: as good as back to back

    # ---- the supervisor's word on the spares (L, N) ----

    def spares_word(self, kind, payload):
        """L (the spares wait, for at most its milliseconds) or N."""
        if kind == SPARES_NOW:
            self.spares_now()
        elif self.st.foreground is None:  # (an L the next request overtook is stale)
            try:
                ms = int(payload)
            except ValueError:
                ms = 0
            self.later_until = time.monotonic() + min(max(ms, 0) / 1000, LATER_MAX)
            self.st.turns.close_gate()  # spares forked earlier stop warming up too

    def spares_now(self, fork=True):
        """The spares wait no more: warm-ups go on, and the fork that waited
        (if any, and fork) happens now."""
        self.later_until = 0.0
        if self.st.foreground is not None:
            return
        self.st.turns.open_gate()
        due, self.spare_due = self.spare_due, False
        if due and fork:
            self.fork_spares()

    def pending(self, timeout=0, word=False):
        """Whether a frame other than L or N (taken here) waits on fd 0, or
        comes within timeout seconds (with word: before the supervisor's
        word on the spares, if that comes first)."""
        end = time.monotonic() + timeout
        while True:
            heard = False
            while self.reader.buf[:1] in SPARES_WORDS:
                frame = self.reader.next()
                if frame is None:
                    break  # the rest of it is on its way
                self.spares_word(*frame)
                heard = True
            if self.reader.buf and self.reader.buf[:1] not in SPARES_WORDS:
                return True
            if heard and word:
                return False
            left = end - time.monotonic()
            if not select.select([0], [], [], max(left, 0))[0]:
                return False
            if not self.reader.fill():
                self.quit()

    def quit(self):
        """The supervisor is gone: so is everything here."""
        for _, act in self.activities():
            act.cancel()
        for interp in self.st.interpreters.values():
            interp.kill()
        os._exit(0)


class Refused(Exception):
    """A call the executor will not start (its word for it: the host says why)."""


def drain(fd):
    try:
        os.read(fd, 4096)
    except OSError:
        pass


def import_modules(st, names):
    """Import template modules into this process (the spares and the calls
    they become have them loaded), and remember which it has.  Whether it
    imported any."""
    before = len(st.preloaded)
    for name in names:
        if name not in st.preloaded:
            try:
                __import__(name)
                st.preloaded.add(name)
            except Exception:
                pass
    return len(st.preloaded) > before
