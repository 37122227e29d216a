"""Ending processes: nothing a call starts outlives it.  At its end every
process in the sandbox but PID 1 is killed (in direct mode, on the host:
the call's process group only) and reaped; before the next call, whatever
gVisor has not torn down yet is killed and reaped again.
"""

import os
import signal
import time


def kill_everything(args, pid):
    """End every process the call (child pid) started, except this one."""
    if os.getpid() == 1 and not args.direct:
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
    else:
        # Direct mode runs on the host: never kill(-1) there.
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass


def reap_others():
    """Reap every child that has exited (without waiting)."""
    while True:
        try:
            p, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if p == 0:
            return


def reap_leftovers(args, keep):
    """Before a call: any process but PID 1 and the spares (`keep`) is a
    leftover of an earlier call, killed at its end but not yet gone (gVisor
    tears a process down in its own time), or an orphan that became our
    child after that call's reap.  Kill and reap them (within a second), so
    that a call never sees one."""
    if os.getpid() != 1 or args.direct:
        return
    deadline = time.monotonic() + 1.0
    while True:
        reap_others()
        left = [int(n) for n in os.listdir("/proc") if n.isdigit() and int(n) != 1 and int(n) not in keep]
        if not left or time.monotonic() > deadline:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.002)
