"""The persistent Python interpreter, in its own process (persistent.py
starts it as the sandbox user with the call limits): it reads cells on
fd 4 and runs each in one namespace, which lives as long as it does.

A cell is a request frame (a big-endian u32 length, then JSON: code, env,
cell number, value limit).  Like a notebook cell, a cell that ends with an
expression has its value's repr reported (the status line `value`,
base64); figures a cell leaves open (matplotlib) are saved to
/work/output/figure-<cell>-<n>.png and closed; stdout and stderr are fds
1 and 2 for the interpreter's whole life (the executor tells the cells'
output apart by the done line: everything a cell wrote is in the pipes
before it).  The wall clock interrupts a cell with SIGINT
(KeyboardInterrupt); a MemoryError ends the interpreter after the cell
(its state may be half built; the result says the state was lost).

Processes a cell forks are the cell's: the executor kills them once the
cell is done.  Their zombies are reaped between cells (SIGCHLD), after
the Popen objects of the code had their chance to learn their exit
status; a forked child that returns from the cell's code ends there
(it never runs this loop).
"""

import ast
import base64
import builtins
import json
import linecache
import os
import signal
import struct
import sys
import traceback
import types
import weakref

from . import status
from .packages import add_user_site
from .python_call import become_main, exit_status

HEADER = struct.Struct(">I")
MAX_CELL = 256 << 20


class Children:
    """The code's Popen objects (subprocess, multiprocessing), so that the
    reaper lets them learn how their process ended before it reaps the
    rest."""

    def __init__(self):
        self.popens = weakref.WeakSet()
        self.hooked = set()

    def hook(self):
        """Register the Popen objects made from now on (both modules are
        imported before the first cell: an object made before its class is
        hooked would be missed)."""
        import multiprocessing.popen_fork  # noqa: F401
        import subprocess  # noqa: F401

        for modname, clsname in (("subprocess", "Popen"), ("multiprocessing.popen_fork", "Popen")):
            mod = sys.modules.get(modname)
            cls = getattr(mod, clsname, None) if mod is not None else None
            if cls is None or cls in self.hooked:
                continue
            self.hooked.add(cls)
            init = cls.__init__
            popens = self.popens

            def registered(obj, *a, __init=init, **kw):
                popens.add(obj)
                __init(obj, *a, **kw)

            cls.__init__ = registered

    def reap(self, *_):
        """Between cells: every exited child is reaped, a Popen's by that
        Popen (it keeps the status).  waitid(WNOWAIT) names the next exited
        child without reaping it, so a process that ends while this runs is
        never taken from its Popen (its poll would then say 0)."""
        popens = {p.pid: p for p in list(self.popens)}
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except (ChildProcessError, OSError):
                return
            if info is None:
                return
            p = popens.pop(info.si_pid, None)
            if p is not None:
                try:
                    if p.poll() is not None:
                        continue
                except BaseException:
                    pass
            try:
                os.waitpid(info.si_pid, os.WNOHANG)
            except (ChildProcessError, OSError):
                return


def read_exact(fd, n):
    data = bytearray()
    while len(data) < n:
        try:
            chunk = os.read(fd, n - len(data))
        except InterruptedError:
            continue
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def next_cell(fd):
    """The next cell's request, or None when the executor closed the pipe."""
    head = read_exact(fd, HEADER.size)
    if head is None:
        return None
    (n,) = HEADER.unpack(head)
    if n > MAX_CELL:
        return None
    body = read_exact(fd, n)
    return json.loads(body) if body is not None else None


def serve(st, fd):
    """In the interpreter: run cells until fd closes (does not return)."""
    me = os.getpid()
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    become_main(st)
    sys.modules["__main__"] = main
    children = Children()
    while True:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGCHLD, children.reap)
        children.reap()
        try:
            req = next_cell(fd)
        except BaseException:
            req = None
        if req is None:
            os._exit(0)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        try:
            children.hook()
            code, ended = run_cell(main, req)
        except BaseException:  # an interrupt that came as the cell ended
            code, ended = 1, False
        if os.getpid() != me:
            # A child the cell forked came back from the cell's code: it
            # ends as a script's child would at the end of the script.
            flush()
            os._exit(code)
        report(code, ended)


def run_cell(main, req):
    """Run one cell in main's namespace: (exit code, whether the
    interpreter must end after it)."""
    cell = int(req.get("cell") or 0)
    name = "<cell %d>" % cell
    os.environ.clear()
    os.environ.update(req.get("env") or {})
    add_user_site()
    import importlib

    importlib.invalidate_caches()
    source = req.get("code") or ""
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    ended = False
    status.cell_start()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        value = execute(main, source, name)
        code = 0
        if value is not None:
            builtins._ = value
            report_value(value, int(req.get("value_max") or 65536))
    except SystemExit as e:
        code = exit_status(e)
    except BaseException as e:
        code = 1
        if isinstance(e, MemoryError):
            status.write(status.MEMORY_ERROR)
            ended = True
            # The interpreter ends after this cell: its namespace (what
            # filled the memory) goes first, so that the traceback has the
            # memory to be printed.
            main.__dict__.clear()
        print_exception(e)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        save_figures(cell)
    except BaseException:
        pass
    return code, ended


def execute(main, source, name):
    """Run source in main's namespace; the value of its last statement when
    that is an expression, else None."""
    tree = ast.parse(source, name, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, name, "exec"), main.__dict__)
    if last is None:
        return None
    return eval(compile(last, name, "eval"), main.__dict__)


def print_exception(e):
    try:
        # Drop this module's frames: the traceback starts in the cell.
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next
        traceback.print_exception(type(e), e, tb)
    except BaseException:
        pass


def report_value(value, limit):
    """The value's repr, cut at limit bytes, as a status line."""
    try:
        text = repr(value)
    except BaseException as e:
        text = "<repr() failed: %s>" % type(e).__name__
    data = text.encode("utf-8", "backslashreplace")
    if len(data) > limit:
        data = data[:limit] + "…".encode()
    status.write(status.VALUE, base64.b64encode(data).decode())


def save_figures(cell):
    """Figures the cell left open come back as images: saved to output/
    (the executor returns new files there) and closed, as a notebook
    shows and forgets them."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None or not plt.get_fignums():
        return
    os.makedirs("output", exist_ok=True)
    for num in plt.get_fignums():
        plt.figure(num).savefig("output/figure-%d-%d.png" % (cell, num))
    plt.close("all")


def flush():
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:
            pass


def report(code, ended):
    """The cell is over: its output flushed, then the done line (the
    executor reads the pipes up to there); the interpreter ends after a
    MemoryError."""
    flush()
    status.report_cell_done(code)
    if ended:
        os._exit(code)
