"""Phase F of scripts/bench (tests/bench/bench.py): hibernation (README
"Hibernation", sandbox/hibernate.h).

The phases before it run with hibernate_after 0 (never), so that idle
sessions stay what phase E measures.  This one restarts the service with a
short hibernate_after (scripts/bench gives the command), then:

  - N sessions build a DataFrame with numpy and pandas in their persistent
    Python interpreter (persistent: true; the DataFrame, numpy and pandas
    stay alive in the sandbox's memory);
  - their memory is measured live (PSS of each session's supervisor, runsc
    sandbox, gofer and stubs; MemAvailable), then once they all hibernated
    (the same, and each image's bytes on disk, apparent and allocated);
  - samples, one at a time, each while every session is hibernated and no
    checkpoint is being written (a checkpoint costs seconds of CPU, which
    would land on the timed call): the next call of one session is timed,
    either restoring from its image ("restore") or, with the image removed
    first, booting a new sandbox that imports numpy and pandas again
    ("cold": what the call would cost had the idle sandbox been stopped
    instead: the persistent cell finds no DataFrame and builds it again,
    numpy and pandas imported anew).  Each session gives both kinds, in a
    shuffled order.  The cell prints whether it found the DataFrame
    ("kept") or built it: a restore must find it, a cold boot cannot.

Each restore is checked in the audit log (a `restored` event of that
session after the call) and each result has state_lost false; a cold one
must not restore.  Standard library only, like bench.py.
"""

import json
import os
import random
import re
import statistics
import subprocess
import sys
import time


# Each sample waits for it (and a checkpoint) once.
HIBERNATE_AFTER = 5


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def children(pid):
    out = []
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def session_pids(session_dir):
    """The session's supervisor (it holds <folder>/sup.lock open) and every
    process below it: runsc's sandbox, gofer and ptrace stubs."""
    lock = os.path.join(session_dir, "sup.lock")
    pids = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                if not f.read().split(b"\0")[0].endswith(b"mcp-sandboxd"):
                    continue
            if not any(os.readlink("/proc/%s/fd/%s" % (p, fd)) == lock for fd in os.listdir("/proc/%s/fd" % p)):
                continue
        except OSError:
            continue
        todo = [int(p)]
        while todo:
            pid = todo.pop()
            pids.append(pid)
            todo += children(pid)
    return pids


def image_bytes(session_dir):
    """(apparent, allocated) bytes of the published image, or None."""
    d = os.path.join(session_dir, "hibernated")
    if not os.path.exists(os.path.join(d, "info.json")):
        return None
    apparent = allocated = 0
    for n in os.listdir(d):
        st = os.lstat(os.path.join(d, n))
        apparent += st.st_size
        allocated += st.st_blocks * 512
    return apparent, allocated


def audit_events(state, sid):
    try:
        with open(os.path.join(state, "logs", "audit.log")) as f:
            lines = [json.loads(x) for x in f if sid in x]
    except OSError:
        return []
    return [x.get("event") for x in lines if x.get("session_id") == sid and x.get("event")]


