"""The executor's command line, and its one mutable state object.

main() builds a State from the command line and hands it (or its args)
down; no other module keeps anything that changes.  A forked child gets
its own copy, as it gets a copy of everything else.
"""

from .cgroups import Tree
from .egress import Relay
from .turns import Turns


class Args:
    """The command line (sandbox/bundle.c, sandbox/direct.c), read once:
    --uid=N --gid=N [--statx-fix] [--learn=a,b] [--preload=a,b]
    [--direct] [--workdir=PATH].  Unknown arguments are ignored."""

    __slots__ = ("uid", "gid", "preload", "learn", "direct", "workdir", "statx_fix")

    def __init__(self, argv):
        self.uid = 1000
        self.gid = 1000
        self.direct = False  # a plain host process (the test backend), not PID 1 in gVisor
        self.statx_fix = False  # LD_PRELOAD libmcpstatx.so in the calls (see statx_fix.c)
        self.workdir = "/work"
        preload = learn = ""
        for a in argv:
            if a == "--direct":
                self.direct = True
            elif a == "--statx-fix":
                self.statx_fix = True
            elif a.startswith("--") and "=" in a:
                k, v = a[2:].split("=", 1)
                if k in ("uid", "gid"):
                    setattr(self, k, int(v))
                elif k == "workdir":
                    self.workdir = v
                elif k == "preload":
                    preload = v
                elif k == "learn":
                    learn = v
        # Imported before the first call.
        self.preload = tuple(filter(None, (m.strip() for m in preload.split(","))))
        # Imported after a call that used them (from the system's /usr).
        self.learn = tuple(filter(None, learn.split(",")))


class State:
    """Everything the executor changes while it runs."""

    def __init__(self, args):
        self.args = args
        self.preloaded = set()  # template modules this executor has imported
        self.spares = []  # a Python child, and a warm Node.js once the session ran JavaScript
        self.paired_until = 0.0  # monotonic time: keep two Python spares until then (spare.py)
        self.js_template = None  # the session's last JavaScript call: the Node.js spare's limits
        self.warm = {}  # in a Python spare: the standard streams warm_up() opened
        self.relay = Relay()  # the egress relay on the sandbox's loopback (egress.py)
        self.cgroups = Tree(args)  # which process belongs to which activity (cgroups.py)
        self.tracked = set()  # pids whose end someone waits for (processes.reap)
        self.exited = {}  # ... and how they ended: pid -> (wait status, rusage)
        self.foreground = None  # the call of the R frame that runs now (call.Call or persistent.Cell)
        self.runs = {}  # background runs (G frames): run number -> call.Call or persistent.Cell
        self.interpreters = {}  # persistent interpreters: language -> persistent.Interpreter
        self.turns = Turns()  # when a Python spare may warm up (turns.py)

    def live_activities(self):
        """What has processes in the sandbox besides PID 1 and the spares:
        the running call and runs, and the persistent interpreters."""
        acts = [a for a in [self.foreground] + list(self.runs.values()) if a is not None and not a.finished]
        return acts + [i for i in self.interpreters.values() if i.alive]
