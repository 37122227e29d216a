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
SWEEP_SECONDS = 1.0  # one kill pass gives up after this long (the next pass goes on)


def signal_all(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


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

    def sweep(self, name, keep=(), reap=None, seconds=SWEEP_SECONDS, wait=True):
        """End every process of `name` but those in keep, pass after pass,
        until none is left (a process may fork while the list is read) or
        `seconds` have passed; reap() between passes.  True when none is
        left.  Each pass stops (SIGSTOP) the processes it has not seen yet,
        and kills (SIGKILL) them all only once a pass finds no new one: a
        stopped process keeps its place under RLIMIT_NPROC, so a fork bomb
        held at its limit cannot refill itself while the kills go one by
        one (killed one by one, 128 bomb processes forked ~900 more under
        gVisor before the last one died).  wait=False: return once every
        process has been sent SIGKILL, without waiting for gVisor to tear
        them down (128 of them take about a second)."""
        deadline = time.monotonic() + seconds
        stopped = set()
        while True:
            left = [p for p in self.members(name) if p not in keep]
            if not left:
                return True
            new = [p for p in left if p not in stopped]
            signal_all(new or left, signal.SIGSTOP if new else signal.SIGKILL)
            stopped.update(new)
            if time.monotonic() > deadline or (not new and not wait):
                signal_all(left, signal.SIGKILL)
                return False
            if reap is not None and not new:
                reap()
