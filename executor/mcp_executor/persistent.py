"""Persistent interpreters: one per language and sandbox, started by the
first call with `persistent`, as the sandbox user with the call limits,
in a cgroup of its own; its cells (Cell) run one after the other in it,
and its globals, imports and objects live on between them.

Limits: the address space (memory_limit) and the processes are the
interpreter's for its whole life; RLIMIT_CPU holds its CPU time over its
whole life (persistent_cpu_seconds: SIGXCPU ends it), and each cell may
use cpu_seconds of it (checked here about once a second).  The wall
clock of a cell first interrupts it (SIGINT: KeyboardInterrupt in
Python, the JavaScript interpreter's own handling, repl.mjs); an
interpreter that has not come back within the grace is killed.  Killed,
dead, or out of memory (a MemoryError, V8's heap): the interpreter ends,
and the result says the state was lost (state_lost); the next persistent
call starts a new one.  Processes a cell starts are killed when it ends,
and the interpreter is spared (processes.end_processes with keep).

A cell with input files or packages first runs a fresh child that writes
and installs them (as a fresh call would, in the interpreter's cgroup),
then the cell.
"""

import json
import os
import signal
import struct
import time

from . import status
from .call import Call, output_kinds, timeout_of, workspace_full
from .limits import base_env
from .node_call import start_node_interpreter
from .processes import end_processes, exit_of, kill_new
from .protocol import Stream, child_pipes

GRACE_MS = 2000  # an interrupted cell has this long to come back (the request may say otherwise)
VALUE_MAX = 65536  # bytes of a cell's value returned
HEADER = struct.Struct(">I")
CLOCK_TICK = os.sysconf("SC_CLK_TCK")


