#!/usr/bin/env python3
"""Build the small wheels the package tests install, and a PEP 503 index
for them, into OUT (PyPI is not reachable from the test machines).

  make_index.py OUT        then serve OUT over HTTP: OUT/simple is the index

Packages:
  mcp-test-alpha 1.0, 2.0   pure Python, alpha.VALUE is the version
  mcp-test-beta 1.0         depends on mcp-test-alpha>=2 (dependency resolution)
  mcp-test-alpha 3.0        yanked (PEP 592): only an exact pin gets it, a bare name never
  mcp-test-sdist 1.0        only a source archive: must be refused (wheels only)
  mcp-test-big 1.0          1 MiB that does not compress (the package cache's size cap)
"""
import base64
import hashlib
import io
import os
import sys
import tarfile
import zipfile


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def wheel(out, dist, version, module, body, requires=(), extra=None):
    files = {
        "%s/__init__.py" % module: body.encode(),
    }
    files.update(extra or {})
    info = "%s-%s.dist-info" % (dist.replace("-", "_"), version)
    meta = "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (dist, version)
    meta += "".join("Requires-Dist: %s\n" % r for r in requires)
    files[info + "/METADATA"] = meta.encode()
    files[info + "/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: mcp-sandbox-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = [record_line(n, d) for n, d in files.items()] + [info + "/RECORD,,"]
    files[info + "/RECORD"] = ("\n".join(record) + "\n").encode()
    name = "%s-%s-py3-none-any.whl" % (dist.replace("-", "_"), version)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in files.items():
            z.writestr(n, d)
    data = buf.getvalue()
    with open(os.path.join(out, "files", name), "wb") as f:
        f.write(data)
    return dist, name, data


def sdist(out, dist, version):
    name = "%s-%s.tar.gz" % (dist, version)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        setup = b"raise SystemExit('a build script ran: the server must never run these')\n"
        ti = tarfile.TarInfo("%s-%s/setup.py" % (dist, version))
        ti.size = len(setup)
        t.addfile(ti, io.BytesIO(setup))
    data = buf.getvalue()
    with open(os.path.join(out, "files", name), "wb") as f:
        f.write(data)
    return dist, name, data


def main():
    out = sys.argv[1]
    os.makedirs(os.path.join(out, "files"), exist_ok=True)
    made = [
        wheel(out, "mcp-test-alpha", "1.0", "mcp_test_alpha", "VALUE = '1.0'\n"),
        wheel(out, "mcp-test-alpha", "2.0", "mcp_test_alpha", "VALUE = '2.0'\n"),
        wheel(out, "mcp-test-beta", "1.0", "mcp_test_beta",
              "import mcp_test_alpha\nVALUE = 'beta on alpha ' + mcp_test_alpha.VALUE\n",
              requires=["mcp-test-alpha>=2"]),
        wheel(out, "mcp-test-alpha", "3.0", "mcp_test_alpha", "VALUE = '3.0'\n"),
        sdist(out, "mcp-test-sdist", "1.0"),
        wheel(out, "mcp-test-big", "1.0", "mcp_test_big", "VALUE = 'big'\n",
              extra={"mcp_test_big/data.bin": os.urandom(1 << 20)}),
    ]
    yanked = {"mcp_test_alpha-3.0-py3-none-any.whl"}
    by_dist = {}
    for dist, name, data in made:
        by_dist.setdefault(dist, []).append((name, hashlib.sha256(data).hexdigest()))
    os.makedirs(os.path.join(out, "simple"), exist_ok=True)
    with open(os.path.join(out, "simple", "index.html"), "w") as f:
        f.write("<html><body>%s</body></html>\n" % "".join('<a href="%s/">%s</a>' % (d, d) for d in by_dist))
    for dist, files in by_dist.items():
        d = os.path.join(out, "simple", dist)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "index.html"), "w") as f:
            links = "".join('<a href="../../files/%s#sha256=%s"%s>%s</a><br>\n' %
                            (n, h, ' data-yanked="withdrawn"' if n in yanked else "", n) for n, h in files)
            f.write("<html><body>\n%s</body></html>\n" % links)


if __name__ == "__main__":
    main()
