"""The executor: PID 1 of a session's sandbox.

It runs as root inside gVisor with only CAP_SETUID, CAP_SETGID and CAP_KILL,
reads request frames on fd 0 and answers with frames on fd 1 (the pipes the
supervisor, mcp-sandboxd, gave to `runsc create`).  Each call runs in a fresh
child forked from this process, which has already imported the interpreter's
start-up modules (and the configured preload modules), so a call costs a fork
instead of an interpreter start.  The child drops to the sandbox user with
empty capability sets, lowers its rlimits, and runs the code as `__main__`.
Once the session has run JavaScript, a Node.js is also started ahead of the
next call (as the sandbox user, with the call's limits), waiting for its code.

When the call ends, every other process in the sandbox is killed: background
processes, setsid daemons and double forks do not outlive their call.

Frames: one type byte, a big-endian u32 length, the payload (see frame.h).
Nothing here is trusted by the host: the supervisor and the responders
validate and bound everything this process sends.
"""

import fcntl
import json
import os
import resource
import select
import signal
import struct
import sys
import time

FRAME_HEADER = struct.Struct(">cI")
MAX_REQUEST = 256 << 20
CHUNK = 65536
STATX_FIX = "/opt/mcp/libmcpstatx.so"
WHEELS = "/opt/mcp/wheels"
NPM = "/opt/mcp/npm"
PRELOADED = set()  # template modules this executor has imported
DRAIN_MS = 500
SPARE_DELAY = 0.05  # seconds between a call's answer and the next spare's fork

ARGS = {"uid": 1000, "gid": 1000, "preload": "", "learn": "", "direct": False, "workdir": "/work",
        "statx_fix": False}


def parse_args(argv):
    for a in argv:
        if a == "--direct":
            ARGS["direct"] = True
        elif a == "--statx-fix":
            ARGS["statx_fix"] = True
        elif a.startswith("--") and "=" in a:
            k, v = a[2:].split("=", 1)
            if k in ("uid", "gid"):
                ARGS[k] = int(v)
            elif k in ("preload", "learn", "workdir"):
                ARGS[k] = v


def write_frame(kind, payload):
    data = FRAME_HEADER.pack(kind, len(payload)) + payload
    view = memoryview(data)
    while view:
        try:
            n = os.write(1, view)
        except InterruptedError:
            continue
        except BrokenPipeError:
            os._exit(0)
        view = view[n:]


class FrameReader:
    def __init__(self, fd):
        self.fd = fd
        self.buf = bytearray()

    def fill(self):
        try:
            data = os.read(self.fd, CHUNK)
        except InterruptedError:
            return True
        if not data:
            return False
        self.buf += data
        return True

    def next(self):
        if len(self.buf) < FRAME_HEADER.size:
            return None
        kind, length = FRAME_HEADER.unpack_from(self.buf)
        if length > MAX_REQUEST:
            os._exit(3)
        if len(self.buf) < FRAME_HEADER.size + length:
            return None
        payload = bytes(self.buf[FRAME_HEADER.size:FRAME_HEADER.size + length])
        del self.buf[:FRAME_HEADER.size + length]
        return kind, payload


def base_env(req):
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": ARGS["workdir"],
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        "MPLBACKEND": "Agg",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    if ARGS["statx_fix"]:
        # coreutils' statx(AT_NO_AUTOMOUNT) fails in this gVisor; the
        # preload library strips the flag (see statx_fix.c).
        env["LD_PRELOAD"] = STATX_FIX
    for k, v in (req.get("env") or {}).items():
        if isinstance(k, str) and isinstance(v, str) and "\0" not in k + v and "=" not in k:
            env[k] = v
    return env


