"""A call in a fresh process, one activity among those the executor runs
at once (main.py): the call of an R frame (the foreground) or a
background run (a G frame).  Its request goes to a spare; its output is
forwarded as frames up to its output limit; a timeout, a cancel or the
child's end kills everything it started (processes.end_processes); then
its result is the D frame (d for a run).  It never blocks: main.py's
loop selects on its descriptors and calls poll().
"""

import json
import os
import signal
import time

from . import status
from .processes import end_processes, exit_of
from .protocol import DONE, RUN_DONE, RUN_STDERR, RUN_STDOUT, STDERR, STDOUT, Stream, write_frame
from .spare import drop_killed, take_spare

DRAIN_MS = 500  # output still read after the call's end


def timeout_of(req):
    return max(0.1, int(req.get("timeout_ms") or 60000) / 1000.0)


def output_kinds(tag):
    """The frame types (and payload prefix) of an activity's output: the
    foreground's O, E, D; run n's o, e, d with the byte n first."""
    if tag is None:
        return STDOUT, STDERR, DONE, b""
    return RUN_STDOUT, RUN_STDERR, RUN_DONE, bytes([tag])


def send_done(tag, res):
    """The activity's result frame."""
    _, _, kind, prefix = output_kinds(tag)
    write_frame(kind, json.dumps(res).encode(), prefix)


class Call:
    """One call's child: its pipes, its end, and its deadline."""

    def __init__(self, st, req, payload, tag=None, cgroup=None, keep=()):
        """tag: None for the foreground call, the run's number for a run;
        cgroup, keep: another activity's cgroup to run in, and the
        processes of it that this call's end spares (persistent.py)."""
        self.st = st
        self.req = req
        self.tag = tag
        self.cgroup = cgroup or ("call" if tag is None else "run-%d" % tag)
        self.keep = keep
        self.t0 = time.monotonic()
        self.deadline = self.t0 + timeout_of(req)
        self.limit = int(req.get("output_limit") or (1 << 20))
        self.finished = False
        st.cgroups.make(self.cgroup)
        spare = take_spare(st, req, self.cgroup)
        if req.get("language") == "javascript" and tag is None:
            st.js_template = req
        try:
            spare.start(req, payload)
        except OSError:
            pass  # it died: poll() sees that
        drop_killed(st)
        self.pid = spare.pid
        st.tracked.add(self.pid)
        out_kind, err_kind, _, prefix = output_kinds(tag)
        self.stdout = Stream(spare.out_r, out_kind, self.limit, prefix)
        self.stderr = Stream(spare.err_r, err_kind, self.limit, prefix)
        self.streams = {spare.out_r: self.stdout, spare.err_r: self.stderr}
        self.open_fds = set(self.streams)
        # Read without blocking: once the child says it is done, what its
        # pipes still hold is taken at once (drain), not at the loop's
        # next wakes.  (Meanwhile the child enters its call.)
        for fd in self.open_fds:
            os.set_blocking(fd, False)
        self.st_r = spare.st_r
        os.set_blocking(self.st_r, False)
        self.st_buf = bytearray()
        # A warm spare's warm line is in its status pipe already: read it
        # now rather than at a wake of the loop, which cost PID 1 1-3 ms
        # of a paced call (timed with temporary stamps on a dev stack).
        status.read(self.st_r, self.st_buf)
        self.status = None  # the child's wait status
        self.rusage = None
        self.reported = None  # (cpu_ms, max_rss_kb) from the child's done line
        self.timed_out = self.cancelled = self.processes_exceeded = False
        self.killed_at = None

    def fds(self):
        return list(self.open_fds) + ([self.st_r] if self.status is None else [])

    def spared(self):
        """The processes of its cgroup that its end spares."""
        return self.keep

    def over(self):
        """The call is over: nothing it started may outlive it."""
        end_processes(self.st, self, pgid=self.pid, keep=self.keep)
        self.killed_at = time.monotonic()

    def cancel(self):
        self.stop("cancelled")

    def cut(self):
        """The host-task guard stops it (its processes are the bomb)."""
        self.stop("processes_exceeded")

    def stop(self, why):
        """Stopped from outside (why: the result's flag that says so)."""
        if self.status is None and not getattr(self, why):
            setattr(self, why, True)
            end_processes(self.st, self, pgid=self.pid, keep=self.keep, stop=True)

    def check_end(self):
        """Whether the child said it is done, or has exited."""
        if self.status is None and self.reported is None:
            done = status.parse(self.st_buf).done
            if done is not None:
                # The child said it is done: its output is written; it may
                # still be exiting.
                self.status, self.reported = done[0] << 8, done[1:]
                self.over()
                self.drain()
        if self.status is None:
            end = exit_of(self.st, self.pid)
            if end is not None:
                self.status, self.rusage = end
                self.over()

    def wait_seconds(self, now):
        """How long the loop may sleep before this call needs looking at."""
        if self.status is not None:
            return 0.05
        return max(0.0, min(self.deadline - now, 1.0))

    def poll(self, now):
        """Advance: the child's end, the deadline, the drain.  True once
        the call is over and its pipes are drained (or DRAIN_MS passed)."""
        self.check_end()
        if self.status is not None and (not self.open_fds or now - self.killed_at > DRAIN_MS / 1000.0):
            return True
        if self.status is None and now >= self.deadline and not self.timed_out:
            self.timed_out = True
            end_processes(self.st, self, pgid=self.pid, keep=self.keep, stop=True)
        return False

    def drain(self):
        """What the pipes hold now, and their EOF: a Python child closes
        its ends before it says it is done (python_call.run_python), and
        the loop woke once for each of them after the output (2 wakes of
        1-2 ms each in PID 1).  An end still open elsewhere is read on."""
        for fd in list(self.open_fds):
            if not self.streams[fd].drain():
                self.open_fds.discard(fd)
                os.close(fd)

    def on_ready(self, fd):
        if fd == self.st_r:
            status.read(self.st_r, self.st_buf)
        elif fd in self.streams and not self.streams[fd].pump():
            self.open_fds.discard(fd)
            os.close(fd)

    def finish(self):
        """Close the pipes, read what the child said; the result (the D
        frame's JSON) and the child's Status."""
        for fd in self.open_fds:
            os.close(fd)
        self.open_fds = set()
        self.st.tracked.discard(self.pid)
        self.st.exited.pop(self.pid, None)
        status.read(self.st_r, self.st_buf)
        said = status.parse(self.st_buf)
        os.close(self.st_r)
        self.finished = True
        return result(self.st.args, self.req, self, said, self.t0, self.limit), said