class Hibernation:
    def __init__(self, b, code, expect):
        """code: a persistent cell; expect: its stdout by how it found the
        interpreter ({"kept": ..., "built": ...})."""
        self.b = b
        self.code = code
        self.expect = expect
        self.sids = []

    def restart(self, seconds):
        cmd = self.b.args.restart_cmd
        if not cmd:
            raise RuntimeError("no --restart-cmd: phase F needs scripts/bench to restart the service")
        log("F: restarting the service with hibernate_after %d" % seconds)
        # The command, and Service's --print-config below, read it.
        os.environ["MCP_HIBERNATE_AFTER"] = str(seconds)
        subprocess.run(["bash", "-c", cmd], check=True)
        b = self.b
        b.svc = type(b.svc)(b.args.state, b.args.endpoint_env)
        b.ep = b.svc.ep
        b.c.close()
        b.c.ep = b.ep
        if int(b.svc.cfg.get("hibernate_after", "0")) != seconds:
            raise RuntimeError("the restarted service has hibernate_after %s" % b.svc.cfg.get("hibernate_after"))
        b.svc.wait_pool()

    def dir(self, sid):
        return self.b.svc.session_dir(sid)

    def memory(self, pss=None):
        if pss is None:
            pss = [self.b.pss_kib(session_pids(self.dir(s))) for s in self.sids]
        avail = []
        for _ in range(10):
            avail.append(self.b.mem_available_kib())
            time.sleep(0.2)
        return {"pss_kib": pss, "mem_available_kib": statistics.median(avail)}

    def wait_hibernated(self, timeout):
        """Every session hibernated, no checkpoint being written."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if all(image_bytes(self.dir(s)) and not session_pids(self.dir(s)) and
                   not os.path.exists(os.path.join(self.dir(s), "hibernate.new")) for s in self.sids):
                return
            time.sleep(0.1)
        raise RuntimeError("not every session hibernated within %.0f s" % timeout)

    def timed_first_call(self, sid, kind):
        events = len(audit_events(self.b.svc.state, sid))
        if kind == "cold":
            subprocess.run(["rm", "-rf", "--one-file-system", os.path.join(self.dir(sid), "hibernated")], check=True)
        want = self.expect["kept" if kind == "restore" else "built"]
        t, sc = self.b.timed_call(sid, self.code, want, idle=False, persistent=True)
        new = audit_events(self.b.svc.state, sid)[events:]
        if sc.get("state_lost") or ("restored" in new) != (kind == "restore"):
            raise RuntimeError("%s call of %s: state_lost %s, audit events %s" % (kind, sid, sc.get("state_lost"), new))
        self.b.add("hib_" + kind, t)

    def run(self):
        b = self.b
        n = 4 if b.quick else 6
        self.restart(HIBERNATE_AFTER)
        base = b.mem_available_kib()
        log("F: hibernation, %d sessions with numpy and pandas, %d samples each of restore and cold boot" % (n, n))
        for _ in range(n):
            sid = b.c.initialize()
            b.sessions.add(sid)
            self.sids.append(sid)
            b.c.call(sid, self.code, expect=self.expect["built"], persistent=True)
            b.c.call(sid, self.code, expect=self.expect["kept"], persistent=True)
        # One more call each in quick succession, each session measured
        # right after it: all of them alive (idle for less than
        # hibernate_after), MemAvailable taken once they all are.
        pss = []
        for sid in self.sids:
            b.c.call(sid, self.code, expect=self.expect["kept"], persistent=True)
            pss.append(b.pss_kib(session_pids(self.dir(sid))))
        live = self.memory(pss)
        timeout = HIBERNATE_AFTER + 60.0 + 10 * n
        self.wait_hibernated(timeout)
        asleep = self.memory()
        disk = [image_bytes(self.dir(s)) for s in self.sids]
        info = [json.load(open(os.path.join(self.dir(s), "hibernated", "info.json"))) for s in self.sids]
        b.info["hibernation"] = {
            "sessions": n,
            "live_pss_kib": live["pss_kib"],
            "hibernated_pss_kib": asleep["pss_kib"],
            "mem_available_kib": {"before": base, "live": live["mem_available_kib"],
                                  "hibernated": asleep["mem_available_kib"]},
            "image_bytes": [d[0] for d in disk],
            "image_allocated_bytes": [d[1] for d in disk],
            "checkpoint_ms": [x.get("checkpoint_ms") for x in info],
        }
        plan = [(sid, kind) for sid in self.sids for kind in ("restore", "cold")]
        random.shuffle(plan)
        for i, (sid, kind) in enumerate(plan):
            if i:
                self.wait_hibernated(timeout)
            self.timed_first_call(sid, kind)
            if (i + 1) % 4 == 0 or i + 1 == len(plan):
                log("  samples: %d/%d" % (i + 1, len(plan)))
        took, errs = b.end_sessions(self.sids)
        if errs:
            log("%d sessions could not be ended: %s" % (len(errs), errs[:3]))
