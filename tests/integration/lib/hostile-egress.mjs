// The hostile cases of network by policy (issue "Network by policy": "the
// hostile suites gain these cases"), for both languages, appended to the
// table of lib/hostile-cases.mjs. Session A belongs to a token with an
// egress policy (egress-a, which scripts/test adds to the first stack's
// tokens file); B is the stack's first token's, without egress.
//
// Every probe is the same runner in both languages: a list of exchanges
// (connect to the sandbox's relay, or straight to the egress unix socket the
// relay forwards to; send raw bytes; read what comes back for up to
// READ_MS), reported as one JSON line {proxy, socket, results: {id:
// {statuses, why, ms, err}}}. The verdicts are on the host: what came back,
// how fast, and what the listeners on the host saw.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { NGINX_PORT, STATE_DIR, show, report } from './hostile.mjs';
import { effectiveConfig } from './host.mjs';
import { SLACK_MS } from './common.mjs';

const READ_MS = 4000; // an exchange that has no answer by then hangs
const FAST_MS = 3000 + SLACK_MS; // a refusal comes at once, within the machine's slack

/** What the cases need of the stack: the egress token, the proxy's port and
 * the allowed test port; or why the stack has no such thing. */
function egressFixture() {
  if (!STATE_DIR) return 'MCP_STATE_DIR is not set: the egress token and the proxy are not known';
  if (process.getuid() !== 0) return 'not root: the tokens file cannot be read';
  const hp = Number(process.env.MCP_TEST_EGRESS_HTTP_PORT);
  if (!hp) return 'MCP_TEST_EGRESS_HTTP_PORT is not set (scripts/test sets it up with the egress tokens)';
  let line;
  try {
    line = fs
      .readFileSync(path.join(STATE_DIR, 'tokens'), 'utf8')
      .split('\n')
      .find((l) => l.startsWith('egress-a '));
  } catch (e) {
    return `the tokens file cannot be read: ${e.code}`;
  }
  if (!line) return 'the stack has no egress-a token (scripts/test adds it to the first stack)';
  const proxy = String(effectiveConfig().egress_proxy || '');
  const m = /:(\d+)$/.exec(proxy);
  if (!m) return 'the stack has no egress_proxy';
  return { token: line.split(/\s+/)[1], proxyPort: Number(m[1]), httpPort: hp };
}

/** Host side of a case: a TCP listener on every address at a free port (it
 * must hear nothing) and an HTTP server on every address at the allowed
 * test port (only 127.0.0.77, the address egress_networks lets through,
 * may reach it), both recording who came; then fn(hosts). */
async function withEgressTargets(fx, fn) {
  const heard = [];
  const listener = net.createServer((s) => {
    heard.push(`${s.localAddress} from ${s.remoteAddress}`);
    s.on('error', () => {});
    s.end('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nleak\n');
  });
  const requests = [];
  const server = http.createServer((req, res) => {
    requests.push({ local: req.socket.localAddress, url: req.url });
    res.writeHead(200, { 'Content-Type': 'text/plain' });
    res.end(`hello ${req.url}\n`);
  });
  await new Promise((ok) => listener.listen(0, '0.0.0.0', ok));
  await new Promise((ok, fail) => server.once('error', fail).listen(fx.httpPort, '0.0.0.0', ok));
  try {
    return await fn({ port: listener.address().port, heard, requests });
  } finally {
    server.closeAllConnections?.();
    await Promise.all([listener, server].map((s) => new Promise((r) => s.close(r))));
  }
}

const get = (hostport, p = '/', close = true) =>
  `GET http://${hostport}${p} HTTP/1.1\r\nHost: ${hostport}\r\n${close ? 'Connection: close\r\n' : ''}\r\n`;
const connect = (hostport) => `CONNECT ${hostport} HTTP/1.1\r\nHost: ${hostport}\r\n\r\n`;

