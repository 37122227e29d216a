"""Which processes belong to which activity: a cgroup per activity inside
gVisor.

A sandbox runs several activities at once: the call in the foreground,
background runs, persistent interpreters (each with the processes its
cells start).  Ending one must end every process it started, daemons
(setsid) and double forks (orphans, reparented to PID 1) included, and
nothing of the others.  Process groups and parentage cannot tell that:
a daemon leaves its group, an orphan its parent.  A cgroup can: a
process's children are born in its cgroup, and only root may move a
process out (cgroup.procs is root's), so the code cannot leave.

runsc --cgroupfs mounts gVisor's own cgroupfs (not the host's) at
/sys/fs/cgroup with the cpu and memory controllers; the cpu controller
serves here for membership only (nothing is limited through it).  Its
folder is root's, mode 0555: PID 1 (root without CAP_DAC_OVERRIDE) makes
it 0700 at start, which also keeps the calls' user from reading which
processes belong to what.  The tmpfs above it is 1777: it becomes 0755,
so that the calls cannot write there.

Without the mount (the direct backend on the host, a runsc without
--cgroupfs) there are no cgroups: activities are then told apart by
their process groups only (killpg), as before.
"""

import os
import signal
import time

ROOT = "/sys/fs/cgroup"
TREE = ROOT + "/cpu"
SWEEP_SECONDS = 1.0  # one sweep gives up after this long (the next one goes on)
STOP_SECONDS = 0.5  # ... one of an activity being stopped, whose result must not wait


def signal_all(pids, sig, deadline=None):
    """Signal each of pids; False when the deadline came first."""
    for pid in pids:
        if deadline is not None and time.monotonic() > deadline:
            return False
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    return True


class Tree:
    """The cgroups of one executor: TREE/<name> per activity."""

    def __init__(self, args):
        self.ok = False
        if args.direct or os.getpid() != 1:
            return
        try:
            os.chmod(TREE, 0o700)
            os.chmod(ROOT, 0o755)
            self.ok = os.path.isfile(os.path.join(TREE, "cgroup.procs"))
        except OSError:
            self.ok = False

    def path(self, name, leaf="cgroup.procs"):
        return os.path.join(TREE, name, leaf)

    def make(self, name):
        """The cgroup `name`, made when missing (emptied of stragglers
        later: its members are killed before it is reused)."""
        if not self.ok:
            return
        try:
            os.mkdir(os.path.join(TREE, name), 0o700)
        except FileExistsError:
            pass
        except OSError:
            pass

    def move(self, name, pid):
        """Put process pid (and so everything it forks from now on) in `name`."""
        if not self.ok:
            return False
        try:
            fd = os.open(self.path(name), os.O_WRONLY)
            try:
                os.write(fd, str(pid).encode())
            finally:
                os.close(fd)
            return True
        except OSError:
            return False

    def members(self, name):
        """The processes in `name` now (thread group ids)."""
        if not self.ok:
            return []
        try:
            with open(self.path(name), "rb") as f:
                return [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            return []

    def sweep(self, name, keep=(), reap=None, seconds=SWEEP_SECONDS, wait=True, seen=None):
        """SIGKILL every process of `name` but those in keep, pass after
        pass, until none is left (a process may fork while the list is
        read) or `seconds` have passed; reap() between passes.  True when
        none is left.  Each pass signals only the processes it has not
        signalled yet: while gVisor tears down many processes at once (a
        fork bomb's 128 took 1-4 s at a load of 25), a kill() blocks, and
        one for each dying process again cost seconds.  wait=False: return
        once a pass has found no process it had not signalled, without
        waiting for them to be torn down, and signal for `seconds` at most;
        seen: the processes signalled already (kept across calls).  (Stopping them first, so that a
        bomb at RLIMIT_NPROC cannot refill the places the kills free, made
        the kills dearer still, and a session leader's group with stopped
        members gets SIGHUP and SIGCONT when one of them exits.)"""
        deadline = time.monotonic() + seconds
        seen = set() if seen is None else seen
        while True:
            left = [p for p in self.members(name) if p not in keep]
            if not left:
                return True
            new = [p for p in left if p not in seen]
            seen.update(new)
            if not signal_all(new, signal.SIGKILL, None if wait else deadline) or (not new and not wait):
                return False
            if time.monotonic() > deadline:
                return False
            if reap is not None:
                reap()
            if not new:
                time.sleep(0.005)
