// Network by policy (issue 18, README.md): code reaches the hosts its
// token allows through the filtering proxy (Squid) and the relays, and
// nothing else.
//
// It needs the stack scripts/test starts first (or one set up the same
// way): the egress test folder MCP_TEST_EGRESS_DIR (hosts file, test CA and
// server certificate, the credential file), the ports
// MCP_TEST_EGRESS_HTTP_PORT and MCP_TEST_EGRESS_HTTPS_PORT, and in the
// tokens file two tokens with egress_allow= (egress-a, egress-b); the
// first token has none.  This file serves HTTP and HTTPS on 127.0.0.77
// (names only the proxy resolves: allowed/other/cred.egress.test;
// private.egress.test is 127.0.0.78, which egress_networks leaves out).
// It runs as root on the stack's host with MCP_STATE_DIR set: it reads the
// tokens file, the egress log, and stops and starts the proxy.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import http from 'node:http';
import https from 'node:https';
import { spawn } from 'node:child_process';
import { MCP_TOKEN, TEST_TIMEOUT_MS, SLACK_MS, connectClient2 } from './lib/common.mjs';
import { RawSession, show } from './lib/rpc.mjs';
import { STATE_DIR, sleep, alive, effectiveConfig, stackTokens } from './lib/host.mjs';

const opts = { timeout: TEST_TIMEOUT_MS };
if (!STATE_DIR) throw new Error('egress.test.mjs needs MCP_STATE_DIR (the state folder of the stack under test)');
if (process.getuid() !== 0) throw new Error('egress.test.mjs must run as root (it reads the tokens file and the proxy)');

const DIR = process.env.MCP_TEST_EGRESS_DIR || path.join(STATE_DIR, 'egress-test');
const HP = Number(process.env.MCP_TEST_EGRESS_HTTP_PORT);
const SP = Number(process.env.MCP_TEST_EGRESS_HTTPS_PORT);
if (!HP || !SP) throw new Error('egress.test.mjs needs MCP_TEST_EGRESS_HTTP_PORT and MCP_TEST_EGRESS_HTTPS_PORT');
const TEST_CA = fs.readFileSync(path.join(DIR, 'ca.pem'), 'utf8');
const [CRED_HOST, CRED_HEADER, CRED_VALUE] = fs
  .readFileSync(path.join(DIR, 'credentials'), 'utf8')
  .split('\n')
  .find((l) => l && !l.startsWith('#'))
  .split(/\s+/);

function tokenOf(name) {
  const t = stackTokens().find(([n]) => n === name);
  if (!t) throw new Error(`no token ${name} in ${STATE_DIR}/tokens (scripts/test adds egress-a and egress-b)`);
  return t[1];
}
// egress_bytes_in of the running server (scripts/test: 4M).
const cfgBytesIn = () => Number(effectiveConfig().egress_bytes_in);
const TOKEN_A = tokenOf('egress-a');
const TOKEN_B = tokenOf('egress-b');

// ---- the servers the code reaches ----
const seen = []; // {host, path, header} of every request the servers got
function handler(req, res) {
  const rec = { host: req.headers.host, path: req.url, header: req.headers[CRED_HEADER.toLowerCase()] ?? null, bytes: 0 };
  seen.push(rec);
  req.on('data', (d) => (rec.bytes += d.length));
  const u = new URL(req.url, 'http://x');
  if (u.pathname === '/upload') {
    // The whole body first: only then an answer (which would end the upload).
    req.on('end', () => res.end(`got ${rec.bytes}\n`));
    return;
  }
  if (u.pathname === '/big') {
    const n = Number(u.searchParams.get('n'));
    res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': n });
    const chunk = Buffer.alloc(65536, 120);
    let left = n;
    const pump = () => {
      while (left > 0) {
        const part = chunk.subarray(0, Math.min(left, chunk.length));
        left -= part.length;
        if (!res.write(part)) return res.once('drain', pump);
      }
      res.end();
    };
    return pump();
  }
  const cred = req.headers[CRED_HEADER.toLowerCase()];
  res.writeHead(200, { 'Content-Type': 'text/plain' });
  // Whether the credential arrived, never its value.
  res.end(`hello from ${req.headers.host}${req.url} credential=${cred === CRED_VALUE ? 'yes' : 'no'}\n`);
}
const servers = [];
before(async () => {
  const key = fs.readFileSync(path.join(DIR, 'server.key'));
  const cert = fs.readFileSync(path.join(DIR, 'server.pem'));
  servers.push(http.createServer(handler), https.createServer({ key, cert }, handler));
  await Promise.all([
    new Promise((ok, fail) => servers[0].once('error', fail).listen(HP, '127.0.0.77', ok)),
    new Promise((ok, fail) => servers[1].once('error', fail).listen(SP, '127.0.0.77', ok)),
  ]);
});

