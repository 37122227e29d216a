"""Spares: children forked ahead of the next call.  In gVisor a fork costs
15-80 ms of PID 1 (more with numpy loaded): forking right after a call
moves that cost out of the next call's way.  The set (State.spares) holds
a Python spare, which serves any call, and once the session ran
JavaScript a warm Node.js spare with that call's limits.

A session whose client sends a request as soon as it has the answer
(back to back) keeps a second Python spare for PAIR_SECONDS after such a
request: the first call of a burst takes one spare, the next finds the
other ready instead of waiting for a fork (PID 1 cannot fork while it
serves a call without holding up that call's answer).  A Python spare
stays alive while another one runs a call: it is root's, not dumpable,
waits on a pipe only PID 1 holds, and touches nothing of the workspace
before its own request, so the call cannot reach it (the Node.js spare
runs as the sandbox user: it never outlives a call that is not its
own).  A call still never sees an earlier call's process.

A Python spare says on its status pipe when it has warmed up (a `warm`
line, status.py): a call takes the newest warm one, or else the oldest,
which has warmed longest.  Spares warm up one at a time, and not while a
call runs (turns.py).

While the supervisor says other sessions' calls wait for busy cores or run
on them (an L frame after a call's answer, until N), no spare is forked and none warms
up (main.Loop.between_calls): their calls go before this session's bet on
its next one.
"""

import gc
import json
import os
import select
import signal
import time

from . import status
from .child import run_child
from .limits import base_env, close_other_fds
from .node_call import js_warm_key, js_warm_ok, start_node_spare
from .processes import exit_of, reap_leftovers
from .protocol import CHUNK, child_pipes
from .python_call import warm_up

PAIR_SECONDS = 120.0  # a second Python spare this long after a back-to-back request


class Spare:
    """A child waiting for its request on a pipe; everything else it does
    (becoming the sandbox user, limits, input files) happens once the
    request is there."""

    def __init__(self, st, js_template=None, warm=True):
        """js_template: a JavaScript call whose limits a warm Node.js spare
        takes (None: a Python child, which serves any call); warm: False
        for a child forked for a request already there (no warm_up)."""
        self.args = st.args
        self.st = st
        self.killed = False
        self.js_key = js_warm_key(js_template) if js_template is not None else None
        (req_r, out_w, err_w, st_w), (self.req_w, self.out_r, self.err_r, self.st_r) = child_pipes()
        self.pid = os.fork()
        if self.pid == 0:
            self.child(st, js_template, warm, req_r, out_w, err_w, st_w)  # does not return
        for fd in (req_r, out_w, err_w, st_w):
            os.close(fd)
        st.tracked.add(self.pid)

    def child(self, st, js_template, warm, req_r, out_w, err_w, st_w):
        """In the spare: wait for the request, then run it."""
        # Not a holder of the executor's frame pipes: if the executor
        # dies, the supervisor must see their end, and this spare its own.
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        os.close(devnull)
        # Nor of the other spares' ends: a spare that lives on beside
        # another one's call would hold its request pipe open (no EOF).
        for spare in st.spares + [self]:
            spare.close_ends()
        if js_template is not None:
            start_node_spare(st.args, js_template, req_r, out_w, err_w, st_w)  # does not return
        # Warming up takes the faults a call would take, ahead of it: not
        # when the request is there already (back-to-back calls), where
        # the call would wait for faults it may never need; it stops
        # between its steps when the request comes, and waits while a
        # call runs or another spare warms up (turns.py).
        # What it inherited from PID 1 (the frame pipes, the turns' pipes,
        # the cgroups' files) a warm spare closes while it waits, not once
        # the call is there: a call's start took 1.3-4.6 ms to close them
        # (limits.enter_call closes what is left).  A request that came
        # during the warm-up does not wait for it.
        if warm and warm_in_turn(st, req_r, st_w):
            close_other_fds(3, keep=(req_r, out_w, err_w, st_w))
        data = bytearray()
        while True:
            chunk = os.read(req_r, CHUNK)
            if not chunk:
                break
            data += chunk
        if not data:
            os._exit(0)
        run_child(st, json.loads(data), out_w, err_w, st_w)
        os._exit(127)

    def serves(self, req):
        """Whether this spare can run req."""
        return self.js_key is None or (js_warm_ok(self.args, req) and js_warm_key(req) == self.js_key)

    def warm(self):
        """Whether this Python spare said it has warmed up (its warm line is still in its
        status pipe: the call reads it first, and parse() passes over it)."""
        return bool(select.select([self.st_r], [], [], 0)[0])

    def alive(self):
        if self.pid not in self.st.tracked:
            return False
        return exit_of(self.st, self.pid) is None

    def kill(self):
        self.killed = True
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass

    def close_ends(self):
        """Close the executor's ends of its pipes."""
        for fd in (self.req_w, self.out_r, self.err_r, self.st_r):
            try:
                os.close(fd)
            except OSError:
                pass

    def discard(self):
        self.close_ends()
        self.kill()
        try:
            os.waitpid(self.pid, 0)
        except OSError:
            pass
        self.st.tracked.discard(self.pid)
        self.st.exited.pop(self.pid, None)

    def start(self, req, payload):
        """Hand the spare its request."""
        if self.js_key is not None:
            # The warm Node.js spare wants only the code and the environment.
            payload = json.dumps({"code": req.get("code") or "", "env": base_env(self.args, req)}).encode()
        view = memoryview(payload)
        try:
            while view:
                view = view[os.write(self.req_w, view):]
        finally:
            os.close(self.req_w)


