"""Frames to and from the supervisor (mcp-sandboxd), on fds 0 and 1.

A frame is one type byte, a big-endian u32 length, the payload; the table
of types is common/frame.h.  The executor reads R (request) and K (cancel)
of the call in the foreground, G (start a run), C (cancel a run) and P
(the host-task guard: stop the activity whose processes are the most),
L and N (one of them after each D: L, other sessions' calls wait or run
on busy cores, so fork no spare until N, or for at most the milliseconds
L names; or N, nothing to wait for; main.Loop.between_calls), and
writes Y (ready), A (accepted), O (stdout), E (stderr) and D (done) of
the foreground call, and o, e, d of the runs: their payload starts with
one byte, the run's number (1-255), that the G frame's JSON named.  After a
restore from a checkpoint it gets W (wake) and answers Y again; H (both
ways) comes before a checkpoint (restore.py).
"""

import json
import os
import struct
import sys

HEADER = struct.Struct(">cI")
MAX_REQUEST = 256 << 20
CHUNK = 65536

REQUEST = b"R"  # JSON: run this call
CANCEL = b"K"  # empty: end the running call
READY = b"Y"  # JSON: the executor is up (Python version, preloaded modules)
WAKE = b"W"  # JSON {"seed": hex}: the sandbox was restored from its checkpoint (restore.py)
HIBERNATE = b"H"  # empty, both ways: a checkpoint follows; answered once the spares are gone (restore.py)
ACCEPTED = b"A"  # empty: the call is the sandbox's own now
STDOUT = b"O"  # bytes of the call's stdout
STDERR = b"E"  # bytes of the call's stderr
DONE = b"D"  # JSON: the call's result
RUN_START = b"G"  # JSON with "run": N: start background run N
RUN_CANCEL = b"C"  # the byte N: end run N
RUN_STDOUT = b"o"  # N, then bytes of run N's stdout
RUN_STDERR = b"e"  # N, then bytes of its stderr
RUN_DONE = b"d"  # N, then its result (JSON)
PROCESSES = b"P"  # empty: the host-task guard; stop the activity with the most processes
SPARES_LATER = b"L"  # ASCII ms: other sessions' calls wait or run; no spare's fork or warm-up until N, or that long
SPARES_NOW = b"N"  # empty: none waits, none runs on busy cores (any more, after L)


def write_frame(kind, payload, prefix=b""):
    """Write one frame (blocking), its payload after prefix; exit quietly
    once the supervisor is gone."""
    data = HEADER.pack(kind, len(prefix) + len(payload)) + prefix + payload
    view = memoryview(data)
    while view:
        try:
            n = os.write(1, view)
        except InterruptedError:
            continue
        except BrokenPipeError:
            os._exit(0)
        view = view[n:]


def write_ready(preloaded, **extra):
    """Y: the Python version, the template modules imported, and extra."""
    info = {"python": sys.version.split()[0], "preloaded": sorted(preloaded)}
    info.update(extra)
    write_frame(READY, json.dumps(info).encode())


class FrameReader:
    """Frames from fd, read as they come."""

    def __init__(self, fd):
        self.fd = fd
        self.buf = bytearray()

    def fill(self):
        """Read what fd has; False at EOF."""
        try:
            data = os.read(self.fd, CHUNK)
        except InterruptedError:
            return True
        if not data:
            return False
        self.buf += data
        return True

    def next(self):
        """The next whole frame (kind, payload), or None."""
        if len(self.buf) < HEADER.size:
            return None
        kind, length = HEADER.unpack_from(self.buf)
        if length > MAX_REQUEST:
            os._exit(3)
        if len(self.buf) < HEADER.size + length:
            return None
        payload = bytes(self.buf[HEADER.size:HEADER.size + length])
        del self.buf[:HEADER.size + length]
        return kind, payload


class Stream:
    """A call's stdout or stderr pipe, forwarded as O or E frames up to the
    call's output limit; what is beyond it is counted, not sent."""

    def __init__(self, fd, kind, limit, prefix=b""):
        self.fd = fd
        self.kind = kind
        self.prefix = prefix  # a run's number (RUN_STDOUT, RUN_STDERR)
        self.limit = limit
        self.sent = 0
        self.total = 0
        self.tail = b""  # the last bytes, to recognise a V8 heap overflow

    def pump(self):
        """Forward what is readable; False at EOF."""
        try:
            data = os.read(self.fd, CHUNK)
        except (InterruptedError, BlockingIOError):
            return True
        except OSError:
            return False
        if not data:
            return False
        self.take(data)
        return True

    def drain(self):
        """Forward everything a non-blocking fd holds now; False at EOF."""
        while True:
            try:
                data = os.read(self.fd, CHUNK)
            except BlockingIOError:
                return True
            except InterruptedError:
                continue
            except OSError:
                return False
            if not data:
                return False
            self.take(data)

    def take(self, data):
        self.total += len(data)
        self.tail = (self.tail + data)[-4096:]
        room = self.limit - self.sent
        if room > 0:
            part = data[:room]
            self.sent += len(part)
            write_frame(self.kind, part, self.prefix)


def child_pipes():
    """The pipes of a child that runs code (a spare, an interpreter): its
    request, which it reads, and its stdout, stderr and status lines, which
    it writes.  (the child's ends, the executor's ends), both in the order
    request, stdout, stderr, status."""
    req_r, req_w = os.pipe2(os.O_CLOEXEC)
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    st_r, st_w = os.pipe2(os.O_CLOEXEC)
    return (req_r, out_w, err_w, st_w), (req_w, out_r, err_r, st_r)
