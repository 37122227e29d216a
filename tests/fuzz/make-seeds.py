#!/usr/bin/env python3
"""Write the seed corpus of the fuzz harnesses: tests/fuzz/corpus/<harness>/.

    tests/fuzz/make-seeds.py [CORPUS_DIR]

Seeds are small, hand-written inputs that reach each branch the harness
exercises (tests/fuzz/README.md says what each input format means).  Files
are named by what they hold; running the script again rewrites them (inputs
that libFuzzer found and that were added by hand are kept).
"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus")


def write(harness, name, data):
    d = os.path.join(OUT, harness)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def rpc(method, params=None, id=1, **extra):
    m = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        m["params"] = params
    m.update(extra)
    return json.dumps(m)


def call(args, **params):
    p = {"name": "execute_python", "arguments": args}
    p.update(params)
    return rpc("tools/call", p)


# ---- request: header lines, a blank line, the body ----

def req(name, body, **headers):
    head = "".join(f"{k.replace('_', '-')}: {v}\n" for k, v in headers.items())
    data = (head + "\n" + body) if headers else ("\n\n" + body if body.startswith("\n") else body)
    write("request", name, data)


INIT = rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                          "clientInfo": {"name": "seed", "version": "1"}})
req("initialize", INIT, session="")
req("initialize-old-version", rpc("initialize", {"protocolVersion": "2024-01-01"}), session="")
req("initialize-bad-params", rpc("initialize", {"protocolVersion": 7}), session="")
req("initialize-params-array", rpc("initialize", [1]), session="")
req("initialize-sse-only", INIT, session="", accept="text/event-stream")
req("ping", rpc("ping"))
req("ping-string-id", rpc("ping", id="abc"))
req("ping-null-params", rpc("ping", None) .replace('"method": "ping"', '"method": "ping", "params": null'))
req("tools-list", rpc("tools/list", {}))
req("tools-list-sse-only", rpc("tools/list"), accept="text/event-stream")
req("tools-list-cursor", rpc("tools/list", {"cursor": "x"}))
req("tools-call", call({"code": "print(1)"}))
req("tools-call-progress", call({"code": "print(1)", "timeout_seconds": 5}, _meta={"progressToken": "p1"}))
req("tools-call-json-only", call({"code": "print(1)"}), accept="application/json")
req("tools-call-unknown-tool", rpc("tools/call", {"name": "rm", "arguments": {}}))
req("tools-call-no-name", rpc("tools/call", {"arguments": {}}))
req("tools-call-args-array", call([1, 2]))
req("tools-call-bad-timeout", call({"code": "1", "timeout_seconds": -1}))
req("tools-call-huge-timeout", call({"code": "1", "timeout_seconds": 1e308}))
req("tools-call-env", call({"code": "1", "env_variables": {"A": "b", "1X": "c"}}))
req("tools-call-files", call({"code": "1", "files": [{"path": "a/b.txt", "text": "x"},
                                                    {"path": "c.bin", "base64": "AAEC"}]}))
req("tools-call-files-dotdot", call({"code": "1", "files": [{"path": "../x", "text": "x"}]}))
req("tools-call-packages", call({"code": "1", "packages": ["requests>=2.31", "numpy[extra] (==1.0)"]}))
req("tools-call-packages-bad", call({"code": "1", "packages": ["-r x", "a@b"]}))
req("tools-call-unknown-arg", call({"code": "1", "shell": True}))
req("tools-call-javascript", rpc("tools/call", {"name": "execute_javascript",
                                               "arguments": {"code": "console.log(1)", "packages": ["lodash@4"]}}))
req("tools-call-javascript-bad", rpc("tools/call", {"name": "execute_javascript",
                                                   "arguments": {"code": 1, "packages": ["git+ssh://x", "-g"]}}))
req("resources-list", rpc("resources/list", {}))
req("resources-read-png", rpc("resources/read", {"uri": "file:///work/output/plot.png"}))
req("resources-read-csv", rpc("resources/read", {"uri": "file:///work/output/data.csv"}))
req("resources-read-encoded", rpc("resources/read", {"uri": "file:///work/output/sub/bad%FF.txt"}))
req("resources-read-link", rpc("resources/read", {"uri": "file:///work/output/link"}))
req("resources-read-dotdot", rpc("resources/read", {"uri": "file:///work/../../etc/passwd"}))
req("resources-read-dir", rpc("resources/read", {"uri": "file:///work/output"}))
req("resources-read-query", rpc("resources/read", {"uri": "file:///work/notes.md?x=1"}))
req("resources-read-other-scheme", rpc("resources/read", {"uri": "http://example.com/"}))
req("resources-templates", rpc("resources/templates/list"))
req("logging-set-level", rpc("logging/setLevel", {"level": "debug"}))
req("logging-bad-level", rpc("logging/setLevel", {"level": "loud"}))
req("unknown-method", rpc("tools/destroy", {}))
req("notification-initialized", json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
req("notification-cancelled", json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                          "params": {"requestId": 3, "reason": "x"}}))
req("client-response", json.dumps({"jsonrpc": "2.0", "id": 5, "result": {}}))
req("neither", json.dumps({"jsonrpc": "2.0", "id": 5}))
req("delete", "", method="DELETE")
req("delete-no-session", "", method="DELETE", session="")
req("get-sse", "", method="GET", accept="text/event-stream")
req("get-json", "", method="GET", accept="application/json")
req("put", rpc("ping"), method="PUT")
req("no-method", rpc("ping"), method="")
req("no-token", rpc("ping"), token="")
req("origin-foreign", rpc("ping"), origin="https://evil.example")
req("origin-allowed", rpc("ping"), origin="https://app.example")
req("origin-localhost", rpc("ping"), origin="http://[::1]:3000")
req("content-type-text", rpc("ping"), content_type="text/plain")
req("content-type-charset", rpc("ping"), content_type="application/json; charset=utf-8")
req("content-type-missing", rpc("ping"), content_type="")
req("accept-html", rpc("ping"), accept="text/html")
req("accept-q0", rpc("ping"), accept="application/json;q=0, text/event-stream;q=0.0")
req("accept-wildcard", rpc("ping"), accept="*/*")
req("accept-missing", rpc("ping"), accept="")
req("too-large", rpc("ping"), too_large="1")
req("version-bogus", rpc("ping"), version="1999-01-01")
req("version-missing", rpc("ping"), version="")
req("session-missing", rpc("ping"), session="")
req("session-dotdot", rpc("ping"), session="../../etc")
req("session-unknown", rpc("ping"), session="00000000-0000-4000-8000-000000000000")
req("session-upper", rpc("ping"), session="0000000A-0000-4000-8000-000000000000")
req("session-other-token", rpc("ping"), token="someone-else")
req("endpoint-metrics", "", endpoint="metrics", token="")
req("endpoint-healthz", "", endpoint="healthz", token="")
req("endpoint-other", "", endpoint="admin", token="")
req("empty-body", "")
req("truncated", INIT[: len(INIT) // 2])
req("deep-array", "[" * 100 + "]" * 100)
req("deep-object", '{"a":' * 70 + "1" + "}" * 70)
req("deep-params", rpc("ping", {"x": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}))
write("request", "invalid-utf8", b'{"jsonrpc":"2.0","id":1,"method":"p\xffing"}')
write("request", "invalid-utf8-raw", b'{"jsonrpc":"2.0","id":1,"method":"\xc0\xafping"}')
write("request", "lone-surrogate", b'{"jsonrpc":"2.0","id":1,"method":"\\ud800"}')
write("request", "nul-raw", b'{"jsonrpc":"2.0","id":1,"method":"pi\x00ng"}')
write("request", "nul-escape", b'{"jsonrpc":"2.0","id":1,"method":"pi\\u0000ng"}')
write("request", "nul-after", rpc("ping").encode() + b"\x00")
write("request", "header-nul", b"session: @\x00junk\n\n" + rpc("ping").encode())
req("duplicate-key", '{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}')
req("duplicate-key-nested", rpc("ping", {"a": 1}).replace('{"a": 1}', '{"a":1,"a":2}'))
req("batch", "[" + rpc("ping") + "]")
req("top-level-number", "42")
req("id-null", rpc("ping", id=None))
req("id-huge", rpc("ping").replace('"id": 1', '"id": 1e308'))
req("id-2-53", rpc("ping").replace('"id": 1', '"id": 9007199254740993'))
req("id-float", rpc("ping").replace('"id": 1', '"id": 1.5'))
req("id-object", rpc("ping").replace('"id": 1', '"id": {}'))
req("id-long-string", rpc("ping", id="x" * 300))
req("id-negative", rpc("ping", id=-9007199254740991))
req("jsonrpc-wrong", rpc("ping").replace('"2.0"', '"1.0"'))
req("method-number", rpc("ping").replace('"ping"', "7"))
req("params-string", rpc("tools/list", "x"))
req("long-method", rpc("m" * 300 + "\u00e9" * 20))
req("unicode-method", rpc("\u00e9" * 200))

# ---- args: the `arguments` of execute_python ----

def arg(name, value):
    write("args", name, json.dumps(value))

arg("minimal", {"code": "print(1)"})
arg("full", {"code": "print(1)", "timeout_seconds": 30, "env_variables": {"A_1": "x"},
             "packages": ["requests>=2.31,<3", "pandas[excel]==2.0.*", "foo (>=1.0)"],
             "files": [{"path": "data/in.csv", "text": "a,b\n"}, {"path": "x.bin", "base64": "AAECAw=="}]})
arg("null", None)
arg("array", [{"code": "x"}])
arg("code-number", {"code": 1})
arg("code-long", {"code": "x" * 5000})
arg("timeout-zero", {"code": "1", "timeout_seconds": 0})
arg("timeout-float", {"code": "1", "timeout_seconds": 1.5})
arg("timeout-huge", {"code": "1", "timeout_seconds": 1e300})
arg("timeout-string", {"code": "1", "timeout_seconds": "60"})
arg("env-bad-name", {"code": "1", "env_variables": {"1A": "x"}})
arg("env-long-name", {"code": "1", "env_variables": {"\u00e9" * 100: "x"}})
# %.64s of this name ends inside a two-byte character
arg("env-long-name-odd", {"code": "1", "env_variables": {"a" + "\u00e9" * 100: "x"}})
arg("env-not-string", {"code": "1", "env_variables": {"A": 1}})
arg("env-array", {"code": "1", "env_variables": ["A"]})
arg("files-abs", {"code": "1", "files": [{"path": "/etc/passwd", "text": "x"}]})
arg("files-dotdot", {"code": "1", "files": [{"path": "a/../../b", "text": "x"}]})
arg("files-both", {"code": "1", "files": [{"path": "a", "text": "x", "base64": "eA=="}]})
arg("files-bad-base64", {"code": "1", "files": [{"path": "a", "base64": "e=A="}]})
arg("files-control", {"code": "1", "files": [{"path": "a\u0001b", "text": "x"}]})
arg("files-long-component", {"code": "1", "files": [{"path": "\u00e9" * 200, "text": "x"}]})
arg("files-many", {"code": "1", "files": [{"path": f"f{i}", "text": "x"} for i in range(6)]})
arg("files-big", {"code": "1", "files": [{"path": "a", "text": "x" * 9000}]})
arg("packages-option", {"code": "1", "packages": ["--index-url=http://evil"]})
arg("packages-url", {"code": "1", "packages": ["pkg @ https://evil/x.whl"]})
arg("packages-marker", {"code": "1", "packages": ["pkg; python_version<'3'"]})
arg("packages-extras-open", {"code": "1", "packages": ["pkg[a,b"]})
arg("packages-trailing-comma", {"code": "1", "packages": ["pkg>=1,"]})
arg("packages-many", {"code": "1", "packages": ["p"] * 40})
arg("packages-long", {"code": "1", "packages": ["\u00e9" * 150]})
arg("unknown", {"code": "1", "\u00e9" * 70: 1})
write("args", "requirement-raw", b"numpy >= 1.26, < 3")
arg("npm-specs", {"code": "1", "packages": ["lodash", "lodash@4.17.21", "@types/node@^20", "react@>=18 <19",
                                             "left-pad@latest"]})
arg("npm-specs-bad", {"code": "1", "packages": ["git+https://github.com/x/y", "file:../x", "@scope", "a..b",
                                                 "x@", "--global", "name#tag", "a/b"]})
write("args", "npm-spec-raw", b"@scope/pkg@~1.2.3")

# ---- sandbox: frames from the supervisor ----

def frame(t, payload=b""):
    if isinstance(payload, str):
        payload = payload.encode()
    return t.encode() + struct.pack(">I", len(payload)) + payload


DONE = json.dumps({"exit_code": 0, "duration_ms": 12, "stdout_bytes": 6, "stderr_bytes": 0,
                   "cpu_ms": 3, "max_rss_kb": 9000})
write("sandbox", "ok", frame("O", "hello\n") + frame("D", DONE))
write("sandbox", "lines", frame("O", "a\nb") + frame("E", "warn\n") + frame("O", "c\n") + frame("D", DONE))
write("sandbox", "split-utf8", frame("O", b"caf\xc3") + frame("O", b"\xa9\n") + frame("D", DONE))
write("sandbox", "invalid-utf8", frame("O", b"\xff\xfe\x00\x01\xed\xa0\x80\n") + frame("E", b"\xc0\xaf")
      + frame("D", DONE))
write("sandbox", "over-limit", frame("O", "x" * 5000) + frame("E", "y\n" * 2100) + frame("D", DONE))
write("sandbox", "long-line", frame("O", "z" * 9000) + frame("D", DONE))
write("sandbox", "flags", frame("D", json.dumps({"exit_code": 137, "timed_out": True, "truncated": True,
                                                 "memory_error": True, "cpu_exceeded": True,
                                                 "workspace_full": True, "input_error": True,
                                                 "install_error": True, "sandbox_lost": True,
                                                 "memory_exceeded": True})))
write("sandbox", "cancelled", frame("O", "x\n") + frame("D", '{"exit_code":130,"cancelled":true}'))
write("sandbox", "ranges", frame("D", '{"exit_code":-5,"duration_ms":-1,"cpu_ms":1e400,"max_rss_kb":"x",'
                                      '"stdout_bytes":1e300,"stderr_bytes":-3}'))
write("sandbox", "done-not-object", frame("D", "[1,2]"))
write("sandbox", "done-garbage", frame("D", b"\xff{"))
write("sandbox", "done-nul", frame("D", b'{"exit_code":0}\x00junk'))
write("sandbox", "error", frame("X", "The sandbox could not be started; try again later."))
write("sandbox", "error-binary", frame("X", b"\xff\x00" * 200))
write("sandbox", "bad-type", b"Z\x00\x00\x00\x00")
write("sandbox", "too-big", b"O\xff\xff\xff\xff")
write("sandbox", "truncated", frame("O", "hello")[:7])
write("sandbox", "eof", b"")
write("sandbox", "status-ready", frame("S", '{"ready":true}') + frame("Y", "{}") + frame("D", DONE))

# ---- outputs: a file name line, then content (also the manifest) ----

write("outputs", "png", b"plot.png\n\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
write("outputs", "jpeg", b"a.jpg\n\xff\xd8\xff\xe0")
write("outputs", "gif", b"g.gif\nGIF89a....")
write("outputs", "webp", b"w.webp\nRIFF\x10\x00\x00\x00WEBPVP8 ")
write("outputs", "pdf", b"r.pdf\n%PDF-1.7\n")
write("outputs", "gzip", b"x.gz\n\x1f\x8b\x08\x00")
write("outputs", "xlsx", b"t.xlsx\nPK\x03\x04rest")
write("outputs", "docx", b"t.docx\nPK\x03\x04rest")
write("outputs", "zip", b"t.zip\nPK\x03\x04rest")
write("outputs", "csv", b"data.csv\na,b\n1,2\n")
write("outputs", "svg", b"p.svg\n<?xml version='1.0'?><svg xmlns='http://www.w3.org/2000/svg'></svg>")
write("outputs", "json", b"r.json\n{\"a\": [1, 2]}")
write("outputs", "binary", b"blob\n\x00\x01\x02\x03")
write("outputs", "text-utf8", "notes.md\ncaf\u00e9 \u2603 \U0001f600\n".encode())
write("outputs", "text-cut", b"cut.txt\n" + "\u00e9".encode() * 2047 + b"\xc3")
write("outputs", "name-invalid-utf8", b"bad\xff\xfe.txt\nhello\n")
write("outputs", "name-control", b"a\x01b\x1b.txt\nhello\n")
write("outputs", "name-percent", b"100% sure?#.txt\nx\n")
write("outputs", "name-dotdot", b"../../etc/passwd\nx\n")
write("outputs", "name-sub", b"d/name-sub\nx\n")
write("outputs", "name-long", b"n" * 199 + b"\nx\n")
write("outputs", "big", b"big.bin\n" + b"\x00" * 3000)
write("outputs", "manifest-lines", b"m.txt\n12 5 1700000000000000000 6d2e747874\n1 2 3 zz\n"
      b"18446744073709551615 18446744073709551615 -9223372036854775808 " + b"41" * 300 + b"\n"
      b"1 1 1 0\n1 1 1 00\n x y z\n")
write("outputs", "manifest-odd-hex", b"o.txt\n1 2 3 6d2\n4 5 6 6g\n")
write("outputs", "empty", b"empty.txt\n")
write("outputs", "name-d", b"d\nsame name as the folder of the second copy\n")
