"""Ending processes: nothing an activity starts outlives it.  At its end
every process of the activity is killed (cgroups.py tells which they are;
in direct mode, on the host: its process group only) and reaped; before
the next call, whatever gVisor has not torn down yet is killed and reaped
again.  One reaper (reap) serves the whole executor: it keeps the end of
the processes whose end matters to someone (st.tracked).
"""

import os
import signal
import stat
import time

from .cgroups import STOP_SECONDS
from .limits import set_dumpable

SCRATCH = ("/tmp", "/dev/shm")
CLEAR_SECONDS = 30  # at most this long emptying them after a call
DEEP = 32  # a folder deeper than this is moved up and emptied on a later pass
SWEEP_SECONDS = 3.0  # at most this long killing what a call left, after it


def reap(st):
    """Reap every child that has exited (without waiting).  The wait status
    and resource usage of the processes the executor tracks (an activity's
    main process, an interpreter, a spare: st.tracked) are kept in
    st.exited for their owner; every other child is an orphan PID 1
    adopted, or a process of an activity already ended."""
    while True:
        try:
            pid, status, ru = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in st.tracked:
            st.exited[pid] = (status, ru)


def exit_of(st, pid):
    """(wait status, rusage) of a tracked process once it has exited, else
    None; it is not tracked any more once this has returned its end."""
    reap(st)
    end = st.exited.pop(pid, None)
    if end is not None:
        st.tracked.discard(pid)
    return end


def alone(st, act):
    """Whether act is the only activity with processes: no other call, run
    or persistent interpreter lives in the sandbox."""
    return all(other is act for other in st.live_activities())


def end_processes(st, act, pgid=0, keep=(), stop=False, seen=None):
    """End every process of activity act (its cgroup act.cgroup) but those
    in keep.  The call alone in the sandbox ends with kill(-1) (gVisor
    sends it to every process but PID 1 at once, under the lock fork
    takes); beside other activities, its process group first (one signal
    for a bomb that forks within its group), then what is left of its
    cgroup, pass after pass (daemons, double forks, processes of their own
    sessions).  stop: the activity is being stopped (its wall clock, a
    cancel, the host-task guard), so a fork bomb may run: alone, everything
    is stopped before it is killed (kill_round); beside others, the
    cgroup's processes are signalled for STOP_SECONDS at most, without
    waiting for their end (sweep() waits, once the activity has answered:
    under a bomb each kill() may take tens of ms, and the result must come
    before the supervisor's deadline).  seen: the processes signalled
    already, not signalled again (a kill() of a dying one blocks)."""
    pid1 = os.getpid() == 1 and not st.args.direct
    if pid1 and not keep and alone(st, act) and (stop or not st.spares):
        # (A stop takes the spares too: the next ones are forked after it.)
        if stop:
            kill_round()
        else:
            kill_others()
        return
    if pgid > 0 and pgid not in keep:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
    if pid1 and st.cgroups.ok:
        if stop or alone(st, act):
            # (Alone: beside the spares only; signalled now, their end
            # waited for by sweep() once the answer has left, as after
            # kill(-1).)
            st.cgroups.sweep(act.cgroup, keep, reap=lambda: reap(st), seconds=STOP_SECONDS, wait=False, seen=seen)
        else:
            st.cgroups.sweep(act.cgroup, keep, reap=lambda: reap(st), seen=seen)


def kill_new(st, act, keep, seen):
    """One pass over act's cgroup: SIGKILL what is not in keep and not in
    seen yet (the processes signalled already), for STOP_SECONDS at most.
    A stopped cell does this until it is over: a child forked while its
    parent was being killed escapes the pass that killed the parent."""
    if os.getpid() == 1 and not st.args.direct and st.cgroups.ok:
        st.cgroups.sweep(act.cgroup, keep, reap=lambda: reap(st), seconds=STOP_SECONDS, wait=False, seen=seen)


def kill_others(sig=signal.SIGKILL):
    try:
        os.kill(-1, sig)
    except OSError:
        pass


def kill_round():
    """kill(-1) as a fork bomb cannot outrun: everything but PID 1 is
    stopped first (twice: a child forked during the first kill(-1) escapes
    it), then killed.  A stopped process keeps its place under
    RLIMIT_NPROC, so the bomb cannot refill itself as the others die."""
    kill_others(signal.SIGSTOP)
    kill_others(signal.SIGSTOP)
    kill_others()


def kill_all(st, seconds=SWEEP_SECONDS):
    """kill_round and reap until no process but PID 1 is left, for at most
    `seconds`.  One kill(-1) does not stop a fork bomb in this gVisor:
    children forked while it runs escape it, and at RLIMIT_NPROC the bomb
    refills itself as the others die; meanwhile every failed fork costs
    the sentry host tasks (ptrace stubs) until the sandbox's pids backstop
    kills it (sandbox/GVISOR.md)."""
    deadline = time.monotonic() + seconds
    while True:
        reap(st)
        if not any(n.isdigit() and n != "1" for n in os.listdir("/proc")) or time.monotonic() > deadline:
            return
        kill_round()
        time.sleep(0.002)


def sweep(st, act):
    """After an activity's answer: kill and reap what it left until none of
    it is left (SWEEP_SECONDS at most).  Alone in the sandbox (no other
    activity, no spare): kill_all; beside others or spares: its cgroup
    until it is empty, sparing what it keeps (a cell's persistent
    interpreter), and kill_all after all when that did not empty it and
    only spares were beside it.  In the usual case this waits for the
    activity's processes to be torn down, after its answer has left."""
    if os.getpid() != 1 or st.args.direct:
        return
    if exiting_alone(st, act):
        return
    if alone(st, act) and not st.spares:
        kill_all(st)
    elif st.cgroups.ok:
        if not st.cgroups.sweep(act.cgroup, act.spared(), reap=lambda: reap(st), seconds=SWEEP_SECONDS) \
                and alone(st, act):
            kill_all(st)  # what it left outran the passes (a bomb): everything but PID 1, spares too


def exiting_alone(st, act):
    """Whether all that is left of act is its own child, which said it was
    done (it is exiting) and was killed with everything else of act at its
    end (Call.over): gVisor tears it down in its own time, 60-90 ms with
    numpy and pandas loaded, beside the next spare's fork rather than
    before it.  The next call still never sees it: reap_leftovers() waits
    for it."""
    if not st.cgroups.ok or getattr(act, "reported", None) is None:
        return False
    spared = act.spared()
    return all(pid == act.pid for pid in st.cgroups.members(act.cgroup) if pid not in spared)


def reap_leftovers(st, keep):
    """Before a call: any process but PID 1, the spares (`keep`) and the
    processes of the activities that live on (background runs, persistent
    interpreters) is a leftover of an earlier call, killed at its end but
    not yet gone (gVisor tears a process down in its own time), or an
    orphan that became our child after that call's reap.  Kill and reap
    them (within a second), so that a call never sees one.  /proc is read
    before the activities' cgroups: a process born in between is not in
    the first list, and so never taken for a leftover."""
    if os.getpid() != 1 or st.args.direct:
        return
    others = [act for act in st.live_activities()]
    if others and not st.cgroups.ok:
        return  # nothing tells their processes from leftovers
    deadline = time.monotonic() + 1.0
    while True:
        reap(st)
        seen = [int(n) for n in os.listdir("/proc") if n.isdigit() and int(n) != 1 and int(n) not in keep]
        live = set()
        for act in others:
            live.update(st.cgroups.members(act.cgroup))
        left = [pid for pid in seen if pid not in live]
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