const opened = new Set();
after(async () => {
  for (const s of opened) await s.del().catch(() => {});
  for (const s of servers) s.closeAllConnections?.();
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
});

async function open(name, token) {
  const s = new RawSession({ name: `egress-${name}`, token });
  const r = await s.init();
  assert.equal(r.status, 200, `initialize (${name}): HTTP ${r.status} ${r.body}`);
  opened.add(s);
  return s;
}

/** execute_python (or javascript); returns structuredContent, asserting the call ran. */
async function call(s, code, args = {}, tool = 'execute_python') {
  const started = Date.now();
  const r = await s.rpc('tools/call', { name: tool, arguments: { code, ...args } });
  assert.equal(r.status, 200, `HTTP ${r.status} ${r.body}`);
  const res = r.json?.result;
  assert.ok(res, `a result: ${show(r.json)}`);
  return { sc: res.structuredContent, res, ms: Date.now() - started };
}

// Python that prints "STATUS body" or "ERR message" for one URL.
const fetchPy = (url, extra = '') => `
import urllib.request, urllib.error, ssl, sys
${extra}
ctx = ssl.create_default_context()
try:
    ctx.load_verify_locations("test-ca.pem")
except FileNotFoundError:
    pass
try:
    r = urllib.request.urlopen(${JSON.stringify(url)}, timeout=20, context=ctx)
    print(r.status, r.read().decode().strip())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())
except Exception as e:
    print("ERR", type(e).__name__, e)
`;
const caFile = [{ path: 'test-ca.pem', text: TEST_CA }];

// A raw proxy request on the sandbox's relay: what comes back first.
const rawPy = (payload) => `
import os, socket
p = os.environ["HTTP_PROXY"].rsplit(":", 1)
s = socket.create_connection(("127.0.0.1", int(p[1])), timeout=15)
s.sendall(${JSON.stringify(payload)}.encode())
data = b""
while b"\\r\\n\\r\\n" not in data or len(data) < 12:
    b = s.recv(4096)
    if not b:
        break
    data += b
print(data.decode(errors="replace").replace("\\r", ""))
`;

test('an allowed name works over HTTP and HTTPS from Python (urllib, and requests when present)', opts, async (t) => {
  const s = await open('python', TOKEN_A);
  const h = await call(s, fetchPy(`http://allowed.egress.test:${HP}/py`));
  assert.equal(h.sc.stdout, `200 hello from allowed.egress.test:${HP}/py credential=no\n`, show(h.sc));
  assert.equal(h.sc.egress_limited, false);
  const tls = await call(s, fetchPy(`https://allowed.egress.test:${SP}/tls`), { files: caFile });
  assert.equal(tls.sc.stdout, `200 hello from allowed.egress.test:${SP}/tls credential=no\n`, show(tls.sc));
  t.diagnostic(`HTTP call ${h.ms} ms, HTTPS call ${tls.ms} ms`);
  const rq = await call(
    s,
    `try:
    import requests
except ImportError:
    print("no requests")
else:
    r = requests.get("https://allowed.egress.test:${SP}/requests", verify="test-ca.pem", timeout=20)
    print(r.status_code, r.text.strip())`,
    { files: caFile },
  );
  if (rq.sc.stdout === 'no requests\n') t.diagnostic('requests is not installed in the sandbox: not tried');
  else assert.equal(rq.sc.stdout, `200 hello from allowed.egress.test:${SP}/requests credential=no\n`, show(rq.sc));
});

