"""A call's child, from its request to the code: it enters the call (the
sandbox user, the call's limits), makes the output folder, writes the
call's input files, then runs the code as Python or becomes Node.js.
"""

import os

from . import status
from .limits import enter_call
from .node_call import run_javascript
from .packages import add_user_site, call_folder, copy_node_modules, install_packages
from .python_call import run_python


def run_child(st, req, out_w, err_w, status_w):
    """In the forked child: become the sandbox user and run the code (does
    not return)."""
    enter_call(st.args, req, out_w, err_w, status_w)
    try:
        if not os.path.isdir("output"):
            os.makedirs("output", exist_ok=True)
        write_inputs(req.get("files") or [])
    except Exception as e:  # the code does not run; say which file failed
        status.write(status.INPUT_FAILED)
        os.write(2, ("cannot write the input files: %s\n" % (e,)).encode())
        os._exit(126)
    if req.get("prepare_only"):
        prepare(st, req)  # a persistent cell's files and packages (persistent.py)
    if req.get("language") == "javascript":
        run_javascript(st.args, req)
    run_python(st, req)


def prepare(st, req):
    """Install the call's packages as run_python and run_javascript would,
    then exit without running any code (does not return)."""
    if req.get("language") == "javascript":
        if req.get("npm_stage"):
            try:
                copy_node_modules(st.args.workdir, req["npm_stage"], call_folder(req))
            except Exception as e:
                os.write(2, ("package installation failed: %s\n" % (e,)).encode())
                status.write(status.INSTALL_FAILED)
                os._exit(125)
        os._exit(0)
    user_site = add_user_site()
    if req.get("packages") and not install_packages(req["packages"], user_site, call_folder(req)):
        status.write(status.INSTALL_FAILED)
        os._exit(125)
    os._exit(0)


def write_inputs(files):
    """Write the call's input files below the working directory, as the
    sandbox user, never following a symlink (O_NOFOLLOW on every step)."""
    for f in files:
        parts = f["path"].split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise ValueError("%s: bad path" % f["path"])
        dfd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
        try:
            for p in parts[:-1]:
                dfd = enter_folder(dfd, f["path"], p)
            write_input(dfd, f, parts[-1])
        finally:
            os.close(dfd)


def enter_folder(dfd, path, name):
    """The folder name of dfd (made when missing), opened; dfd is closed.
    path: the input file's, for messages."""
    try:
        os.mkdir(name, 0o755, dir_fd=dfd)
    except FileExistsError:
        pass
    # This gVisor follows a symlink despite O_DIRECTORY|O_NOFOLLOW:
    # check the entry itself first (nothing else runs meanwhile).
    import stat

    if stat.S_ISLNK(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode):
        raise OSError(40, "%s: %s is a symbolic link" % (path, name))
    try:
        nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dfd)
    except OSError as e:
        raise OSError(e.errno, "%s: %s is not a folder" % (path, name)) from None
    os.close(dfd)
    return nfd


def write_input(dfd, f, name):
    """Write one input file, f (text or base64), as name in folder dfd."""
    import base64

    data = base64.b64decode(f["base64"], validate=True) if "base64" in f else f["text"].encode()
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644, dir_fd=dfd)
    except OSError as e:
        raise OSError(e.errno, "%s: %s" % (f["path"], os.strerror(e.errno))) from None
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
