"""Python calls: in the call's child, the code runs as `__main__` of this
interpreter (which PID 1 started with the preloaded modules imported), then
the child reports how it ended on its status pipe and exits.  warm_up()
readies a Python spare for that path before its request comes.
"""

# What every call's child uses: imported once in PID 1, not in each call.
import atexit
import builtins
import linecache
import os
import sys
import threading
import traceback
import types

from . import status
from .limits import base_env
from .packages import add_user_site, call_folder, install_packages


def open_streams():
    """sys.stdin, sys.stdout and sys.stderr on fds 0-2, as a call has them."""
    return {
        "stdin": open(0, "r", closefd=False),
        "stdout": open(1, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False),
        "stderr": open(2, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False),
    }


def warm_up(st, stop=lambda: False):
    """In a spare, before its request: walk the path a call takes through
    the interpreter (the environment, the standard streams, the main module,
    compiling, importing what is preloaded).  Each page shared with the
    executor costs gVisor a copy-on-write fault the first time it is
    written, and Python writes reference counts everywhere it reads: taking
    those faults now keeps them out of the call (tens of ms with pandas).
    stop(): whether to stop (the request has come); asked between the
    steps (20-55 ms each with numpy and pandas), the rest is left (the call
    takes only the faults it needs, and a back-to-back call does not wait
    for the whole walk)."""
    try:
        os.environ.clear()
        os.environ.update(base_env(st.args, {}))
        st.warm.update(open_streams())
        main = types.ModuleType("__main__")
        main.__builtins__ = builtins
        linecache.getlines("<string>")
        names = sorted(st.preloaded) + ["sys", "os"]
        exec(compile("import %s\nprint\n" % ", ".join(names), "<warm>", "exec"), main.__dict__)
        for name in st.args.learn:
            sys.modules.get(name)
        for _ in template_walk(st):
            if stop():
                return
    except Exception:
        pass


def template_walk(st):
    """The commonest paths through preloaded template modules: array
    arithmetic and reductions, a frame, a group-by, formatting.  Yields
    before each step."""
    if "numpy" in st.preloaded:
        np = sys.modules["numpy"]
        yield
        a = np.arange(16, dtype=float).reshape(4, 4)
        (a @ a).sum(), a.mean(axis=0), np.sqrt(a) % 3, repr(a)
    if "pandas" in st.preloaded:
        pd = sys.modules["pandas"]
        yield
        df = pd.DataFrame({"a": list(range(8)), "b": [i % 3 for i in range(8)]})
        df.groupby("b")["a"].sum().sum()
        yield
        df.describe()
        yield
        str(df.head())


def run_python(st, req):
    """In the call's child, as the sandbox user in the workspace: install
    the call's packages, run the code as __main__, report and exit (does
    not return)."""
    user_site = add_user_site()
    if req.get("packages") and not install_packages(req["packages"], user_site, call_folder(req)):
        status.write(status.INSTALL_FAILED)
        os._exit(125)
    become_main(st)
    code_status = run_code(req.get("code") or "")
    try:
        threading._shutdown()
        atexit._run_exitfuncs()
    except BaseException:
        pass
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:
            pass
    report_learned(st.args)
    # The output pipes end here, not when gVisor has torn this process
    # down: the executor answers once they have (a numpy and pandas
    # address space took it 5 ms more per call).
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
    except OSError:
        pass
    status.report_done(code_status)
    os._exit(code_status)


def become_main(st):
    """The interpreter as `python3 -c` would have it for the code: its exit
    handlers, standard streams, argv and path."""
    # Exit handlers the executor's own imports registered (pandas and
    # friends) are not the call's: running them at every call's end cost
    # tens of ms.  Logging's flush-and-close is kept for the call's logs.
    atexit._clear()
    if "logging" in sys.modules:
        atexit.register(sys.modules["logging"].shutdown)
    # The streams warm_up() opened on fds 0-2 now write to the call's pipes.
    streams = st.warm or open_streams()
    sys.stdin, sys.stdout, sys.stderr = streams["stdin"], streams["stdout"], streams["stderr"]
    sys.argv = ["-c"]
    # The executor's own folder left sys.path in __main__.py.
    if "" not in sys.path:
        sys.path.insert(0, "")


def run_code(source):
    """Run source as the module __main__; its exit status."""
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    linecache.cache["<string>"] = (len(source), None, source.splitlines(True), "<string>")
    try:
        exec(compile(source, "<string>", "exec"), main.__dict__)
        return 0
    except SystemExit as e:
        return exit_status(e)
    except BaseException as e:
        if isinstance(e, MemoryError):
            status.write(status.MEMORY_ERROR)
        try:
            # Drop this module's frame: the traceback starts in the user's code.
            tb = e.__traceback__.tb_next if e.__traceback__ is not None else None
            traceback.print_exception(type(e), e, tb)
        except BaseException:
            pass
        return 1


def report_learned(args):
    """Tell the executor which template modules this call imported (from the
    system's /usr, not the session's own packages): it imports them itself
    before the next fork, so later calls find them loaded."""
    names = []
    for name in args.learn:
        mod = sys.modules.get(name)
        if mod is not None and (getattr(mod, "__file__", None) or "").startswith("/usr/"):
            names.append(name)
    if names:
        status.write(status.LEARNED, *names)


def exit_status(e):
    """The exit status of a SystemExit, as python3 -c gives it (a message
    goes to stderr)."""
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code & 0xFF
    try:
        print(e.code, file=sys.stderr)
    except BaseException:
        pass
    return 1
