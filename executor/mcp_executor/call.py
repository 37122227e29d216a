"""One call in flight: its request goes to a spare; its output is forwarded
as O and E frames up to the output limit; a timeout, a cancel (K) or the
child's end kills everything the call started; then the result goes to the
supervisor as the D frame.
"""

import json
import os
import select
import signal
import socket
import time

from . import status
from .processes import kill_everything, reap_others
from .protocol import CANCEL, DONE, STDERR, STDOUT, Stream, write_frame
from .spare import drop_spares, take_spare

DRAIN_MS = 500  # output still read after the call's end


def run_call(st, req, payload, reader, wake_r):
    """Run req (payload: its frame) to its end and send its D frame.
    Returns the child's Status (learned modules, changed packages)."""
    t0 = time.monotonic()
    timeout = max(0.1, int(req.get("timeout_ms") or 60000) / 1000.0)
    limit = int(req.get("output_limit") or (1 << 20))
    payload = with_relay(st, req, payload)
    spare = take_spare(st, req)
    if req.get("language") == "javascript":
        st.js_template = req
    try:
        spare.start(req, payload)
    except OSError:
        pass  # it died: the wait below sees that
    drop_spares(st)
    watch = Watch(st.args, spare, limit, reader, wake_r, st.relay)
    watch.wait(t0 + timeout)
    said = watch.finish()
    write_frame(DONE, json.dumps(result(st.args, req, watch, said, t0, limit)).encode())
    return said


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


class Watch:
    """The executor's side of a running call: the child's pipes, its end,
    and the frames that come meanwhile."""

    def __init__(self, args, spare, limit, reader, wake_r, relay):
        self.args = args
        self.relay = relay
        self.pid = spare.pid
        self.reader = reader
        self.wake_r = wake_r
        self.stdout = Stream(spare.out_r, STDOUT, limit)
        self.stderr = Stream(spare.err_r, STDERR, limit)
        self.streams = {spare.out_r: self.stdout, spare.err_r: self.stderr}
        self.open_fds = set(self.streams)
        self.st_r = spare.st_r
        os.set_blocking(self.st_r, False)
        self.st_buf = bytearray()
        self.status = None  # the child's wait status
        self.rusage = None
        self.reported = None  # (cpu_ms, max_rss_kb) from the child's done line
        self.timed_out = self.cancelled = False
        self.killed_at = None

    def over(self):
        """The call is over: nothing it started may outlive it."""
        kill_everything(self.args, self.pid)
        self.killed_at = time.monotonic()

    def check_end(self):
        """Whether the child said it is done, or has exited."""
        if self.status is None and self.reported is None:
            done = status.parse(self.st_buf).done
            if done is not None:
                # The child said it is done: its output is written; it may
                # still be exiting.
                self.status, self.reported = done[0] << 8, done[1:]
                self.over()
        if self.status is None:
            try:
                p, wstatus, ru = os.wait4(self.pid, os.WNOHANG)
            except ChildProcessError:
                p, wstatus, ru = self.pid, 0, None
            if p == self.pid:
                self.status, self.rusage = wstatus, ru
                self.over()

    def wait(self, deadline):
        """Forward output until the call is over and its pipes are drained
        (or DRAIN_MS have passed since); kill it at the deadline."""
        while True:
            self.check_end()
            now = time.monotonic()
            if self.status is not None and (not self.open_fds or now - self.killed_at > DRAIN_MS / 1000.0):
                return
            if self.status is None and now >= deadline and not self.timed_out:
                self.timed_out = True
                kill_everything(self.args, self.pid)
            wait = 0.05 if self.status is not None else max(0.0, min(deadline - now, 1.0))
            fds = list(self.open_fds) + [self.wake_r, 0] + ([self.st_r] if self.status is None else [])
            relay_r, relay_w = self.relay.select_sets()
            try:
                ready, writable, _ = select.select(fds + relay_r, relay_w, [], wait)
            except InterruptedError:
                continue
            socks = [s for s in ready if isinstance(s, socket.socket)]
            if socks or writable:
                self.relay.on_ready(socks, writable)
            for fd in ready:
                if not isinstance(fd, socket.socket):
                    self.on_ready(fd)

    def on_ready(self, fd):
        if fd == self.wake_r:
            try:
                os.read(self.wake_r, 4096)
            except OSError:
                pass
        elif fd == self.st_r:
            status.read(self.st_r, self.st_buf)
        elif fd == 0:
            self.on_frames()
        elif not self.streams[fd].pump():
            self.open_fds.discard(fd)
            os.close(fd)

    def on_frames(self):
        """Frames from the supervisor while the call runs: K cancels it."""
        if not self.reader.fill():
            kill_everything(self.args, self.pid)
            os._exit(0)
        while True:
            frame = self.reader.next()
            if frame is None:
                return
            if frame[0] == CANCEL and self.status is None:
                self.cancelled = True
                kill_everything(self.args, self.pid)

    def finish(self):
        """Close the pipes, reap, and read what the child said."""
        for fd in self.open_fds:
            os.close(fd)
        self.relay.end_call()
        reap_others()
        status.read(self.st_r, self.st_buf)
        said = status.parse(self.st_buf)
        os.close(self.st_r)
        return said


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
    cpu_exceeded = sig == signal.SIGXCPU or (sig == signal.SIGKILL and not watch.timed_out and not watch.cancelled
                                             and cpu_limit > 0 and used >= cpu_limit - 0.1)
    return {"exit_code": 128 + sig, "signal": sig, "cpu_exceeded": cpu_exceeded}


def workspace_full(workdir):
    """Less than 2% of the workspace left (or no inode): the next write
    will likely fail."""
    try:
        vfs = os.statvfs(workdir)
    except OSError:
        return False
    return vfs.f_bavail * 50 < vfs.f_blocks or vfs.f_favail == 0
