"""Status lines: what a call's child tells the executor on fd 3.

The child writes one line per event, a word and its fields separated by
spaces, each line in one write(2) through write() below (short lines: one
write is atomic on a pipe).  fd 3 is close-on-exec: Node.js, pip and
whatever the code starts never hold it (the Python code itself could write
there, and would only mislead its own call's result and PID 1's imports).
The executor reads the lines while the call runs and when it is over, and
understands them in parse() only.  Words, not letters: the frames of
common/frame.h have letters of their own.

  word              fields                   written
  packages-changed  -                        before pip changes the session's packages (Python calls);
                                             PID 1 then starts anew if it preloaded modules
  install-failed    -                        the packages could not be installed: the code did not run
  packages-missing  -                        ... because the workspace no longer has what the session
                                             installed and the host resolved nothing for the call
  input-failed      -                        an input file could not be written: the code did not run
  memory-error      -                        the Python code ended with a MemoryError
  done              code cpu_ms max_rss_kb   the Python code is over and its output flushed; the child
                                             exits next (the result need not wait for that)
  learned           name...                  template modules (--learn) the Python code imported from
                                             /usr: PID 1 imports them too before the next fork
  value             base64                   a persistent cell ended with an expression: its repr
                                             (repl.py; the JavaScript interpreter writes it too)
  warm              -                        a Python spare has warmed up, before its request (spare.py:
                                             PID 1 looks for it without reading it; parse() passes over it)

A persistent interpreter (repl.py, repl.mjs) keeps its status pipe for its
whole life and writes these lines cell after cell: the executor reads
each cell's from the cell's start to its done line.
"""

import os
import resource

PACKAGES_CHANGED = "packages-changed"
INSTALL_FAILED = "install-failed"
PACKAGES_MISSING = "packages-missing"
INPUT_FAILED = "input-failed"
MEMORY_ERROR = "memory-error"
DONE = "done"
LEARNED = "learned"
VALUE = "value"
WARM = "warm"

FD = 3
MAX_BYTES = 1 << 20  # read no more of a call's status pipe

# The words without fields, and the Status attribute each sets.
FLAGS = {
    PACKAGES_CHANGED.encode(): "packages_changed",
    INSTALL_FAILED.encode(): "install_failed",
    PACKAGES_MISSING.encode(): "packages_missing",
    INPUT_FAILED.encode(): "input_failed",
    MEMORY_ERROR.encode(): "memory_error",
}
DONE_WORD = DONE.encode()
LEARNED_WORD = LEARNED.encode()
VALUE_WORD = VALUE.encode()


def write(word, *fields, fd=FD):
    """In a call's child: one status line (lost if the executor is gone).
    fd: where a spare, before its request, has its status pipe."""
    line = " ".join((word,) + tuple(str(f) for f in fields)) + "\n"
    try:
        os.write(fd, line.encode())
    except OSError:
        pass


def report_done(code_status):
    """Tell the executor the call is over before exiting: tearing down a
    big address space (numpy, pandas) takes gVisor tens of ms, and the
    result need not wait for it.  The executor still kills every process."""
    try:
        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    except OSError:
        return
    cpu_ms = int((me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime) * 1000)
    write(DONE, code_status, cpu_ms, max(me.ru_maxrss, kids.ru_maxrss))


_cell_start = [0.0]


def cpu_seconds():
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime, max(me.ru_maxrss, kids.ru_maxrss)


def cell_start():
    """In a persistent interpreter: a cell starts (its CPU time counts from here)."""
    try:
        _cell_start[0] = cpu_seconds()[0]
    except OSError:
        pass


def report_cell_done(code_status):
    """In a persistent interpreter: the done line of the cell that ends."""
    try:
        cpu, rss = cpu_seconds()
    except OSError:
        return
    write(DONE, code_status, int(max(0.0, cpu - _cell_start[0]) * 1000), rss)


def read(fd, buf):
    """In the executor: append what the child wrote on its status pipe
    (non-blocking), up to MAX_BYTES."""
    while len(buf) < MAX_BYTES:
        try:
            data = os.read(fd, 65536)
        except OSError:  # BlockingIOError, InterruptedError among them
            return
        if not data:
            return
        buf += data


class Status:
    """What a call's child has said."""

    __slots__ = ("packages_changed", "install_failed", "packages_missing", "input_failed", "memory_error", "done",
                 "learned", "value")

    def __init__(self):
        self.packages_changed = self.install_failed = self.input_failed = self.memory_error = False
        self.packages_missing = False
        self.done = None  # (code, cpu_ms, max_rss_kb) once the child said it is done
        self.learned = []
        self.value = None  # bytes: a persistent cell's value, as its repr (or util.inspect)


def parse(buf):
    """The Status the whole lines of buf (what read() gathered) say.  The
    first done line counts; one whose fields are not three integers means
    no done at all (the executor then waits for the child's exit)."""
    said = Status()
    seen_done = False
    for line in bytes(buf).split(b"\n")[:-1]:
        word, _, rest = line.partition(b" ")
        if line in FLAGS:
            setattr(said, FLAGS[line], True)
        elif word == LEARNED_WORD:
            said.learned += rest.decode("ascii", "replace").split()
        elif word == VALUE_WORD and said.value is None:
            said.value = parse_value(rest)
        elif word == DONE_WORD and not seen_done:
            seen_done = True
            said.done = parse_done(rest)
    return said


def parse_done(fields):
    """(code, cpu_ms, max_rss_kb) from a done line's fields, or None."""
    try:
        code, cpu, rss = (int(x) for x in fields.split())
    except ValueError:
        return None
    return code & 0xFF, max(cpu, 0), max(rss, 0)


def parse_value(field):
    import base64
    import binascii

    try:
        return base64.b64decode(field, validate=True)
    except (ValueError, binascii.Error):
        return None
