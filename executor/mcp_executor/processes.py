"""Ending processes: nothing a call starts outlives it.  At its end every
process in the sandbox but PID 1 is killed (in direct mode, on the host:
the call's process group only) and reaped; before the next call, whatever
gVisor has not torn down yet is killed and reaped again.
"""

import os
import signal
import stat
import time

from .limits import set_dumpable

SCRATCH = ("/tmp", "/dev/shm")
CLEAR_SECONDS = 30  # at most this long emptying them after a call
DEEP = 32  # a folder deeper than this is moved up and emptied on a later pass
SWEEP_SECONDS = 3.0  # at most this long killing what a call left, after it


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


def sweep(args, seconds=SWEEP_SECONDS):
    """After a call (its answer sent): kill(-1) and reap until no process
    but PID 1 is left, for at most `seconds`.  One kill(-1) at the call's
    end does not stop a fork bomb in this gVisor: children forked while it
    runs escape it, and at RLIMIT_NPROC the bomb refills itself as the
    others die; meanwhile every failed fork costs the sentry host tasks
    (ptrace stubs) until the sandbox's pids backstop kills it.  In the
    usual case this waits for the call's process to be torn down."""
    if os.getpid() != 1 or args.direct:
        return
    deadline = time.monotonic() + seconds
    while True:
        reap_others()
        if not any(n.isdigit() and n != "1" for n in os.listdir("/proc")) or time.monotonic() > deadline:
            return
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        time.sleep(0.002)


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


def clear_scratch(args):
    """After a call, once its processes are gone: empty /tmp and /dev/shm
    (they do not persist between calls, and hold sandbox memory while the
    session idles).  Only what the sandbox user made can be there, in
    sticky folders the executor (root without CAP_FOWNER) may not empty:
    it does so with the sandbox user's effective ids (no fork: a fork of
    PID 1 costs the next call more than this), back to root at the end,
    never following a link.  Nothing to do (the usual case) costs two
    listings."""
    if os.getpid() != 1 or args.direct:
        return
    try:
        if not any(os.listdir(d) for d in SCRATCH):
            return
    except OSError:
        return
    deadline = time.monotonic() + CLEAR_SECONDS
    os.setegid(args.gid)
    os.seteuid(args.uid)
    try:
        for d in SCRATCH:
            empty_folder(d, deadline)
    except (OSError, TimeoutError):
        pass
    finally:
        # root's effective ids again (its capabilities come back with them);
        # still not dumpable (a change of ids may reset that)
        os.seteuid(0)
        os.setegid(0)
        set_dumpable(False)


def empty_folder(path, deadline):
    """Remove everything below path (as its entries' owner): folders without
    permissions get them back, links are removed, never followed; a folder
    nested deeper than DEEP is moved up to path and emptied on a later pass,
    so that neither recursion nor descriptors run out.  TimeoutError past
    the deadline."""
    top = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        before = None
        for serial in range(1 << 20):
            names = sorted(os.listdir(top))
            if not names or names == before:
                return  # empty, or what is left cannot be removed
            before = names
            for name in names:
                try:
                    remove_entry(top, top, name, 0, serial, deadline)
                except OSError:
                    pass
    finally:
        os.close(top)


def remove_entry(top, dfd, name, depth, serial, deadline):
    if time.monotonic() > deadline:
        raise TimeoutError()
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dfd)
        return
    # This gVisor follows a link despite O_NOFOLLOW|O_DIRECTORY: the lstat
    # above says it is a folder, and nothing else runs in the sandbox now.
    os.chmod(name, 0o700, dir_fd=dfd)
    if depth >= DEEP:
        os.rename(name, ".mcp-deep-%d-%d" % (serial, st.st_ino), src_dir_fd=dfd, dst_dir_fd=top)
        return
    sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dfd)
    try:
        for child in os.listdir(sub):
            remove_entry(top, sub, child, depth + 1, serial, deadline)
    finally:
        os.close(sub)
    os.rmdir(name, dir_fd=dfd)