test('an allowed name works from JavaScript (fetch, HTTP and HTTPS)', opts, async () => {
  const s = await open('js', TOKEN_A);
  const js = (url) => `
fetch(${JSON.stringify(url)}).then((r) => r.text().then((b) => console.log(r.status, b.trim())))
  .catch((e) => console.log('ERR', e.cause?.message ?? e.message));
`;
  const h = await call(s, js(`http://allowed.egress.test:${HP}/js`), {}, 'execute_javascript');
  assert.equal(h.sc.stdout, `200 hello from allowed.egress.test:${HP}/js credential=no\n`, show(h.sc));
  // The credential host: the proxy terminates TLS with the deployment's CA,
  // which the call trusts (SSL_CERT_FILE) because its policy has that host.
  const c = await call(s, js(`https://${CRED_HOST}:${SP}/js-cred`), {}, 'execute_javascript');
  assert.equal(c.sc.stdout, `200 hello from ${CRED_HOST}:${SP}/js-cred credential=yes\n`, show(c.sc));
});

test('curl and git over HTTPS go through the relay; curl to a name not allowed gets the 403', opts, async () => {
  const s = await open('tools', TOKEN_A);
  const r = await call(
    s,
    `import os, subprocess
def run(*argv):
    # GIT_SSL_CAINFO: the call's variables name the deployment's bundle, which
    # git prefers to its -c options; the test servers' CA is the call's file.
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_SSL_CAINFO="test-ca.pem")
    p = subprocess.run(argv, capture_output=True, text=True, timeout=40, env=env)
    print(argv[0], p.returncode, p.stdout.strip()[:200], "|", p.stderr.strip()[:300])
run("curl", "-sS", "--max-time", "20", "--cacert", "test-ca.pem", "https://allowed.egress.test:${SP}/curl")
run("curl", "-sS", "--max-time", "20", "--cacert", "test-ca.pem", "https://other.egress.test:${SP}/curl")
run("git", "ls-remote", "https://allowed.egress.test:${SP}/repo.git")`,
    { files: caFile },
  );
  const [ok, denied, git] = r.sc.stdout.trim().split('\n').map((l) => l.trimEnd());
  assert.equal(ok, `curl 0 hello from allowed.egress.test:${SP}/curl credential=no |`, show(r.sc));
  assert.match(denied, /^curl [1-9]\d* .*\| curl: \(56\) .*403/, `curl to a name not allowed: ${denied}`);
  // The server is no git repository: git fails, but only after its
  // smart-HTTP request came through the proxy to the allowed host.
  assert.match(git, /^git [1-9]/, git);
  assert.ok(
    seen.some((x) => x.host === `allowed.egress.test:${SP}` && x.path === '/repo.git/info/refs?service=git-upload-pack'),
    `git's request reached the allowed host: ${show(seen.slice(-5))}`,
  );
});

test('denied: a name not allowed, an IP literal, a name resolving to a denied network; fast, with a reason', opts, async (t) => {
  const s = await open('denied', TOKEN_A);
  for (const [what, url, pat] of [
    ['a name not allowed (HTTP)', `http://other.egress.test:${HP}/`, /^403 egress denied/],
    ['an allowed name on another port', `http://allowed.egress.test:${HP + 100}/`, /^403 egress denied/],
    ['an IP literal', `http://127.0.0.77:${HP}/`, /^403 egress denied/],
    ['a name resolving to a denied network (HTTP)', `http://private.egress.test:${HP}/`, /^403 egress denied: private\.egress\.test resolves to/],
    ['a name not allowed (HTTPS)', `https://other.egress.test:${SP}/`, /^ERR .*(403|Tunnel connection failed)/],
    ['a name resolving to a denied network (HTTPS)', `https://private.egress.test:${SP}/`, /^ERR .*(403|Tunnel connection failed)/],
  ]) {
    const r = await call(s, fetchPy(url), { files: caFile });
    t.diagnostic(`${what}: ${r.ms} ms: ${r.sc.stdout.trim()}`);
    assert.match(r.sc.stdout, pat, `${what}: ${show(r.sc)}`);
    assert.ok(r.ms < 15000, `${what}: answered in ${r.ms} ms`);
  }
  // The reason of a refused CONNECT, as a raw client sees it.
  const raw = await call(s, rawPy(`CONNECT other.egress.test:${SP} HTTP/1.1\r\nHost: other.egress.test:${SP}\r\n\r\n`));
  assert.match(raw.sc.stdout, /^HTTP\/1\.[01] 403 /, show(raw.sc));
  assert.match(raw.sc.stdout, /egress denied/, 'the body says why');
  assert.ok(!seen.some((x) => /other\.egress\.test|127\.0\.0\.77/.test(x.host)), 'no denied request reached a server');
});

