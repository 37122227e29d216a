"""The executor's main loop: start up (preload, the first spares, the Y
frame), then for each request frame accept it (A), run it, and between
calls import what the last one learned and fork the next spares.  A wake
frame (W) comes after the sandbox was restored from its checkpoint
(restore.py).
"""

import json
import os
import select
import signal
import sys

from .call import run_call
from .limits import set_dumpable
from .processes import clear_scratch, sweep
from .protocol import ACCEPTED, DONE, HIBERNATE, REQUEST, WAKE, FrameReader, write_frame, write_ready
from .restore import before_checkpoint, wake
from .spare import prepare_spare
from .state import Args, State

SPARE_DELAY = 0.05  # seconds between a call's answer and the next spare's fork


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
    serve(st, FrameReader(0), wake_r)


def serve(st, reader, wake_r):
    """Run the requests that come on fd 0, one at a time, until its end."""
    while True:
        frame = reader.next()
        if frame is None:
            if not reader.fill():
                return
            continue
        kind, payload = frame
        if kind == WAKE:
            wake(st, payload)
            continue
        if kind == HIBERNATE:
            before_checkpoint(st)
            continue
        if kind != REQUEST:
            continue
        try:
            req = json.loads(payload)
        except ValueError:
            write_frame(DONE, json.dumps({"exit_code": 126, "error": "bad request"}).encode())
            continue
        # From here on a lost sandbox is the call's doing (or its fate);
        # before it, the supervisor may hand the call to a new sandbox.
        write_frame(ACCEPTED, b"")
        said = run_call(st, req, payload, reader, wake_r)
        sweep(st.args)
        if said.packages_changed and st.preloaded:
            # A preloaded template module could shadow what was just
            # installed: start over as a fresh interpreter (still PID 1),
            # with the same command line (python3 -I -B <folder> ...).
            clear_scratch(st.args)
            os.execv(sys.executable, sys.orig_argv)
        import_modules(st, [name for name in said.learned if name in st.args.learn])
        # The next call's child is forked once this call's answer has had
        # time to leave: a fork keeps gVisor busy for 15-40 ms, and on a
        # small machine that delays the answer on its way out.  A request
        # that comes first is served at once (forking on demand).
        if not reader.buf and not select.select([0], [], [], SPARE_DELAY)[0]:
            prepare_spare(st)  # after the imports: the spare has them too
        # /tmp and /dev/shm do not persist: emptied before the next request
        # is read, after the spare's fork (which the next call waits for
        # more often than for this).
        clear_scratch(st.args)


def import_modules(st, names):
    """Import template modules into this process (the spares and the calls
    they become have them loaded), and remember which it has."""
    for name in names:
        if name not in st.preloaded:
            try:
                __import__(name)
                st.preloaded.add(name)
            except Exception:
                pass