/** The exchange runner of each language: EX (the list) is given as JSON. */
const RUNNER = {
  python: (ex) => String.raw`import errno, json, os, re, socket, stat, time
EX = json.loads(${JSON.stringify(JSON.stringify(ex))})
proxy = os.environ.get("HTTP_PROXY")
def egress_socket():
    for root, dirs, files in os.walk("/opt/mcp/egress"):
        for n in files:
            p = os.path.join(root, n)
            try:
                if stat.S_ISSOCK(os.lstat(p).st_mode):
                    return p
            except OSError:
                pass
    return None
def open_conn(via):
    if via == "socket":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(egress_socket() or "/nonexistent")
        return s
    host, port = proxy.split("//")[-1].rstrip("/").rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=2)
def heads(data):
    return len(re.findall(rb"(?m)^HTTP/1\.[01] \d{3}[^\r\n]*\r\n(?:[^\r\n]+\r\n)*\r\n", data))
res, held = {}, []
for ex in EX:
    t = time.monotonic()
    data, err = b"", None
    try:
        s = open_conn(ex["via"])
        s.sendall(ex["send"].encode("latin-1"))
        end = t + ${READ_MS / 1000}
        while time.monotonic() < end and heads(data) < ex.get("answers", 1):
            s.settimeout(max(0.01, end - time.monotonic()))
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            if not b:
                break
            data += b
        (held.append if ex.get("hold") else lambda c: c.close())(s)
    except OSError as e:
        err = errno.errorcode.get(e.errno, type(e).__name__)
    text = data.decode("latin-1")
    res[ex["id"]] = {"statuses": [int(x) for x in re.findall(r"(?m)^HTTP/1\.[01] (\d{3})", text)],
                     "why": text.split("\r\n\r\n", 1)[-1][:200], "ms": int((time.monotonic() - t) * 1000), "err": err}
print(json.dumps({"proxy": proxy, "socket": egress_socket(), "results": res}))
`,
  javascript: (ex) => String.raw`import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
const EX = ${JSON.stringify(ex)};
const proxy = process.env.HTTP_PROXY ?? null;
function egressSocket(dir = '/opt/mcp/egress') {
  let names;
  try { names = fs.readdirSync(dir); } catch { return null; }
  for (const n of names) {
    const p = path.join(dir, n);
    let st;
    try { st = fs.lstatSync(p); } catch { continue; }
    if (st.isSocket()) return p;
    if (st.isDirectory()) { const f = egressSocket(p); if (f) return f; }
  }
  return null;
}
const heads = (s) => (s.match(/^HTTP\/1\.[01] \d{3}[^\r\n]*\r\n(?:[^\r\n]+\r\n)*\r\n/gm) || []).length;
function exchange(ex) {
  return new Promise((done) => {
    const t = Date.now();
    let data = '';
    let err = null;
    const opts = ex.via === 'socket' ? { path: egressSocket() || '/nonexistent' }
      : { host: '127.0.0.1', port: Number(proxy.split(':').pop().replace(/\/$/, '')) };
    const s = net.connect(opts);
    const finish = () => {
      clearTimeout(timer);
      if (!ex.hold) s.destroy();
      done({ statuses: [...data.matchAll(/^HTTP\/1\.[01] (\d{3})/gm)].map((m) => Number(m[1])),
        why: data.split('\r\n\r\n').slice(1).join('\r\n\r\n').slice(0, 200), ms: Date.now() - t, err });
    };
    const timer = setTimeout(finish, ${READ_MS});
    s.setEncoding('latin1');
    s.on('connect', () => s.write(Buffer.from(ex.send, 'latin1')));
    s.on('data', (d) => { data += d; if (heads(data) >= (ex.answers ?? 1)) finish(); });
    s.on('end', finish);
    s.on('error', (e) => { err = e.code || String(e); finish(); });
  });
}
const results = {};
for (const ex of EX) results[ex.id] = await exchange(ex);
console.log(JSON.stringify({ proxy, socket: egressSocket(), results }));
process.exit(0);
`,
};

/** Run the exchanges in A; returns the report. */
async function exchanges({ a, call, lang, diag }, ex, label) {
  const { sc, ms } = await call(a, RUNNER[lang](ex), { timeout_seconds: 110 });
  const rep = report(sc);
  diag(`${label}: ${ms} ms: ${show(rep)}`);
  assert.match(String(rep.proxy), /^http:\/\/127\.0\.0\.1:\d+/, `the session of the egress token has its relay: ${show(rep)}`);
  return rep;
}

/** An exchange that must be refused by the proxy with a reason, at once. */
function assertRefused(rep, id) {
  const r = rep.results[id];
  assert.ok(r, `exchange ${id} ran`);
  assert.ok([400, 403].includes(r.statuses[0]), `${id}: refused with 400 or 403, not ${show(r)}`);
  assert.match(r.why, /egress (denied|refused)/, `${id}: the answer says why: ${show(r)}`);
  assert.ok(r.ms < FAST_MS, `${id}: refused in ${r.ms} ms (< ${FAST_MS})`);
}

// Internal addresses in the forms a URL parser or resolver may take for
// them, against the listener (which must hear nothing).
const DISGUISES = (port) => [
  `127.0.0.1:${port}`,
  `localhost:${port}`,
  `[::1]:${port}`,
  `0.0.0.0:${port}`,
  `127.1:${port}`,
  `2130706433:${port}`,
  `0x7f000001:${port}`,
  `0177.0.0.1:${port}`,
  `[::ffff:127.0.0.1]:${port}`,
  `127.0.0.77:${port}`, // the test network's address as a literal: not in the token's policy
  `169.254.169.254:80`,
  `metadata.google.internal:80`,
  `10.0.0.1:80`,
  `172.16.0.1:80`,
  `192.168.0.1:80`,
];

const bothLanguages = (name) => ({ python: { name }, javascript: { name } });