test('a tunnel to an allowed name carrying TLS for another name (SNI) is cut', opts, async () => {
  const s = await open('sni', TOKEN_A);
  const r = await call(
    s,
    `import os, socket, ssl
p = int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1])
def tunnel(sni):
    c = socket.create_connection(("127.0.0.1", p), timeout=15)
    c.sendall(b"CONNECT allowed.egress.test:${SP} HTTP/1.1\\r\\nHost: allowed.egress.test:${SP}\\r\\n\\r\\n")
    head = b""
    while b"\\r\\n\\r\\n" not in head:
        head += c.recv(1)
    ctx = ssl.create_default_context(cafile="test-ca.pem")
    try:
        t = ctx.wrap_socket(c, server_hostname=sni)
        t.sendall(("GET /sni HTTP/1.1\\r\\nHost: %s\\r\\nConnection: close\\r\\n\\r\\n" % sni).encode())
        print(sni, head.split(b"\\r\\n")[0].decode(), t.recv(100).split(b"\\r\\n")[0].decode())
    except (OSError, ssl.SSLError) as e:
        print(sni, head.split(b"\\r\\n")[0].decode(), "TLS FAILED", type(e).__name__)
tunnel("allowed.egress.test")
tunnel("other.egress.test")`,
    { files: caFile },
  );
  const [ok, other] = r.sc.stdout.trim().split('\n');
  assert.match(ok, /^allowed\.egress\.test HTTP\/1\.[01] 200 .* HTTP\/1\.1 200/, show(r.sc));
  assert.match(other, /^other\.egress\.test HTTP\/1\.[01] 200 .*TLS FAILED/, `the other name's handshake is cut: ${show(r.sc)}`);
  assert.ok(!seen.some((x) => x.path === '/sni' && /other/.test(x.host)), 'no request with the other name reached the server');
});

test('the relay speaks HTTP only, and sockets cannot go around it', opts, async () => {
  const s = await open('protocol', TOKEN_A);
  const r = await call(s, rawPy('SSH-2.0-OpenSSH_9.2\r\n\r\n'));
  assert.match(r.sc.stdout, /^HTTP\/1\.[01] 400 /, show(r.sc));
  assert.match(r.sc.stdout, /HTTP only|not a proxy request/);
  const direct = await call(
    s,
    `import socket, time
for addr in [("127.0.0.77", ${HP}), ("8.8.8.8", 53), ("1.1.1.1", 443)]:
    t = time.time()
    try:
        socket.create_connection(addr, timeout=10).close()
        print(addr[0], "CONNECTED")
    except OSError as e:
        print(addr[0], "refused" if time.time() - t < 3 else "slow", type(e).__name__)
try:
    socket.getaddrinfo("allowed.egress.test", 80)
    print("dns RESOLVED")
except OSError as e:
    print("dns fails", type(e).__name__)`,
  );
  assert.doesNotMatch(direct.sc.stdout, /CONNECTED|slow|RESOLVED/, show(direct.sc));
  assert.equal(direct.sc.stdout.split('\n').filter(Boolean).length, 4, show(direct.sc));
});

