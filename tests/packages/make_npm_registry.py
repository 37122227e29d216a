#!/usr/bin/env python3
"""Build a tiny npm registry (static files) for the JavaScript package tests:

  make_npm_registry.py OUT BASE_URL     then serve OUT so that BASE_URL/ is OUT/npm/
  make_npm_registry.py --publish OUT BASE_URL NAME VERSION
                                        add a version of NAME (CommonJS, exports {value:
                                        'NAME VERSION'}) and make it `latest`: the tests
                                        publish while the registry is served

Packages (tarballs made here, like `npm pack` would):
  mcp-test-left 1.0.0, 2.0.0   CommonJS, exports {value}
  mcp-test-right 1.0.0         depends on mcp-test-left@^2 (dependency resolution)
  mcp-test-esm 1.0.0           an ES module ("type": "module")
  mcp-test-script 1.0.0        has install/postinstall scripts that must never run
"""
import base64
import hashlib
import io
import json
import os
import sys
import tarfile


def tarball(files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo("package/" + name)
            info.size = len(data)
            info.mode = 0o644
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def add_version(reg, base, doc, name, version, files, deps, extra):
    """Write the tarball of one version and enter it into doc."""
    manifest = {"name": name, "version": version, "main": "index.js", "dependencies": deps}
    manifest.update(extra)
    files = dict(files, **{"package.json": json.dumps(manifest, indent=1)})
    data = tarball(files)
    fname = "%s-%s.tgz" % (name, version)
    with open(os.path.join(reg, "-tarballs", fname), "wb") as f:
        f.write(data)
    entry = dict(manifest)
    entry["dist"] = {
        "tarball": "%s/-tarballs/%s" % (base, fname),
        "shasum": hashlib.sha1(data).hexdigest(),
        "integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode(),
    }
    doc["versions"][version] = entry


def write_doc(reg, doc):
    """Replace the packument atomically (the registry is being served)."""
    path = os.path.join(reg, doc["name"])
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f)
    os.replace(path + ".tmp", path)


def publish(out, base, name, version):
    reg = os.path.join(out, "npm")
    os.makedirs(os.path.join(reg, "-tarballs"), exist_ok=True)
    try:
        with open(os.path.join(reg, name)) as f:
            doc = json.load(f)
    except FileNotFoundError:
        doc = {"name": name, "dist-tags": {}, "versions": {}}
    add_version(reg, base, doc, name, version,
                {"index.js": "module.exports = { value: %s };\n" % json.dumps("%s %s" % (name, version))}, {}, {})
    doc["dist-tags"]["latest"] = version
    write_doc(reg, doc)


def main():
    if sys.argv[1] == "--publish":
        publish(sys.argv[2], sys.argv[3].rstrip("/"), sys.argv[4], sys.argv[5])
        return
    out, base = sys.argv[1], sys.argv[2].rstrip("/")
    reg = os.path.join(out, "npm")
    tars = os.path.join(reg, "-tarballs")
    os.makedirs(tars, exist_ok=True)
    script = ("node -e \"require('fs').writeFileSync(require('os').tmpdir()+'/mcp-npm-script-ran','x')\"")
    packages = {
        "mcp-test-left": {
            "1.0.0": ({"index.js": "module.exports = { value: 'left 1.0.0' };\n"}, {}, {}),
            "2.0.0": ({"index.js": "module.exports = { value: 'left 2.0.0' };\n"}, {}, {}),
        },
        "mcp-test-right": {
            "1.0.0": ({"index.js": "const left = require('mcp-test-left');\n"
                                   "module.exports = { value: 'right on ' + left.value };\n"},
                      {"mcp-test-left": "^2.0.0"}, {}),
        },
        "mcp-test-esm": {
            "1.0.0": ({"index.js": "export const value = 'esm 1.0.0';\nexport default value;\n"}, {},
                      {"type": "module"}),
        },
        "mcp-test-script": {
            "1.0.0": ({"index.js": "module.exports = { value: 'script package' };\n"}, {},
                      {"scripts": {"preinstall": script, "install": script, "postinstall": script}}),
        },
    }
    for name, versions in packages.items():
        doc = {"name": name, "dist-tags": {"latest": sorted(versions)[-1]}, "versions": {}}
        for version, (files, deps, extra) in versions.items():
            add_version(reg, base, doc, name, version, files, deps, extra)
        write_doc(reg, doc)


if __name__ == "__main__":
    main()