export const EGRESS_CASES = [
  {
    ...bothLanguages('egress on: internal addresses in every disguise, the proxy and nginx are refused through the relay (403, at once) and reach no listener'),
    fixture: egressFixture,
    async hostile(ctx) {
      const fx = ctx.fixture;
      await withEgressTargets(fx, async ({ port, heard, requests }) => {
        const targets = [
          ...DISGUISES(port),
          `127.0.0.1:${fx.proxyPort}`,
          `127.0.0.1:${NGINX_PORT}`,
          `allowed.egress.test:${port}`, // an allowed name on a port its policy does not name
          `private.egress.test:${fx.httpPort}`, // allowed, but it resolves to 127.0.0.78: a denied network
        ];
        const ex = [{ id: 'control', via: 'relay', send: get(`allowed.egress.test:${fx.httpPort}`, '/control') }];
        for (const h of targets) ex.push({ id: `GET ${h}`, via: 'relay', send: get(h) }, { id: `CONNECT ${h}`, via: 'relay', send: connect(h) });
        const rep = await exchanges(ctx, ex, 'disguises');
        assert.equal(rep.results.control.statuses[0], 200, `the allowed host answers through the relay: ${show(rep.results.control)}`);
        for (const e of ex.slice(1)) assertRefused(rep, e.id);
        assert.deepEqual(heard, [], 'the host listener heard nothing');
        assert.deepEqual(requests, [{ local: '127.0.0.77', url: '/control' }], 'only the allowed request reached the test server, on 127.0.0.77');
      });
    },
  },
  {
    ...bothLanguages('egress on: the code cannot use the egress socket itself, and a pipelined second request is refused'),
    fixture: egressFixture,
    async hostile(ctx) {
      const fx = ctx.fixture;
      await withEgressTargets(fx, async ({ port, heard, requests }) => {
        const allowed = `allowed.egress.test:${fx.httpPort}`;
        const ex = [
          { id: 'socket: allowed', via: 'socket', send: get(allowed, '/direct') },
          { id: 'socket: GET loopback', via: 'socket', send: get(`127.0.0.1:${port}`) },
          { id: 'socket: CONNECT loopback', via: 'socket', send: connect(`127.0.0.1:${port}`) },
          { id: 'socket: not HTTP', via: 'socket', send: 'SSH-2.0-OpenSSH_9.2\r\n\r\n' },
          // One connection, two requests: the second names a denied host.
          { id: 'pipelined', via: 'relay', answers: 2, send: get(allowed, '/first', false) + get(`127.0.0.1:${port}`, '/second') },
        ];
        const rep = await exchanges(ctx, ex, 'direct and pipelined');
        assert.ok(typeof rep.socket === 'string' && rep.socket.startsWith('/opt/mcp/egress/'), `the egress socket is in the sandbox: ${rep.socket}`);
        // Only the relay (the executor, PID 1) may use the socket: to the
        // code it is closed, whatever it sends.
        for (const id of ['socket: allowed', 'socket: GET loopback', 'socket: CONNECT loopback', 'socket: not HTTP']) {
          const r = rep.results[id];
          assert.ok(['EACCES', 'EPERM'].includes(r.err) && r.statuses.length === 0, `${id}: the code cannot use the egress socket itself: ${show(r)}`);
        }
        const p = rep.results.pipelined;
        assert.equal(p.statuses[0], 200, `the first pipelined request is allowed: ${show(p)}`);
        assert.ok(p.statuses.length === 1 || [400, 403].includes(p.statuses[1]), `the second is refused or the connection closed: ${show(p)}`);
        assert.deepEqual(heard, [], 'the host listener heard nothing');
        assert.deepEqual(
          requests.map((r) => `${r.local} ${r.url}`).sort(),
          ['127.0.0.77 /first'],
          'only the allowed request reached the test server',
        );
      });
    },
  },
  {
    ...bothLanguages('egress on: a flood of connections to the relay is held to egress_connections, the rest refused at once'),
    fixture: egressFixture,
    async hostile(ctx) {
      const fx = ctx.fixture;
      const cap = Number(effectiveConfig().egress_connections);
      await withEgressTargets(fx, async () => {
        const ex = Array.from({ length: cap + 8 }, (_, i) => ({
          id: `c${i}`,
          via: 'relay',
          hold: true,
          send: connect(`allowed.egress.test:${fx.httpPort}`),
        }));
        const rep = await exchanges(ctx, ex, 'flood');
        const firsts = ex.map((e) => rep.results[e.id].statuses[0]);
        assert.equal(firsts.filter((s) => s === 200).length, cap, `exactly egress_connections (${cap}) tunnels at once: ${show(firsts)}`);
        assert.ok(firsts.slice(cap).every((s) => s === 429), `the others get 429: ${show(firsts)}`);
        for (const e of ex.slice(cap)) assert.ok(rep.results[e.id].ms < FAST_MS, `${e.id} refused at once: ${show(rep.results[e.id])}`);
      });
    },
  },
];