def warm_in_turn(st, req_r, st_w):
    """In a spare: warm up when it is its turn, say so when it is done.
    Whether it did (False: its request came first)."""
    turns = st.turns

    def pending():
        return bool(select.select([req_r], [], [], 0)[0])

    def stop():
        """Between two steps: whether to stop (the request came); while a
        call runs, the token goes back and the spare waits."""
        if pending():
            return True
        if turns.gate_open():
            return False
        turns.give_back()
        return not turns.take(req_r, time.monotonic())

    try:
        if turns.take(req_r, time.monotonic()):
            warm_up(st, stop)
            if not pending():
                status.write(status.WARM, fd=st_w)
                return True
        return False
    finally:
        turns.give_back()


def take_spare(st, req, cgroup):
    """The spare for req, moved into the activity's cgroup before it has
    its request (so before it forks anything): the warm Node.js if it can
    serve req, else a Python child (which serves any call), else a Python
    child forked now.  The Node.js spare it does not take goes first;
    another Python spare stays (keeps_spares).  While a call runs, the
    sandbox holds PID 1, the call's processes, the activities that live
    on (runs, persistent interpreters) and those Python spares, nothing
    else."""
    reap_leftovers(st, {spare.pid for spare in st.spares})
    usable = [spare for spare in st.spares if spare.serves(req) and spare.alive()]
    # Of two warm Python spares the newest: one that waited while PID 1
    # forked the other took a paced call 4-7 ms longer on the dev stack.
    # Of spares still warming up, the oldest: it is furthest along (the
    # newest, forked after the last call, had barely begun when calls
    # came 0.25 s apart, and the call took its faults).
    python = [spare for spare in usable if spare.js_key is None]
    warm = [spare for spare in python if spare.warm()]
    first = warm[-1] if warm else (python[0] if python else None)
    chosen = next((spare for spare in usable if spare.js_key is not None), first)
    if chosen is not None:
        st.spares.remove(chosen)
    for spare in st.spares:
        if not (keeps_spares(st) and spare.js_key is None):
            spare.kill()  # reaped by drop_killed() once the call has its request
    chosen = chosen or Spare(st, warm=False)
    st.cgroups.move(cgroup, chosen.pid)
    return chosen


def keeps_spares(st):
    """Whether Python spares may live beside a call: only where the call's
    processes are told from them by their cgroup (PID 1 in gVisor; never
    in direct mode, where the call's end is its process group)."""
    return st.cgroups.ok


def drop_spares(st, which=lambda spare: True):
    """Kill and reap the spares `which` picks (every one by default)."""
    for spare in [spare for spare in st.spares if which(spare)]:
        st.spares.remove(spare)
        spare.discard()


def drop_killed(st):
    """Reap the spares take_spare() killed, and those that died."""
    drop_spares(st, lambda spare: spare.killed or not spare.alive())


def drop_python_spares(st):
    """The Python spares were forked before PID 1 imported more template
    modules: they go, the next ones have them."""
    drop_spares(st, lambda spare: spare.js_key is None)


def pair_spares(st):
    """A request came back to back: keep two Python spares for a while."""
    if keeps_spares(st):
        st.paired_until = time.monotonic() + PAIR_SECONDS


def prepare_spare(st, pending=lambda: False):
    """Fork the next call's spares: a Python child (two while the session
    calls back to back: pair_spares), and a warm Node.js (with the last
    JavaScript call's limits) once the session used it.  pending():
    whether a request has come, checked before each fork after the first
    (the request would wait for it)."""
    # Everything the executor holds goes to the garbage collector's
    # permanent generation: the call's collections then never walk (and
    # so never copy-on-write) the preloaded modules' objects, which in
    # gVisor costs tens of ms with numpy and pandas loaded.
    gc.freeze()
    drop_killed(st)  # (kill_all may have ended them)
    if not any(spare.js_key is None for spare in st.spares):
        st.turns.reissue()  # whatever a killed spare took along
    # (Not while a persistent interpreter lives: its next cell would kill
    # both unused, and a session of cells needs no spare at all.)
    paired = time.monotonic() < st.paired_until and not any(i.alive for i in st.interpreters.values())
    python = (2 if paired else 1) - sum(1 for spare in st.spares if spare.js_key is None)
    node = st.js_template is not None and all(spare.js_key is None for spare in st.spares)
    # The first Python spare, the Node.js one, then the second Python one.
    order = [None] * min(python, 1) + [st.js_template] * node + [None] * (python - 1)
    for i, template in enumerate(order):
        if i and pending():
            break
        try:
            st.spares.append(Spare(st, template))
        except OSError:
            pass