def set_limits(req):
    def lim(res, value):
        if value and value > 0:
            try:
                resource.setrlimit(res, (value, value))
            except (ValueError, OSError):
                pass

    cpu = int(req.get("cpu_seconds") or 0)
    if cpu > 0:
        # SIGXCPU at the soft limit, SIGKILL one second later.
        try:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        except (ValueError, OSError):
            pass
    memory = int(req.get("memory_bytes") or 0)
    if memory > 0 and req.get("language") == "javascript":
        # V8 reserves address space it never uses (its code range alone
        # needs more than 512 MiB): the heap limit is --max-old-space-size,
        # the address space gets 1 GiB on top for those reservations.
        memory += 1 << 30
    lim(resource.RLIMIT_AS, memory)
    lim(resource.RLIMIT_NPROC, int(req.get("nproc") or 0))
    lim(resource.RLIMIT_NOFILE, int(req.get("nofile") or 0))
    lim(resource.RLIMIT_FSIZE, int(req.get("fsize_bytes") or 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def write_inputs(files):
    """Write the call's input files below the working directory, as the
    sandbox user, never following a symlink (O_NOFOLLOW on every step)."""
    import base64

    for f in files:
        parts = f["path"].split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise ValueError("%s: bad path" % f["path"])
        dfd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
        try:
            for p in parts[:-1]:
                try:
                    os.mkdir(p, 0o755, dir_fd=dfd)
                except FileExistsError:
                    pass
                # This gVisor follows a symlink despite O_DIRECTORY|O_NOFOLLOW:
                # check the entry itself first (nothing else runs meanwhile).
                import stat

                if stat.S_ISLNK(os.stat(p, dir_fd=dfd, follow_symlinks=False).st_mode):
                    raise OSError(40, "%s: %s is a symbolic link" % (f["path"], p))
                try:
                    nfd = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dfd)
                except OSError as e:
                    raise OSError(e.errno, "%s: %s is not a folder" % (f["path"], p)) from None
                os.close(dfd)
                dfd = nfd
            data = base64.b64decode(f["base64"], validate=True) if "base64" in f else f["text"].encode()
            try:
                fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644, dir_fd=dfd)
            except OSError as e:
                raise OSError(e.errno, "%s: %s" % (f["path"], os.strerror(e.errno))) from None
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
        finally:
            os.close(dfd)


def add_user_site():
    """Packages installed in the session live in /work/.local: put them on
    sys.path (with their .pth files) like a non-isolated interpreter would."""
    import site

    # site computed these when the executor started, with its own HOME:
    # recompute them for the call's (the workspace).
    site.USER_BASE = None
    site.USER_SITE = None
    path = site.getusersitepackages()
    if os.path.isdir(path):
        site.addsitedir(path)
    return path


def satisfied(requirements):
    """True when every requirement (without extras) is already installed."""
    try:
        import importlib.metadata as md

        from pip._vendor.packaging.requirements import Requirement
    except ImportError:
        return False
    for text in requirements:
        try:
            req = Requirement(text)
            if req.extras or not req.specifier.contains(md.version(req.name), prereleases=True):
                return False
        except Exception:
            return False
    return True


def install_packages(requirements, user_site):
    """Install from the read-only wheel cache only: no index, no builds."""
    import importlib
    import subprocess

    if satisfied(requirements):
        return True
    cmd = [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", WHEELS, "--only-binary=:all:",
           "--user", "--break-system-packages", "--disable-pip-version-check", "--no-warn-script-location",
           "--progress-bar", "off", "--"] + list(requirements)
    try:
        os.write(3, b"R\n")  # the session's packages changed
    except OSError:
        pass
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       env=dict(os.environ, PIP_CONFIG_FILE="/dev/null"))
    if r.returncode != 0:
        os.write(2, b"package installation failed:\n" + r.stdout[-4000:])
        return False
    if os.path.isdir(user_site):
        import site

        site.addsitedir(user_site)
    importlib.invalidate_caches()
    return True


def copy_node_modules(stage):
    """Copy an installed npm tree (read-only, shared) into /work/node_modules,
    replacing the packages it holds; a scope (@x) is merged one level down."""
    import shutil

    src = os.path.join(NPM, stage, "node_modules")
    if not stage.isalnum() or not os.path.isdir(src):
        raise OSError(2, "the installed packages are not available")
    dst = os.path.join(ARGS["workdir"], "node_modules")
    marker = os.path.join(dst, ".mcp-stage")
    try:
        with open(marker) as f:
            if f.read().strip() == stage:
                return  # this very set was the last one copied in
    except OSError:
        pass
    os.makedirs(dst, exist_ok=True)

    def replace(s, d):
        if os.path.islink(d) or os.path.isfile(d):
            os.unlink(d)
        elif os.path.isdir(d):
            shutil.rmtree(d)
        if os.path.isdir(s) and not os.path.islink(s):
            shutil.copytree(s, d, symlinks=True)
        else:
            shutil.copy2(s, d, follow_symlinks=False)

    for entry in os.listdir(src):
        if entry == ".mcp-stage":
            continue
        s, d = os.path.join(src, entry), os.path.join(dst, entry)
        if entry.startswith("@") and os.path.isdir(s) and not os.path.islink(s):
            if os.path.islink(d) or (os.path.exists(d) and not os.path.isdir(d)):
                os.unlink(d)
            os.makedirs(d, exist_ok=True)
            for sub in os.listdir(s):
                replace(os.path.join(s, sub), os.path.join(d, sub))
        else:
            replace(s, d)
    if os.path.islink(marker):
        os.unlink(marker)
    with open(marker, "w") as f:
        f.write(stage + "\n")