def result(args, req, watch, said, t0, limit):
    """The D frame's JSON."""
    # Node.js reports its heap limit on stderr, then aborts: V8's heap
    # limit, or a Buffer beyond the address-space limit.
    tail = watch.stderr.tail
    v8_out_of_memory = req.get("language") == "javascript" and (b"heap out of memory" in tail or
                                                               b"Array buffer allocation failed" in tail)
    full = workspace_full(args.workdir)
    res = {
        "input_error": said.input_failed,
        "install_error": said.install_failed,
        "packages_missing": said.packages_missing,
        "workspace_full": full,
        "duration_ms": int((time.monotonic() - t0) * 1000),
        "timed_out": watch.timed_out,
        "cancelled": watch.cancelled,
        "processes_exceeded": watch.processes_exceeded,
        "memory_error": v8_out_of_memory or said.memory_error,
        "stdout_bytes": watch.stdout.total,
        "stderr_bytes": watch.stderr.total,
        "truncated": watch.stdout.total > limit or watch.stderr.total > limit,
    }
    res.update(exit_fields(req, watch))
    if watch.rusage is not None:
        res["cpu_ms"] = int((watch.rusage.ru_utime + watch.rusage.ru_stime) * 1000)
        res["max_rss_kb"] = watch.rusage.ru_maxrss
    elif watch.reported is not None:
        res["cpu_ms"], res["max_rss_kb"] = watch.reported
    return res


def exit_fields(req, watch):
    """exit_code, and for a signal the signal and whether RLIMIT_CPU sent it."""
    wstatus = watch.status
    if os.WIFEXITED(wstatus):
        return {"exit_code": os.WEXITSTATUS(wstatus)}
    if not os.WIFSIGNALED(wstatus):
        return {"exit_code": 255}
    sig = os.WTERMSIG(wstatus)
    # RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL at the hard one.
    cpu_limit = int(req.get("cpu_seconds") or 0)
    used = (watch.rusage.ru_utime + watch.rusage.ru_stime) if watch.rusage is not None else 0
    stopped = watch.timed_out or watch.cancelled or watch.processes_exceeded
    cpu_exceeded = sig == signal.SIGXCPU or (sig == signal.SIGKILL and not stopped and cpu_limit > 0
                                             and used >= cpu_limit - 0.1)
    return {"exit_code": 128 + sig, "signal": sig, "cpu_exceeded": cpu_exceeded}


def workspace_full(workdir):
    """Less than 2% of the workspace left (or no inode): the next write
    will likely fail."""
    try:
        vfs = os.statvfs(workdir)
    except OSError:
        return False
    return vfs.f_bavail * 50 < vfs.f_blocks or vfs.f_favail == 0
