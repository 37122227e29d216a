"""Packages, in a call's child as the sandbox user: pip installs the wheels
the host resolved for this call (no index, no builds) into the workspace's
user site, and the npm tree the host installed for it is copied into its
node_modules.  Both come from the call's own folder below /opt/mcp/packages
(the session's, read-only; no other session's packages are there).  When
the host resolved nothing (the session had installed these before) and the
workspace no longer has them, the child says so (packages-missing) and the
host resolves them and makes the call again.
"""

import os
import re
import sys

from . import status

PACKAGES = "/opt/mcp/packages"


def call_folder(req):
    """/opt/mcp/packages/<the call's folder>, or None when the host resolved
    nothing for this call."""
    name = req.get("package_dir")
    if not isinstance(name, str) or not re.fullmatch(r"c-[0-9a-f]{16}", name):
        return None
    return os.path.join(PACKAGES, name)


def missing():
    """The packages are not in the workspace and the host fetched none: the
    code does not run; the host resolves them and calls again."""
    status.write(status.PACKAGES_MISSING)
    status.write(status.INSTALL_FAILED)
    os.write(2, b"package installation failed: the packages are no longer in the workspace\n")
    os._exit(125)


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


def install_packages(requirements, user_site, wheels):
    """Install from the wheels the host resolved for this call (the folder
    `wheels`, None when it resolved none): no index, no builds."""
    import importlib
    import subprocess

    if satisfied(requirements):
        return True
    if wheels is None:
        missing()
    cmd = [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", wheels, "--only-binary=:all:",
           "--user", "--break-system-packages", "--disable-pip-version-check", "--no-warn-script-location",
           "--progress-bar", "off", "--"] + list(requirements)
    status.write(status.PACKAGES_CHANGED)
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


def copy_node_modules(workdir, stage, folder):
    """Copy the npm tree the host installed for this call (folder: its
    read-only folder, None when it installed none) into the workspace's
    node_modules, replacing the packages it holds; a scope (@x) is merged
    one level down.  stage names the set of specs."""
    dst = os.path.join(workdir, "node_modules")
    marker = os.path.join(dst, ".mcp-stage")
    try:
        with open(marker) as f:
            if f.read().strip() == stage and folder is None:
                return  # this very set was the last one copied in
    except OSError:
        pass
    if folder is None:
        missing()
    src = os.path.join(folder, "node_modules")
    if not stage.isalnum() or not os.path.isdir(src):
        raise OSError(2, "the installed packages are not available")
    os.makedirs(dst, exist_ok=True)
    for entry in os.listdir(src):
        if entry == ".mcp-stage":
            continue
        s, d = os.path.join(src, entry), os.path.join(dst, entry)
        if entry.startswith("@") and os.path.isdir(s) and not os.path.islink(s):
            if os.path.islink(d) or (os.path.exists(d) and not os.path.isdir(d)):
                os.unlink(d)
            os.makedirs(d, exist_ok=True)
            for sub in os.listdir(s):
                replace_entry(os.path.join(s, sub), os.path.join(d, sub))
        else:
            replace_entry(s, d)
    if os.path.islink(marker):
        os.unlink(marker)
    with open(marker, "w") as f:
        f.write(stage + "\n")


def replace_entry(s, d):
    """Replace d (whatever it is; a symlink is not followed) with a copy of s."""
    import shutil

    if os.path.islink(d) or os.path.isfile(d):
        os.unlink(d)
    elif os.path.isdir(d):
        shutil.rmtree(d)
    if os.path.isdir(s) and not os.path.islink(s):
        shutil.copytree(s, d, symlinks=True)
    else:
        shutil.copy2(s, d, follow_symlinks=False)