test("policies are per token and per session; a call may narrow its token's, never widen it", opts, async () => {
  const a = await open('a', TOKEN_A);
  const b = await open('b', TOKEN_B);
  const none = await open('none', MCP_TOKEN);
  const rb = await call(b, fetchPy(`http://other.egress.test:${HP}/b`));
  assert.equal(rb.sc.stdout, `200 hello from other.egress.test:${HP}/b credential=no\n`, 'egress-b reaches its host');
  const rb2 = await call(b, fetchPy(`http://allowed.egress.test:${HP}/b`));
  assert.match(rb2.sc.stdout, /^403 egress denied/, "but not egress-a's");
  const ra = await call(a, fetchPy(`http://other.egress.test:${HP}/a`));
  assert.match(ra.sc.stdout, /^403 egress denied/, "and egress-a does not reach egress-b's");
  // The first token has no egress: no proxy variables, no socket, no relay.
  const rn = await call(
    none,
    `import os
print(sorted(k for k in os.environ if "proxy" in k.lower()), os.path.exists("/opt/mcp/egress/proxy.sock"))`,
  );
  assert.equal(rn.sc.stdout, '[] False\n', show(rn.sc));
  // Narrowing.
  const n1 = await call(a, fetchPy(`http://allowed.egress.test:${HP}/narrow`), {
    egress_allow: [`allowed.egress.test:${HP}`],
  });
  assert.match(n1.sc.stdout, /^200 hello/, show(n1.sc));
  const n2 = await call(a, fetchPy(`https://allowed.egress.test:${SP}/narrowed-away`), {
    egress_allow: [`allowed.egress.test:${HP}`],
    files: caFile,
  });
  assert.match(n2.sc.stdout, /^ERR/, `a host the call narrowed away: ${show(n2.sc)}`);
  const wide = await a.rpc('tools/call', {
    name: 'execute_python',
    arguments: { code: 'print(1)', egress_allow: [`other.egress.test:${HP}`] },
  });
  assert.equal(wide.json.result.isError, true, show(wide.json));
  assert.match(wide.json.result.content[0].text, /outside this token's egress policy/);
  const nope = await call(a, 'import os\nprint("HTTP_PROXY" in os.environ)', { egress_allow: [] });
  assert.equal(nope.sc.stdout, 'False\n', 'egress_allow: [] is no network for the call');
  const asks = await none.rpc('tools/call', {
    name: 'execute_python',
    arguments: { code: 'print(1)', egress_allow: [`allowed.egress.test:${HP}`] },
  });
  assert.equal(asks.json.result.isError, true, 'a token without egress cannot ask for it');
});

test('credential injection: the server sees the header, the code never sees its value', opts, async () => {
  const s = await open('cred', TOKEN_A);
  const before = seen.length;
  const r = await call(
    s,
    `import os, subprocess
${fetchPy(`https://${CRED_HOST}:${SP}/cred`).replace(/^\n/, '')}
secret = ${JSON.stringify(CRED_VALUE.slice(0, 8))} + ${JSON.stringify(CRED_VALUE.slice(8))}
env = any(secret in v for v in os.environ.values())
files = subprocess.run(["grep", "-rIl", "--", secret, "/work", "/tmp", "/opt/mcp", "/etc", "/root"], capture_output=True, text=True).stdout.strip()
print("env", env, "files", files or "none")`,
  );
  // The code gets the value in two halves only to look for it whole: in its
  // environment and in the files it can read.
  const lines = r.sc.stdout.split('\n');
  assert.equal(lines[0], `200 hello from ${CRED_HOST}:${SP}/cred credential=yes`, show(r.sc));
  assert.equal(lines[1], 'env False files none', show(r.sc));
  const got = seen.slice(before).find((x) => x.path === '/cred');
  assert.equal(got?.header, CRED_VALUE, 'the server got the header with its value');
  // Plain HTTP gets no credential (it would cross the network in clear).
  const plain = await call(s, fetchPy(`http://allowed.egress.test:${HP}/plain`));
  assert.match(plain.sc.stdout, /credential=no/);
});

test('the 2026-07-28 era: a sandbox handle of an egress token reaches its hosts; egress_allow beside `sandbox`', opts, async () => {
  const c = await connectClient2({ pin: '2026-07-28' }, TOKEN_A, 'egress-modern');
  const py = (args) => c.callTool({ name: 'execute_python', arguments: args }, { timeout: TEST_TIMEOUT_MS });
  const handles = new Set();
  try {
    const first = await py({ code: fetchPy(`http://allowed.egress.test:${HP}/modern`) });
    handles.add(first.structuredContent.sandbox);
    assert.equal(first.structuredContent.stdout, `200 hello from allowed.egress.test:${HP}/modern credential=no\n`, show(first));
    const again = await py({
      code: fetchPy(`https://allowed.egress.test:${SP}/modern-narrowed`),
      sandbox: first.structuredContent.sandbox,
      egress_allow: [`allowed.egress.test:${HP}`],
      files: caFile,
    });
    assert.equal(again.structuredContent.sandbox, first.structuredContent.sandbox, 'the same sandbox');
    assert.match(again.structuredContent.stdout, /^ERR/, `narrowed away in that sandbox: ${show(again)}`);
    const other = await py({ code: fetchPy(`http://other.egress.test:${HP}/modern`) });
    handles.add(other.structuredContent.sandbox);
    assert.match(other.structuredContent.stdout, /^403 egress denied/, "egress-b's host stays out of egress-a's sandboxes");
  } finally {
    for (const h of handles) await c.callTool({ name: 'close_sandbox', arguments: { sandbox: h } }).catch(() => {});
    await c.close();
  }
});

test('the byte cap: a download beyond egress_bytes_in is cut and reported as egress_limited', opts, async (t) => {
  const s = await open('bytes', TOKEN_A);
  const r = await call(
    s,
    `import urllib.request
n = 0
try:
    with urllib.request.urlopen("http://allowed.egress.test:${HP}/big?n=${8 << 20}", timeout=30) as f:
        while True:
            b = f.read(65536)
            if not b:
                break
            n += len(b)
    # http.client ends a read short of Content-Length quietly.
    print("whole" if n == ${8 << 20} else "cut", n)
except Exception as e:
    print("cut", n, type(e).__name__)`,
  );
  t.diagnostic(`${r.ms} ms: ${r.sc.stdout.trim()}`);
  assert.match(r.sc.stdout, /^cut \d+/, show(r.sc));
  assert.ok(Number(r.sc.stdout.split(' ')[1]) <= cfgBytesIn(), `no more than egress_bytes_in arrived: ${r.sc.stdout}`);
  assert.equal(r.sc.egress_limited, true, show(r.sc));
  assert.match(r.res.content.map((c) => c.text).join(' '), /egress limit \(bytes_in\)/);
  const next = await call(s, fetchPy(`http://allowed.egress.test:${HP}/after-cap`));
  assert.match(next.sc.stdout, /^200 /, 'the next call has its own budget');
  assert.equal(next.sc.egress_limited, false);
});

test('the upload cap: a request body beyond egress_bytes_out is cut and reported as egress_limited', opts, async (t) => {
  const s = await open('bytes-out', TOKEN_A);
  const cap = Number(effectiveConfig().egress_bytes_out);
  const r = await call(
    s,
    `import socket, os
p = int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1])
c = socket.create_connection(("127.0.0.1", p), timeout=20)
n = ${2 * cap}
c.sendall(("POST http://allowed.egress.test:${HP}/upload HTTP/1.1\\r\\nHost: allowed.egress.test:${HP}\\r\\n"
           "Content-Length: %d\\r\\n\\r\\n" % n).encode())
sent = 0
chunk = b"u" * 65536
try:
    while sent < n:
        sent += c.send(chunk)
    # Sent into the socket's buffers: what the far end made of it decides.
    answer = c.recv(200)
    print(("answered " + answer.split(b"\\r\\n")[0].decode()) if answer else "cut", sent)
except OSError as e:
    print("cut", sent, type(e).__name__)`,
  );
  t.diagnostic(`${r.ms} ms: ${r.sc.stdout.trim()} (egress_bytes_out ${cap})`);
  assert.match(r.sc.stdout, /^cut \d+/, `the upload did not go through whole: ${show(r.sc)}`);
  assert.equal(r.sc.egress_limited, true, show(r.sc));
  assert.match(r.res.content.map((c) => c.text).join(' '), /egress limit \(bytes_out\)/);
  assert.ok(!seen.some((x) => x.path === '/upload' && x.bytes > cap), 'the server never got more than egress_bytes_out');
});

test('the connection time: a tunnel held beyond egress_connection_time is closed and reported', opts, async (t) => {
  const s = await open('conn-time', TOKEN_A);
  const limit = Number(effectiveConfig().egress_connection_time);
  const r = await call(
    s,
    `import os, socket, time
p = int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1])
c = socket.create_connection(("127.0.0.1", p), timeout=${limit + 20})
c.sendall(b"CONNECT allowed.egress.test:${HP} HTTP/1.1\\r\\nHost: allowed.egress.test:${HP}\\r\\n\\r\\n")
head = c.recv(200).split(b"\\r\\n")[0].decode()
t0 = time.time()
try:
    while c.recv(4096):
        pass
    print(head, "closed after", round(time.time() - t0, 1))
except OSError as e:
    print(head, "error after", round(time.time() - t0, 1), type(e).__name__)`,
    { timeout_seconds: limit + 30 },
  );
  t.diagnostic(`${r.ms} ms: ${r.sc.stdout.trim()} (egress_connection_time ${limit} s)`);
  const m = /^HTTP\/1\.[01] 200 .* (closed|error) after ([\d.]+)/.exec(r.sc.stdout.trim());
  assert.ok(m, `the tunnel opened, then ended: ${show(r.sc)}`);
  assert.ok(Number(m[2]) >= limit - 1 && Number(m[2]) <= limit + 5 + SLACK_MS / 1000, `closed near ${limit} s: ${m[2]} s`);
  assert.equal(r.sc.egress_limited, true, show(r.sc));
  assert.match(r.res.content.map((c) => c.text).join(' '), /egress limit \(connection_time\)/);
});

test('connections at once are capped (egress_connections) with a clear answer', opts, async () => {
  const s = await open('conns', TOKEN_A);
  const r = await call(
    s,
    `import os, socket
p = int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1])
socks, answers = [], []
for i in range(6):
    c = socket.create_connection(("127.0.0.1", p), timeout=15)
    c.sendall(b"CONNECT allowed.egress.test:${HP} HTTP/1.1\\r\\nHost: allowed.egress.test:${HP}\\r\\n\\r\\n")
    answers.append(c.recv(200).split(b"\\r\\n")[0].decode())
    socks.append(c)
print("\\n".join(answers))`,
  );
  const lines = r.sc.stdout.trim().split('\n');
  assert.equal(lines.length, 6, show(r.sc));
  assert.ok(lines.slice(0, 4).every((l) => / 200 /.test(l)), show(lines));
  assert.ok(lines.slice(4).every((l) => / 429 /.test(l)), show(lines));
  assert.equal(r.sc.egress_limited, true);
});

test('every connection is one line in the egress log, and counted by verdict', opts, async () => {
  const log = path.join(STATE_DIR, 'logs', 'egress.log');
  const lines = fs
    .readFileSync(log, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
  const fields = ['time', 'session_id', 'token', 'host', 'port', 'verdict', 'bytes_out', 'bytes_in'];
  for (const l of lines) for (const f of fields) assert.ok(f in l, `${f} in ${JSON.stringify(l)}`);
  const ok = lines.find((l) => l.token === 'egress-a' && l.host === 'allowed.egress.test' && l.verdict === 'allowed');
  assert.ok(ok && ok.bytes_in > 0 && ok.bytes_out > 0, 'an allowed connection with its bytes');
  assert.ok(lines.some((l) => l.token === 'egress-b' && l.host === 'allowed.egress.test' && l.verdict === 'denied'));
  assert.ok(lines.some((l) => l.verdict === 'limited'), 'the limits are logged');
  assert.ok(lines.some((l) => l.verdict === 'refused'), 'so is what the relay refused');
  const url = process.env.MCP_METRICS_URL;
  if (url) {
    const text = await (await fetch(url)).text();
    for (const v of ['allowed', 'denied', 'limited', 'refused'])
      assert.match(text, new RegExp(`mcp_egress_connections_total\\{verdict="${v}"\\} [1-9]`), v);
  }
});

test('the proxy stopped: a clear error at once, and the service goes on', opts, async () => {
  const pidFile = path.join(STATE_DIR, 'egress', 'squid.run.pid');
  const pid = Number(fs.readFileSync(pidFile, 'utf8').trim());
  assert.ok(alive(pid), 'the proxy runs');
  const argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  const env = Object.fromEntries(
    fs
      .readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .filter((kv) => kv.includes('='))
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
  const s = await open('stopped', TOKEN_A);
  process.kill(pid, 'SIGTERM');
  for (let i = 0; i < 100 && alive(pid); i++) await sleep(100);
  try {
    const r = await call(s, fetchPy(`http://allowed.egress.test:${HP}/stopped`));
    assert.match(r.sc.stdout, /^502 .*egress proxy is not running/, show(r.sc));
    assert.ok(r.ms < 15000, `answered in ${r.ms} ms`);
    const plain = await call(s, 'print(6 * 7)');
    assert.equal(plain.sc.stdout, '42\n', 'calls without the network go on');
  } finally {
    // Start it again as scripts/lib/common.sh did (same command and
    // environment), for the suites after this one.
    const log = fs.openSync(path.join(STATE_DIR, 'egress', 'logs', 'squid.log'), 'a');
    const child = spawn(argv[0], argv.slice(1), { env, detached: true, stdio: ['ignore', log, log] });
    fs.writeFileSync(pidFile, `${child.pid}\n`);
    child.unref();
    fs.closeSync(log);
  }
  let back = null;
  for (let i = 0; i < 100; i++) {
    back = await call(s, fetchPy(`http://allowed.egress.test:${HP}/again`));
    if (/^200 /.test(back.sc.stdout)) break;
    await sleep(200);
  }
  assert.match(back.sc.stdout, /^200 /, `the proxy back: ${show(back.sc)}`);
});