class Interpreter:
    """The executor's side of one persistent interpreter."""

    def __init__(self, st, req):
        self.st = st
        self.lang = "javascript" if req.get("language") == "javascript" else "python"
        self.cgroup = "persistent-" + self.lang
        self.busy = None  # the Cell it runs
        self.cells = 0
        self.alive = True
        self.finished = False
        st.cgroups.make(self.cgroup)
        # The call's limits, the CPU time for the whole life.
        life = int(req.get("persistent_cpu_seconds") or 0) or int(req.get("cpu_seconds") or 0)
        limits = dict(req, cpu_seconds=life, env={})
        (req_r, out_w, err_w, st_w), (self.req_w, self.out_r, self.err_r, self.st_r) = child_pipes()
        self.pid = os.fork()
        if self.pid == 0:
            self.child(limits, req_r, out_w, err_w, st_w)  # does not return
        for fd in (req_r, out_w, err_w, st_w):
            os.close(fd)
        st.tracked.add(self.pid)
        st.cgroups.move(self.cgroup, self.pid)  # before any cell: it has forked nothing
        for fd in (self.out_r, self.err_r, self.st_r):
            os.set_blocking(fd, False)

    def child(self, limits, req_r, out_w, err_w, st_w):
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        for fd in (self.req_w, self.out_r, self.err_r, self.st_r, devnull):
            os.close(fd)
        try:
            if self.lang == "javascript":
                start_node_interpreter(self.st.args, limits, req_r, out_w, err_w, st_w)  # does not return
            from .limits import enter_call
            from .repl import serve

            enter_call(self.st.args, limits, out_w, err_w, st_w, request_fd=req_r)
            os.set_inheritable(4, False)
            serve(self.st, 4)
        finally:
            os._exit(127)

    def send(self, req):
        """Hand the interpreter a cell; False when it is gone."""
        data = json.dumps(req).encode()
        view = memoryview(HEADER.pack(len(data)) + data)
        try:
            while view:
                view = view[os.write(self.req_w, view):]
        except OSError:
            return False
        return True

    def discard(self):
        """Drop what it wrote while no cell ran (a thread, a timer)."""
        for fd in (self.out_r, self.err_r, self.st_r):
            while True:
                try:
                    if not os.read(fd, 65536):
                        break
                except OSError:
                    break

    def cpu_seconds(self):
        """Its CPU time so far (its own and its reaped children's)."""
        try:
            with open("/proc/%d/stat" % self.pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return sum(int(x) for x in fields[11:15]) / CLOCK_TICK
        except (OSError, ValueError, IndexError):
            return 0.0

    def check(self):
        """Whether it still lives (its end is then reaped)."""
        if self.alive and exit_of(self.st, self.pid) is not None:
            self.close()
        return self.alive

    def kill(self, reaped=False):
        """End it and everything in its cgroup (reaped: it has ended), without
        waiting for gVisor to tear its processes down (sweep() does, once
        the result is out): this may come at the end of a cell's grace,
        with the supervisor's deadline near."""
        if self.alive:
            end_processes(self.st, self, pgid=self.pid, keep=(), stop=True)
            end = True if reaped else None
            deadline = time.monotonic() + 1.0
            while end is None and time.monotonic() < deadline:
                end = exit_of(self.st, self.pid)
                if end is None:
                    time.sleep(0.005)
            self.close()

    def close(self):
        self.alive = False
        self.st.tracked.discard(self.pid)
        self.st.exited.pop(self.pid, None)
        for fd in (self.req_w, self.out_r, self.err_r, self.st_r):
            try:
                os.close(fd)
            except OSError:
                pass


def needs_prep(req):
    return bool(req.get("files") or req.get("packages") or req.get("npm_stage"))


class Cell:
    """One persistent call: a cell of the language's interpreter, an
    activity as call.Call is (the foreground call, or a run)."""

    def __init__(self, st, req, payload, tag, interp, state_lost=False):
        self.st = st
        self.req = req
        self.tag = tag
        self.interp = interp
        self.cgroup = interp.cgroup
        self.t0 = time.monotonic()
        self.deadline = self.t0 + timeout_of(req)
        self.grace = int(req.get("interrupt_grace_ms") or GRACE_MS) / 1000.0
        self.cpu_limit = int(req.get("cpu_seconds") or 0)
        self.limit = int(req.get("output_limit") or (1 << 20))
        self.finished = False
        self.state_lost = state_lost  # the interpreter before this one died between calls
        self.timed_out = self.cancelled = self.cpu_exceeded = self.processes_exceeded = False
        self.interrupted_at = None
        self.killed = set()  # its processes signalled since it was stopped
        self.said = status.Status()
        self.st_buf = bytearray()
        self.died = None  # (wait status, rusage) when the interpreter ended during the cell
        self.prep_res = {}
        out_kind, err_kind, _, prefix = output_kinds(tag)
        self.stdout = Stream(interp.out_r, out_kind, self.limit, prefix)
        self.stderr = Stream(interp.err_r, err_kind, self.limit, prefix)
        interp.busy = self
        self.prep = None
        if needs_prep(req):
            prep = dict(req, prepare_only=True, code="")
            self.prep = Call(st, prep, json.dumps(prep).encode(), tag, cgroup=interp.cgroup, keep=(interp.pid,))
        else:
            self.start_cell()

    def spared(self):
        """The processes of its cgroup that its end spares: the interpreter."""
        return (self.interp.pid,) if self.interp.alive else ()

    def start_cell(self):
        # What an earlier cell left may still be torn down: no cell sees it.
        end_processes(self.st, self, keep=(self.interp.pid,))
        self.interp.cells += 1
        self.cpu0 = self.interp.cpu_seconds()
        self.interp.discard()
        cell = {"code": self.req.get("code") or "", "env": base_env(self.st.args, self.req), "cell": self.interp.cells,
                "value_max": VALUE_MAX}
        if not self.interp.send(cell):
            self.lose(signal.SIGKILL)

    def fds(self):
        if self.prep is not None:
            return self.prep.fds()
        if self.done():
            return []
        return [self.interp.out_r, self.interp.err_r, self.interp.st_r]

    def on_ready(self, fd):
        if self.prep is not None:
            self.prep.on_ready(fd)
        elif fd == self.interp.st_r:
            status.read(self.interp.st_r, self.st_buf)
        elif fd == self.interp.out_r:
            self.stdout.drain()
        elif fd == self.interp.err_r:
            self.stderr.drain()

    def done(self):
        return self.died is not None or self.said.done is not None

    def wait_seconds(self, now):
        if self.prep is not None:
            return self.prep.wait_seconds(now)
        if self.interrupted_at is not None:
            return 0.05  # its processes are killed pass after pass (poll)
        return max(0.0, min(self.deadline - now, 1.0))

    def cancel(self):
        self.stop("cancelled", Call.cancel)

    def cut(self):
        """The host-task guard stops it: its processes are the bomb."""
        self.stop("processes_exceeded", Call.cut)

    def stop(self, why, prep_stop):
        """Stopped from outside (why: the result's flag): the preparing
        child, or the cell (interrupted)."""
        if self.prep is not None:
            prep_stop(self.prep)
        elif not self.done() and not getattr(self, why):
            setattr(self, why, True)
            self.interrupt()

    def interrupt(self):
        """The cell is stopped (its wall clock, a cancel, the guard): the
        interpreter is interrupted, and what the cell started is killed
        now, not when the interpreter comes back (a fork bomb must not
        refill itself during the grace)."""
        if self.interrupted_at is None:
            self.interrupted_at = time.monotonic()
            try:
                os.kill(self.interp.pid, signal.SIGINT)
            except OSError:
                pass
            kill_new(self.st, self, (self.interp.pid,), self.killed)

    def take_output(self):
        """What the interpreter has written so far (output and status
        lines), read before its pipes close: after its end the pipes
        still hold what it wrote last (a MemoryError's traceback before
        its exit)."""
        self.stdout.drain()
        self.stderr.drain()
        status.read(self.interp.st_r, self.st_buf)

    def lose(self, wstatus=None):
        """The interpreter is killed (or is gone) during the cell."""
        self.take_output()
        self.interp.kill()
        self.state_lost = True
        if self.died is None:
            self.died = (wstatus if wstatus is not None else signal.SIGKILL, None)

    def poll_prep(self, now):
        if not self.prep.poll(now):
            return False
        res, said = self.prep.finish()
        self.prep = None
        failed = said.install_failed or said.input_failed or said.packages_missing or res.get("exit_code")
        if failed or res.get("timed_out") or res.get("cancelled") or res.get("processes_exceeded"):
            self.prep_res = res
            return True
        self.prep_res = {k: v for k, v in res.items() if k in ("stdout_bytes", "stderr_bytes")}
        self.start_cell()
        return False

    def poll(self, now):
        """Advance the cell; True once it is over."""
        if self.prep is not None:
            return self.poll_prep(now)
        if self.died is None:
            end = exit_of(self.st, self.interp.pid)
            if end is not None:
                self.died = end
                self.state_lost = True
                self.take_output()
                self.interp.kill(reaped=True)
        if self.died is not None:
            return True
        self.said = status.parse(self.st_buf)
        if self.said.done is not None:
            self.stdout.drain()
            self.stderr.drain()
            # The cell's own processes end with it; the interpreter lives on,
            # unless the cell ran out of memory.
            end_processes(self.st, self, keep=(self.interp.pid,), seen=self.killed)
            if self.said.memory_error or self.v8_out_of_memory():
                self.state_lost = True
                self.interp.kill()
            return True
        if now >= self.deadline and self.interrupted_at is None:
            self.timed_out = True
            self.interrupt()
        if self.interrupted_at is not None and now >= self.interrupted_at + self.grace:
            self.lose()
            return True
        if self.interrupted_at is not None:
            kill_new(self.st, self, (self.interp.pid,), self.killed)
        if self.cpu_limit > 0 and self.interp.cpu_seconds() - self.cpu0 > self.cpu_limit:
            self.cpu_exceeded = True
            self.lose(signal.SIGXCPU)
            return True
        return False

    def v8_out_of_memory(self):
        tail = self.stderr.tail
        return self.interp.lang == "javascript" and (b"heap out of memory" in tail or
                                                     b"Array buffer allocation failed" in tail)

    def finish(self):
        """The result (the D frame's JSON) and what the cell said."""
        self.finished = True
        self.interp.busy = None
        self.said = status.parse(self.st_buf)
        if self.prep_res.get("exit_code") is not None:
            res = dict(self.prep_res, persistent=True, state_lost=self.state_lost)
            return res, self.said
        res = {
            "duration_ms": int((time.monotonic() - self.t0) * 1000),
            "timed_out": self.timed_out,
            "cancelled": self.cancelled,
            "processes_exceeded": self.processes_exceeded,
            "memory_error": self.said.memory_error or self.v8_out_of_memory(),
            "cpu_exceeded": self.cpu_exceeded,
            "stdout_bytes": self.stdout.total + int(self.prep_res.get("stdout_bytes") or 0),
            "stderr_bytes": self.stderr.total + int(self.prep_res.get("stderr_bytes") or 0),
            "truncated": self.stdout.total > self.limit or self.stderr.total > self.limit,
            "workspace_full": workspace_full(self.st.args.workdir),
            "persistent": True,
            "state_lost": self.state_lost,
        }
        res.update(self.exit_fields())
        if self.said.value is not None and self.died is None:
            res["value"] = self.said.value.decode("utf-8", "replace")
        return res, self.said

    def exit_fields(self):
        if self.died is None:
            code, cpu_ms, rss = self.said.done
            return {"exit_code": code, "cpu_ms": cpu_ms, "max_rss_kb": rss}
        wstatus, ru = self.died
        fields = {}
        if ru is not None:
            fields = {"cpu_ms": int((ru.ru_utime + ru.ru_stime) * 1000), "max_rss_kb": ru.ru_maxrss}
        if os.WIFEXITED(wstatus):
            fields["exit_code"] = os.WEXITSTATUS(wstatus)
        elif os.WIFSIGNALED(wstatus):
            sig = os.WTERMSIG(wstatus)
            fields.update(exit_code=128 + sig, signal=sig)
            self.cpu_exceeded = self.cpu_exceeded or sig == signal.SIGXCPU
            fields["cpu_exceeded"] = self.cpu_exceeded
        else:
            fields["exit_code"] = 255
        return fields