# Blocking stdout/stderr: on pipes Node.js writes asynchronously and would
# buffer everything a chatty program prints in memory, until V8 aborts;
# blocking writes let the executor's output cap drain it instead.
JS_PREAMBLE = """import { createRequire } from 'node:module';
globalThis.require = createRequire('/work/.mcp/main.mjs');
globalThis.__filename = '/work/.mcp/main.mjs';
globalThis.__dirname = '/work';
for (const s of [process.stdout, process.stderr]) s._handle?.setBlocking?.(true);
"""


def run_javascript(req):
    """In the call's child, as the sandbox user: install the npm packages,
    then become Node.js running the code as an ES module (import and top-level
    await work; require is provided too)."""
    if req.get("npm_stage"):
        try:
            copy_node_modules(req["npm_stage"])
        except Exception as e:
            os.write(2, ("package installation failed: %s\n" % (e,)).encode())
            try:
                os.write(3, b"P\n")
            except OSError:
                pass
            os._exit(125)
    try:
        os.makedirs(".mcp", exist_ok=True)
        for name, text in (("preamble.mjs", JS_PREAMBLE), ("main.mjs", req.get("code") or "")):
            fd = os.open(os.path.join(".mcp", name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
    except OSError as e:
        os.write(2, ("cannot write the code to /work/.mcp: %s\n" % (e,)).encode())
        os._exit(126)
    heap_mb = max(32, int(req.get("memory_bytes") or (512 << 20)) >> 20)
    node = req.get("node") or "/usr/bin/node"
    argv = [node, "--max-old-space-size=%d" % heap_mb, "--import", "file:///work/.mcp/preamble.mjs",
            "/work/.mcp/main.mjs"]
    try:
        os.execve(node, argv, dict(os.environ))
    except OSError as e:
        os.write(2, ("cannot start Node.js: %s\n" % (e,)).encode())
        os._exit(127)


# A warm Node.js spare: started after a JavaScript call, as the sandbox
# user with the call's limits, it waits for the next call's code and
# environment on fd 4, then runs the code as the cold path would (the same
# files in /work/.mcp, the same argv and execArgv, so child_process.fork()
# children start alike).  Node.js's start-up (about 150 ms in gVisor) is
# then out of the call's way.  Node.js copies its environment at start:
# process.env is the call's, /proc/self/environ the spare's plain one.
JS_SPARE = """import fs from 'node:fs';
const { O_WRONLY, O_CREAT, O_TRUNC, O_NOFOLLOW } = fs.constants;
const write = (name, text) => {
  fs.mkdirSync('.mcp', { recursive: true });
  const fd = fs.openSync('.mcp/' + name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0o644);
  try { fs.writeFileSync(fd, text); } finally { fs.closeSync(fd); }
};
// The preamble now (nothing runs between this and the call): it also
// warms the module loader for the code's own import.
try {
  write('preamble.mjs', %s);
  await import('file:///work/.mcp/preamble.mjs');
} catch {}
const data = fs.readFileSync(4);
fs.closeSync(4);
if (data.length === 0) process.exit(0);
const req = JSON.parse(data);
for (const k of Object.keys(process.env)) delete process.env[k];
Object.assign(process.env, req.env);
try {
  write('main.mjs', req.code);
} catch (e) {
  process.stderr.write('cannot write the code to /work/.mcp: ' + e.message + '\\n');
  process.exit(126);
}
const heap = process.execArgv.filter((a) => a.startsWith('--max-old-space-size='));
process.execArgv.splice(0, process.execArgv.length, ...heap, '--import', 'file:///work/.mcp/preamble.mjs');
process.argv.splice(1, process.argv.length - 1, '/work/.mcp/main.mjs');
if (!globalThis.require) await import('file:///work/.mcp/preamble.mjs');
await import('file:///work/.mcp/main.mjs');
""" % json.dumps(JS_PREAMBLE)

# Variables Node.js or the loader read once at start: a call that sets one
# takes the cold path, where they apply.
JS_START_VARS = ("NODE_", "UV_", "LD_", "V8_", "SSL_", "OPENSSL_")


def js_warm_key(req):
    """The limits a Node.js spare was started with (a call with others
    takes the cold path)."""
    return tuple(int(req.get(k) or 0) for k in ("memory_bytes", "cpu_seconds", "nproc", "nofile", "fsize_bytes")) + (
        req.get("node") or "/usr/bin/node",)


def js_warm_ok(req):
    """Whether a warm Node.js spare can run this call: JavaScript without
    packages or input files (written before Node.js starts, on the cold
    path), without variables that act at Node.js's start, and with the
    output folder in place."""
    env = req.get("env") or {}
    return (req.get("language") == "javascript" and not req.get("npm_stage") and not req.get("packages")
            and not req.get("files") and not any(str(k).startswith(JS_START_VARS) for k in env)
            # output/ is there (the cold path makes it, or says why not)
            and os.path.isdir(os.path.join(ARGS["workdir"], "output")))


def start_node_spare(template, req_r, out_w, err_w, status_w):
    """In a spare's child: become the call's process for the limits of
    `template` (a previous JavaScript call), then Node.js waiting on fd 4."""
    req_fd = fcntl.fcntl(req_r, fcntl.F_DUPFD_CLOEXEC, 10)
    # The template's limits, not its variables: the call brings its own.
    enter_call(dict(template, env={}), out_w, err_w, status_w, request_fd=req_fd)
    heap_mb = max(32, int(template.get("memory_bytes") or (512 << 20)) >> 20)
    node = template.get("node") or "/usr/bin/node"
    argv = [node, "--max-old-space-size=%d" % heap_mb, "--input-type=module", "-e", JS_SPARE]
    try:
        os.execve(node, argv, dict(os.environ))
    except OSError as e:
        os.write(2, ("cannot start Node.js: %s\n" % (e,)).encode())
        os._exit(127)


def close_other_fds(lowest=4):
    """Close every fd from `lowest` on.  This gVisor lacks close_range, and
    os.closerange would make one system call per possible fd (65,532 of
    them, ~15 ms here): close only those that are open."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd >= lowest:
            try:
                os.close(fd)
            except OSError:
                pass


def enter_call(req, out_w, err_w, status_w, request_fd=None):
    """In a call's process: a session of its own; fds 0-3 /dev/null, the
    output pipes and the status pipe (and request_fd as fd 4); the call's
    limits; the sandbox user; the workspace; the call's environment."""
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if ARGS["direct"]:
            os.setpgid(0, 0)
        else:
            os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.dup2(status_w, 3)
        os.set_inheritable(3, False)
        if request_fd is not None:
            os.dup2(request_fd, 4)  # inheritable: Node.js reads it
        close_other_fds(5 if request_fd is not None else 4)
        set_limits(req)
        if os.getuid() == 0 and not ARGS["direct"]:
            os.setgroups([])
            os.setgid(ARGS["gid"])
            os.setuid(ARGS["uid"])
            # The call's own /proc/self must stay readable to it.
            set_dumpable(True)
        os.chdir(ARGS["workdir"])
        os.umask(0o022)
        os.environ.clear()
        os.environ.update(base_env(req))
    except BaseException as e:  # the call cannot run; say why on its stderr
        os.write(err_w if err_w > 2 else 2, ("sandbox: cannot start the call: %r\n" % (e,)).encode())
        os._exit(126)


def run_child(req, out_w, err_w, status_w):
    """In the forked child: become the sandbox user and run the code."""
    code_status = 1
    enter_call(req, out_w, err_w, status_w)
    try:
        if not os.path.isdir("output"):
            os.makedirs("output", exist_ok=True)
        write_inputs(req.get("files") or [])
    except Exception as e:  # the code does not run; say which file failed
        try:
            os.write(3, b"I\n")
        except OSError:
            pass
        os.write(2, ("cannot write the input files: %s\n" % (e,)).encode())
        os._exit(126)

    if req.get("language") == "javascript":
        run_javascript(req)  # does not return

    user_site = add_user_site()
    if req.get("packages") and not install_packages(req["packages"], user_site):
        try:
            os.write(3, b"P\n")
        except OSError:
            pass
        os._exit(125)

    # Exit handlers the executor's own imports registered (pandas and
    # friends) are not the call's: running them at every call's end cost
    # tens of ms.  Logging's flush-and-close is kept for the call's logs.
    import atexit

    atexit._clear()
    if "logging" in sys.modules:
        atexit.register(sys.modules["logging"].shutdown)
    import builtins
    import linecache
    import types

    # The streams warm_up() opened on fds 0-2 now write to the call's pipes.
    sys.stdin = WARM.get("stdin") or open(0, "r", closefd=False)
    sys.stdout = WARM.get("stdout") or open(1, "w", encoding="utf-8", errors="backslashreplace", buffering=1,
                                            closefd=False)
    sys.stderr = WARM.get("stderr") or open(2, "w", encoding="utf-8", errors="backslashreplace", buffering=1,
                                            closefd=False)
    sys.argv = ["-c"]
    if "" not in sys.path:
        sys.path.insert(0, "")
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    source = req.get("code") or ""
    linecache.cache["<string>"] = (len(source), None, source.splitlines(True), "<string>")
    try:
        exec(compile(source, "<string>", "exec"), main.__dict__)
        code_status = 0
    except SystemExit as e:
        if e.code is None:
            code_status = 0
        elif isinstance(e.code, int):
            code_status = e.code & 0xFF
        else:
            try:
                print(e.code, file=sys.stderr)
            except BaseException:
                pass
            code_status = 1
    except BaseException as e:
        if isinstance(e, MemoryError):
            try:
                os.write(3, b"M\n")
            except OSError:
                pass
        try:
            import traceback

            # Drop this file's frame: the traceback starts in the user's code.
            tb = e.__traceback__.tb_next if e.__traceback__ is not None else None
            traceback.print_exception(type(e), e, tb)
        except BaseException:
            pass
        code_status = 1
    try:
        import atexit
        import threading

        threading._shutdown()
        atexit._run_exitfuncs()
    except BaseException:
        pass
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:
            pass
    report_learned()
    report_done(code_status)
    os._exit(code_status)


def report_done(code_status):
    """Tell the executor the call is over before exiting: tearing down a
    big address space (numpy, pandas) takes gVisor tens of ms, and the
    result need not wait for it.  The executor still kills every process."""
    try:
        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_ms = int((me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime) * 1000)
        os.write(3, b"X %d %d %d\n" % (code_status, cpu_ms, max(me.ru_maxrss, kids.ru_maxrss)))
    except OSError:
        pass


def report_learned():
    """Tell the executor which template modules this call imported (from the
    system's /usr, not the session's own packages): it imports them itself
    before the next fork, so later calls find them loaded."""
    names = []
    for name in filter(None, ARGS["learn"].split(",")):
        mod = sys.modules.get(name)
        if mod is not None and (getattr(mod, "__file__", None) or "").startswith("/usr/"):
            names.append(name)
    if names:
        try:
            os.write(3, ("L %s\n" % " ".join(names)).encode())
        except OSError:
            pass


def kill_everything(pid):
    """End every process the call started, except this one."""
    if os.getpid() == 1 and not ARGS["direct"]:
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
    while True:
        try:
            p, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if p == 0:
            return


class Stream:
    def __init__(self, fd, kind, limit):
        self.fd = fd
        self.kind = kind
        self.limit = limit
        self.sent = 0
        self.total = 0
        self.tail = b""  # the last bytes, to recognise a V8 heap overflow

    def pump(self):
        """Forward what is readable; False at EOF."""
        try:
            data = os.read(self.fd, CHUNK)
        except InterruptedError:
            return True
        except OSError:
            return False
        if not data:
            return False
        self.total += len(data)
        self.tail = (self.tail + data)[-4096:]
        room = self.limit - self.sent
        if room > 0:
            part = data[:room]
            self.sent += len(part)
            write_frame(self.kind, part)
        return True


WARM = {}


def warm_up():
    """In a spare, before its request: walk the path a call takes through
    the interpreter (the environment, the standard streams, the main module,
    compiling, importing what is preloaded).  Each page shared with the
    executor costs gVisor a copy-on-write fault the first time it is
    written, and Python writes reference counts everywhere it reads: taking
    those faults now keeps them out of the call (tens of ms with pandas)."""
    try:
        import builtins
        import linecache
        import types

        os.environ.clear()
        os.environ.update(base_env({}))
        WARM["stdin"] = open(0, "r", closefd=False)
        WARM["stdout"] = open(1, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False)
        WARM["stderr"] = open(2, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False)
        main = types.ModuleType("__main__")
        main.__builtins__ = builtins
        linecache.getlines("<string>")
        names = sorted(PRELOADED) + ["sys", "os"]
        exec(compile("import %s\nprint\n" % ", ".join(names), "<warm>", "exec"), main.__dict__)
        for name in filter(None, ARGS["learn"].split(",")):
            sys.modules.get(name)
        # The commonest paths through preloaded template modules, too:
        # array arithmetic and reductions, a frame, a group-by, formatting.
        if "numpy" in PRELOADED:
            np = sys.modules["numpy"]
            a = np.arange(16, dtype=float).reshape(4, 4)
            (a @ a).sum(), a.mean(axis=0), np.sqrt(a) % 3, repr(a)
        if "pandas" in PRELOADED:
            pd = sys.modules["pandas"]
            df = pd.DataFrame({"a": list(range(8)), "b": [i % 3 for i in range(8)]})
            df.groupby("b")["a"].sum().sum(), df.describe(), str(df.head())
    except Exception:
        pass


class Spare:
    """A child forked ahead of the next call.  In gVisor a fork costs
    15-20 ms (more with numpy loaded): forking right after a call moves that
    cost out of the next call's way.  The spare waits for its request on a
    pipe; everything else it does (becoming the sandbox user, limits, input
    files) happens once the request is there."""

    def __init__(self, js_template=None):
        """js_template: a JavaScript call whose limits a warm Node.js spare
        takes (None: a Python child, which serves any call)."""
        self.js_key = js_warm_key(js_template) if js_template is not None else None
        req_r, self.req_w = os.pipe2(os.O_CLOEXEC)
        self.out_r, out_w = os.pipe2(os.O_CLOEXEC)
        self.err_r, err_w = os.pipe2(os.O_CLOEXEC)
        self.st_r, st_w = os.pipe2(os.O_CLOEXEC)
        self.pid = os.fork()
        if self.pid == 0:
            # Not a holder of the executor's frame pipes: if the executor
            # dies, the supervisor must see their end, and this spare its own.
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 0)
            os.dup2(devnull, 1)
            for fd in (self.req_w, self.out_r, self.err_r, self.st_r, devnull):
                os.close(fd)
            if js_template is not None:
                start_node_spare(js_template, req_r, out_w, err_w, st_w)  # does not return
            warm_up()
            data = bytearray()
            while True:
                chunk = os.read(req_r, CHUNK)
                if not chunk:
                    break
                data += chunk
            if not data:
                os._exit(0)
            run_child(json.loads(data), out_w, err_w, st_w)
            os._exit(127)
        for fd in (req_r, out_w, err_w, st_w):
            os.close(fd)

    def serves(self, req):
        """Whether this spare can run req."""
        return self.js_key is None or (js_warm_ok(req) and js_warm_key(req) == self.js_key)

    def alive(self):
        try:
            return os.waitpid(self.pid, os.WNOHANG)[0] == 0
        except ChildProcessError:
            return False

    def kill(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass

    def discard(self):
        for fd in (self.req_w, self.out_r, self.err_r, self.st_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.kill()
        try:
            os.waitpid(self.pid, 0)
        except OSError:
            pass

    def start(self, req, payload):
        if self.js_key is not None:
            # The warm Node.js spare wants only the code and the environment.
            payload = json.dumps({"code": req.get("code") or "", "env": base_env(req)}).encode()
        view = memoryview(payload)
        try:
            while view:
                view = view[os.write(self.req_w, view):]
        finally:
            os.close(self.req_w)


SPARE = []  # a Python child, and a warm Node.js once the session ran JavaScript
JS_TEMPLATE = []  # the session's last JavaScript call: the Node.js spare's limits


def reap_leftovers(keep):
    """Before a call: any process but PID 1 and the spares (`keep`) is a
    leftover of an earlier call, killed at its end but not yet gone (gVisor
    tears a process down in its own time), or an orphan that became our
    child after that call's reap.  Kill and reap them (within a second), so
    that a call never sees one."""
    if os.getpid() != 1 or ARGS["direct"]:
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


def take_spare(req):
    """The spare for req: the warm Node.js if it can serve req, else the
    Python child (which serves any call), else a Python child forked now.
    The other spare goes first: while a call runs, the sandbox holds PID 1
    and the call's processes, nothing else."""
    reap_leftovers({spare.pid for spare in SPARE})
    usable = [spare for spare in SPARE if spare.serves(req) and spare.alive()]
    chosen = next((spare for spare in usable if spare.js_key is not None), usable[0] if usable else None)
    if chosen is not None:
        SPARE.remove(chosen)
    for spare in SPARE:
        spare.kill()  # reaped by drop_spares() once the call has its request
    return chosen or Spare()


def drop_spares():
    """Reap the spares take_spare() killed."""
    while SPARE:
        SPARE.pop().discard()


def prepare_spare():
    """Fork the next call's spares: a Python child, and a warm Node.js
    (with the last JavaScript call's limits) once the session used it."""
    # Everything the executor holds goes to the garbage collector's
    # permanent generation: the call's collections then never walk (and
    # so never copy-on-write) the preloaded modules' objects, which in
    # gVisor costs tens of ms with numpy and pandas loaded.
    import gc

    gc.freeze()
    for template in [None] + JS_TEMPLATE:
        if not any((spare.js_key is None) == (template is None) for spare in SPARE):
            try:
                SPARE.append(Spare(template))
            except OSError:
                pass


def read_status(fd, buf):
    """Append what the child wrote on its status pipe (non-blocking)."""
    while len(buf) < (1 << 20):
        try:
            data = os.read(fd, 65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return
        if not data:
            return
        buf += data


def parse_done(buf):
    """The child's "X code cpu_ms max_rss_kb" line, if it has come."""
    for line in bytes(buf).split(b"\n")[:-1]:
        if line.startswith(b"X "):
            try:
                code, cpu, rss = (int(x) for x in line[2:].split())
                return code & 0xFF, max(cpu, 0), max(rss, 0)
            except ValueError:
                return None
    return None


def run_call(req, payload, reader, wake_r):
    t0 = time.monotonic()
    timeout = max(0.1, int(req.get("timeout_ms") or 60000) / 1000.0)
    limit = int(req.get("output_limit") or (1 << 20))
    spare = take_spare(req)
    if req.get("language") == "javascript":
        JS_TEMPLATE[:] = [req]
    pid, out_r, err_r, st_r = spare.pid, spare.out_r, spare.err_r, spare.st_r
    try:
        spare.start(req, payload)
    except OSError:
        pass  # it died: the wait below sees that
    drop_spares()
    streams = {out_r: Stream(out_r, b"O", limit), err_r: Stream(err_r, b"E", limit)}
    open_fds = set(streams)
    os.set_blocking(st_r, False)
    st_buf = bytearray()
    deadline = t0 + timeout
    status = None
    rusage = None
    reported = None  # (cpu_ms, max_rss_kb) from the child's "X" line
    timed_out = cancelled = False
    killed_at = None
    while True:
        if status is None and reported is None:
            done = parse_done(st_buf)
            if done is not None:
                # The child said it is done: its output is written; it may
                # still be exiting.  Nothing the call started may outlive it.
                status, reported = done[0] << 8, done[1:]
                kill_everything(pid)
                killed_at = time.monotonic()
        if status is None:
            try:
                p, st, ru = os.wait4(pid, os.WNOHANG)
            except ChildProcessError:
                p, st, ru = pid, 0, None
            if p == pid:
                status, rusage = st, ru
                # The call is over: nothing it started may outlive it.
                kill_everything(pid)
                killed_at = time.monotonic()
        now = time.monotonic()
        if status is not None and (not open_fds or now - killed_at > DRAIN_MS / 1000.0):
            break
        if status is None and now >= deadline and not timed_out:
            timed_out = True
            kill_everything(pid)
        wait = 0.05 if status is not None else max(0.0, min(deadline - now, 1.0))
        fds = list(open_fds) + [wake_r, 0] + ([st_r] if status is None else [])
        try:
            ready, _, _ = select.select(fds, [], [], wait)
        except InterruptedError:
            continue
        for fd in ready:
            if fd == wake_r:
                try:
                    os.read(wake_r, 4096)
                except OSError:
                    pass
            elif fd == st_r:
                read_status(st_r, st_buf)
            elif fd == 0:
                if not reader.fill():
                    kill_everything(pid)
                    os._exit(0)
                while True:
                    frame = reader.next()
                    if frame is None:
                        break
                    if frame[0] == b"K" and status is None:
                        cancelled = True
                        kill_everything(pid)
            elif not streams[fd].pump():
                open_fds.discard(fd)
                os.close(fd)
    for fd in open_fds:
        os.close(fd)
    reap_others()
    memory_error = input_error = install_error = installed = False
    # Node.js reports its heap limit on stderr, then aborts.
    if req.get("language") == "javascript" and (
            b"heap out of memory" in streams[err_r].tail or b"Array buffer allocation failed" in streams[err_r].tail):
        memory_error = True  # V8's heap limit, or a Buffer beyond the address-space limit
    learned = []
    read_status(st_r, st_buf)
    for line in bytes(st_buf).split(b"\n"):
        memory_error = memory_error or line == b"M"
        input_error = input_error or line == b"I"
        install_error = install_error or line == b"P"
        installed = installed or line == b"R"
        if line.startswith(b"L "):
            learned += line[2:].decode("ascii", "replace").split()
    os.close(st_r)
    workspace_full = False
    try:
        vfs = os.statvfs(ARGS["workdir"])
        # less than 2% left (or no inode): the next write will likely fail
        workspace_full = vfs.f_bavail * 50 < vfs.f_blocks or vfs.f_favail == 0
    except OSError:
        pass
    result = {
        "input_error": input_error,
        "install_error": install_error,
        "workspace_full": workspace_full,
        "duration_ms": int((time.monotonic() - t0) * 1000),
        "timed_out": timed_out,
        "cancelled": cancelled,
        "memory_error": memory_error,
        "stdout_bytes": streams[out_r].total,
        "stderr_bytes": streams[err_r].total,
        "truncated": streams[out_r].total > limit or streams[err_r].total > limit,
    }
    if os.WIFEXITED(status):
        result["exit_code"] = os.WEXITSTATUS(status)
    elif os.WIFSIGNALED(status):
        result["exit_code"] = 128 + os.WTERMSIG(status)
        result["signal"] = os.WTERMSIG(status)
        # RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL at the hard one.
        cpu_limit = int(req.get("cpu_seconds") or 0)
        used = (rusage.ru_utime + rusage.ru_stime) if rusage is not None else 0
        result["cpu_exceeded"] = os.WTERMSIG(status) == signal.SIGXCPU or (
            os.WTERMSIG(status) == signal.SIGKILL and not timed_out and not cancelled
            and cpu_limit > 0 and used >= cpu_limit - 0.1)
    else:
        result["exit_code"] = 255
    if rusage is not None:
        result["cpu_ms"] = int((rusage.ru_utime + rusage.ru_stime) * 1000)
        result["max_rss_kb"] = rusage.ru_maxrss
    elif reported is not None:
        result["cpu_ms"], result["max_rss_kb"] = reported
    write_frame(b"D", json.dumps(result).encode())
    return learned, installed


def set_dumpable(on):
    """PR_SET_DUMPABLE: while 0, /proc/<pid> of this process belongs to root
    and is closed to the calls' user (its environ, maps, fds)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 1 if on else 0, 0, 0, 0)
    except Exception:
        pass


def main():
    parse_args(sys.argv[1:])
    # What every call's child uses: imported once here, not in each call.
    import atexit  # noqa: F401
    import builtins  # noqa: F401
    import linecache  # noqa: F401
    import site  # noqa: F401
    import threading  # noqa: F401
    import traceback  # noqa: F401
    import types  # noqa: F401

    if not ARGS["direct"]:
        set_dumpable(False)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    wake_r, wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    for name in filter(None, (m.strip() for m in ARGS["preload"].split(","))):
        try:
            __import__(name)
            PRELOADED.add(name)
        except Exception:
            pass
    prepare_spare()
    write_frame(b"Y", json.dumps({"python": sys.version.split()[0], "preloaded": sorted(PRELOADED)}).encode())
    reader = FrameReader(0)
    while True:
        frame = reader.next()
        if frame is None:
            if not reader.fill():
                return
            continue
        kind, payload = frame
        if kind != b"R":
            continue
        try:
            req = json.loads(payload)
        except ValueError:
            write_frame(b"D", json.dumps({"exit_code": 126, "error": "bad request"}).encode())
            continue
        # From here on a lost sandbox is the call's doing (or its fate);
        # before it, the supervisor may hand the call to a new sandbox.
        write_frame(b"A", b"")
        learned, installed = run_call(req, payload, reader, wake_r)
        if installed and PRELOADED:
            # A preloaded template module could shadow what was just
            # installed: start over as a fresh interpreter (still PID 1).
            os.execv(sys.executable, sys.orig_argv)
        for name in learned:
            if name not in PRELOADED and name in ARGS["learn"].split(","):
                try:
                    __import__(name)
                    PRELOADED.add(name)
                except Exception:
                    pass
        # The next call's child is forked once this call's answer has had
        # time to leave: a fork keeps gVisor busy for 15-40 ms, and on a
        # small machine that delays the answer on its way out.  A request
        # that comes first is served at once (forking on demand).
        if not reader.buf and not select.select([0], [], [], SPARE_DELAY)[0]:
            prepare_spare()  # after the imports: the spare has them too


if __name__ == "__main__":
    main()
