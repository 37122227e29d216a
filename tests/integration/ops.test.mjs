// Operations: metrics (on their own loopback listener, MCP_METRICS_URL),
// the audit log (and its reopening on SIGHUP), the stack's log rotation
// (<state>/logrotate.conf, written by scripts/run), /healthz, and a
// configuration value taking effect.  Reads the state folder of the stack
// (MCP_STATE_DIR, set by scripts/test) for the audit log and the pid.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  MCP_URL,
  MCP_TOKEN,
  MCP_METRICS_URL as METRICS_URL,
  NGINX_TOKEN_REQUESTS,
  TEST_TIMEOUT_MS,
  connectClient,
  closeClient,
  runPython,
  rawRequest,
  randomToken,
  scrapeMetrics as metrics,
} from './lib/common.mjs';
import { effectiveConfig, sleep, stackTokens } from './lib/host.mjs';
import { RawSession, request } from './lib/rpc.mjs';

const STATE = process.env.MCP_STATE_DIR;
const opts = { timeout: TEST_TIMEOUT_MS };
const hostOpts = { timeout: TEST_TIMEOUT_MS, skip: STATE ? false : 'MCP_STATE_DIR not set: no host access to the stack' };
const base = new URL(MCP_URL);
const at = (p) => new URL(p, base).href;

const get = (m, k) => m.get(k) ?? 0;

test('/healthz answers 200 with a JSON status', opts, async () => {
  const r = await rawRequest('GET', at('/healthz'));
  assert.equal(r.status, 200, r.body);
  assert.deepEqual(JSON.parse(r.body), { status: 'ok', reason: 'ok' });
});

test('/healthz takes GET or HEAD; a flood of it is answered from nginx\'s copy, which the responders compute about once a second', opts, async (t) => {
  const post = await rawRequest('POST', at('/healthz'), { 'Content-Type': 'application/json' }, '{}');
  assert.equal(post.status, 405, `POST /healthz: ${post.body}`);
  assert.equal(post.headers.allow, 'GET, HEAD', 'Allow');
  assert.deepEqual(JSON.parse(post.body), { status: 'unavailable', reason: 'GET or HEAD only' });
  const head = await rawRequest('HEAD', at('/healthz'));
  assert.equal(head.status, 200, 'HEAD /healthz');
  const k = 'mcp_health_checks_total';
  // nginx keeps an answer a second: after 2.5 s the next asks the responders.
  await sleep(2500);
  const before = await metrics();
  assert.ok(before.has(k), `/metrics has ${k}`);
  assert.equal((await rawRequest('GET', at('/healthz'))).status, 200);
  const mid = await metrics();
  assert.ok(get(mid, k) - get(before, k) >= 1, 'a /healthz after 2.5 s is computed by a responder');
  // 16 at a time for 3 s: nginx's copy expires two or three times.
  const statuses = {};
  let n = 0;
  const started = Date.now();
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (Date.now() - started < 3000) {
      n++;
      const r = await rawRequest('GET', at('/healthz'));
      statuses[r.status] = (statuses[r.status] || 0) + 1;
      if (r.status === 200) assert.deepEqual(JSON.parse(r.body), { status: 'ok', reason: 'ok' });
    }
  }));
  const secs = (Date.now() - started) / 1000;
  const computed = get(await metrics(), k) - get(mid, k);
  t.diagnostic(`${n} /healthz, 16 at a time, in ${secs.toFixed(1)} s: ${JSON.stringify(statuses)}; the responders computed ${computed}`);
  assert.deepEqual(statuses, { 200: n });
  assert.ok(computed >= 1, 'the copy expired and a responder computed it again');
  assert.ok(computed <= Math.ceil(secs) + 2, `about one a second: ${computed} in ${secs.toFixed(1)} s`);
});

/**
 * A session of `token` whose call sleeps `seconds`, answered as a stream.
 * resumes(k) sends k GETs resuming that stream: each waits for the call in a
 * responder thread of its own, or in nginx's queue when none is free.
 */
async function longCall(token, name, seconds) {
  const s = new RawSession({ token, name });
  const init = await s.init();
  assert.equal(init.status, 200, `initialize (${name}): ${init.body}`);
  const streamed = { Accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': '2025-11-25' };
  const body = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call',
    params: { name: 'execute_python', arguments: { code: `import time; time.sleep(${seconds}); print("done")` } } });
  const held = { s, ended: 0 };
  held.call = request('POST', s.headers(streamed), body).then((r) => { held.ended = Date.now(); return r; });
  // The call's stream record names its events (fcgi/stream.h).
  const dir = path.join(STATE, 'sessions', s.sid, 'streams');
  let prefix;
  for (let i = 0; i < 100 && !prefix; i++) {
    await sleep(100);
    prefix = fs.existsSync(dir) ? fs.readdirSync(dir).find((n) => /^[0-9a-f]{12}$/.test(n)) : undefined;
  }
  assert.ok(prefix, `the call of ${name} has a stream record`);
  // A GET resuming the call's stream (or, with id, another one), and k of them.
  held.resume = (opts = {}, id = `${prefix}-0`) =>
    request('GET', s.headers({ Accept: 'text/event-stream', 'MCP-Protocol-Version': '2025-11-25', 'Last-Event-ID': id }), undefined, opts);
  held.resumes = (k) => Array.from({ length: k }, () => held.resume());
  return held;
}

// The stack's tokens without max_requests, those without options first.
const unboundTokens = () => stackTokens().filter(([, , o]) => !/max_requests=/.test(o))
  .sort((x, y) => (x[2] !== '') - (y[2] !== ''));

test('the endpoints are answered while every other responder thread holds a request (a socket and a thread of their own)', hostOpts, async (t) => {
  const cfg = effectiveConfig();
  const threads = cfg.responders * cfg.responder_threads;
  // More requests than the responders have threads. One token cannot send
  // them (nginx's 64; the threads are more, responder_threads auto): the
  // stack's tokens each hold a call and up to 59 resumes of its stream.
  const perToken = NGINX_TOKEN_REQUESTS - 4;
  const want = threads + 5;
  const tokens = unboundTokens().slice(0, Math.ceil(want / perToken));
  assert.ok(tokens.length * perToken >= want, `the stack has tokens enough for ${want} requests: ${tokens.length}`);
  const held = [];
  try {
    for (const [name, tok] of tokens) held.push(await longCall(tok, `ops-threads-${name}`, 10));
    const resumes = [];
    let left = want - held.length;
    for (const h of held) {
      const k = Math.min(perToken - 1, left);
      left -= k;
      resumes.push(...h.resumes(k));
    }
    await sleep(1500);
    const asked = Date.now();
    // /healthz may come from nginx's copy (a second or two old); /cell and
    // /metrics always come from a responder's endpoint thread.
    const h = await rawRequest('GET', at('/healthz'));
    const c = await rawRequest('GET', new URL('/cell', METRICS_URL).href);
    const m = await rawRequest('GET', new URL('/metrics', METRICS_URL).href);
    const answered = Date.now();
    t.diagnostic(`${threads} responder threads, ${want} requests of ${held.length} tokens holding or waiting for them: ` +
      `/healthz, /cell and /metrics answered in ${answered - asked} ms`);
    assert.equal(h.status, 200, `/healthz: ${h.body}`);
    assert.equal(c.status, 200, `/cell: ${c.body}`);
    assert.equal(m.status, 200, '/metrics');
    assert.ok(held.every((x) => x.ended === 0), 'answered while the calls, and the resumes waiting for them, held every other thread');
    for (const x of held) assert.match((await x.call).body, /done/, 'the call answered');
    for (const x of await Promise.all(resumes)) assert.ok([200, 404].includes(x.status), `a resume: HTTP ${x.status} ${x.body}`);
  } finally {
    for (const x of held) await x.s.del();
  }
});

test('one token with all the requests nginx lets it have at once (64) leaves responder threads to another token', hostOpts, async (t) => {
  const cfg = effectiveConfig();
  const threads = cfg.responders * cfg.responder_threads;
  const [a, b] = unboundTokens();
  assert.ok(b, 'the stack has two tokens without max_requests');
  const other = new RawSession({ token: b[1], name: 'ops-flood-other' });
  assert.equal((await other.init()).status, 200);
  let h;
  try {
    // A call and more resumes of its stream than nginx lets in: the
    // admitted ones hold 64 threads until the call ends.
    const extra = 6;
    h = await longCall(a[1], 'ops-flood', 8);
    const resumes = h.resumes(NGINX_TOKEN_REQUESTS - 1 + extra);
    await sleep(1500);
    const asked = Date.now();
    const p = await other.ping({ timeoutMs: 30_000 });
    const answered = Date.now();
    const callRan = h.ended === 0;
    const rs = await Promise.all(resumes);
    const refused = rs.filter((x) => x.status === 429);
    t.diagnostic(`${threads} responder threads; one token's call and ${rs.length} resumes at once: ${refused.length} ` +
      `refused by nginx; the other token's ping answered in ${answered - asked} ms`);
    assert.equal(p.status, 200, `the other token's ping: HTTP ${p.status} ${p.body}`);
    assert.ok(callRan, `the ping was answered while the flood held its threads (${threads} threads in all)`);
    assert.ok(refused.length >= extra, `nginx refused the requests beyond 64: ${refused.length}`);
    for (const x of refused) assert.match(x.body, /Too Many Requests/, x.body);
    for (const x of rs.filter((y) => y.status !== 429)) assert.ok([200, 404].includes(x.status), `a resume: HTTP ${x.status} ${x.body}`);
    assert.match((await h.call).body, /done/, 'the call answered');
  } finally {
    if (h) await h.s.del();
    await other.del();
  }
});

test('metrics change as calls happen', opts, async () => {
  const before = await metrics();
  const c = await connectClient('ops-metrics');
  try {
    await runPython(c.client, { code: 'print("ok")' });
    await runPython(c.client, { code: 'raise SystemExit(3)' });
    await runPython(c.client, { code: 'import time; time.sleep(5)', timeout_seconds: 1 });
    await runPython(c.client, { code: 'print(1)', timeout_seconds: 0 });
  } finally {
    await closeClient(c);
  }
  const denied = await rawRequest('POST', MCP_URL, { 'Content-Type': 'application/json', Accept: 'application/json' }, '{}');
  assert.equal(denied.status, 401);
  const after = await metrics();
  const d = (k) => get(after, k) - get(before, k);
  assert.equal(d('mcp_executions_total{outcome="ok"}'), 1);
  assert.equal(d('mcp_executions_total{outcome="error"}'), 1);
  assert.equal(d('mcp_executions_total{outcome="timeout"}'), 1);
  assert.equal(d('mcp_executions_total{outcome="refused"}'), 1);
  assert.equal(d('mcp_token_calls_total{token="default"}'), 4);
  assert.equal(d('mcp_execution_duration_seconds_count'), 4);
  assert.ok(d('mcp_execution_duration_seconds_sum') >= 1, 'the timed-out call lasted a second');
  assert.equal(d('mcp_sessions_created_total'), 1);
  assert.equal(d('mcp_sessions_deleted_total'), 1);
  // nginx answers a request without a valid token itself (401): no
  // responder sees it, so none counts it.
  assert.equal(d('mcp_requests_rejected_total{reason="unauthorized"}'), 0);
  assert.ok(after.has('mcp_sessions_live') && after.has('mcp_sandboxes_ready'));
  assert.ok(get(after, 'mcp_sandbox_starts_total') >= 1);
});

test('resumed streams are counted by outcome: answered, left, unknown (lost: faults.test.mjs)', hostOpts, async () => {
  const before = await metrics();
  const h = await longCall(MCP_TOKEN, 'ops-resumes', 2);
  try {
    // One resume waits for the answer; one leaves at once (its record stays
    // for the first); one names a stream this session never had.
    const waiting = h.resume();
    const left = await h.resume({ timeoutMs: 500 }).then((x) => x.status, (e) => e);
    assert.ok(left instanceof Error, `the client left its resumed stream: ${left}`);
    const unknown = await h.resume({}, '0123456789ab-0');
    assert.equal(unknown.status, 404, unknown.body);
    const r = await waiting;
    assert.equal(r.status, 200);
    assert.match(r.body, /"stdout":"done\\n"/, 'the resumed stream carries the answer');
    await h.call;
    // The responder counts a client that left when it notices (a quarter second).
    await sleep(1000);
  } finally {
    await h.s.del();
  }
  const after = await metrics();
  const d = (k) => get(after, k) - get(before, k);
  assert.equal(d('mcp_stream_resumes_total{outcome="answered"}'), 1, 'answered');
  assert.equal(d('mcp_stream_resumes_total{outcome="left"}'), 1, 'left');
  assert.equal(d('mcp_stream_resumes_total{outcome="unknown"}'), 1, 'unknown');
  assert.equal(d('mcp_stream_resumes_total{outcome="lost"}'), 0, 'lost');
});

test('/metrics is not served on the public listener, only on a loopback listener of its own', opts, async () => {
  // Behind a TLS proxy on the same host every client comes from 127.0.0.1:
  // "loopback only" on the public listener would be public.
  const pub = await rawRequest('GET', at('/metrics'));
  assert.equal(pub.status, 404, 'GET /metrics on the public listener');
  assert.ok(!/mcp_executions_total/.test(pub.body), 'no counters on the public listener');
  const u = new URL(METRICS_URL);
  assert.equal(u.hostname, '127.0.0.1', 'the metrics listener is on loopback');
  assert.notEqual(u.port, base.port, 'on a port of its own');
  const r = await rawRequest('GET', METRICS_URL);
  assert.equal(r.status, 200);
  assert.match(r.body, /mcp_executions_total/);
  if (!STATE) return;
  // The rendered configuration: the metrics location only in a server that
  // listens on 127.0.0.1 alone.
  const conf = fs.readFileSync(path.join(STATE, 'nginx', 'nginx.conf'), 'utf8');
  const servers = conf.split(/\n\s*server \{/).slice(1);
  const withMetrics = servers.filter((b) => /location = \/metrics/.test(b));
  assert.equal(withMetrics.length, 1, 'one server has /metrics');
  const listens = [...withMetrics[0].matchAll(/^\s*listen\s+([^;]+);/gm)].map((m) => m[1].trim());
  assert.deepEqual(listens, [`127.0.0.1:${u.port}`], 'and it listens on loopback only');
});

function auditLines() {
  const p = path.join(STATE, 'logs', 'audit.log');
  return fs.existsSync(p) ? fs.readFileSync(p, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)) : [];
}

test('the audit line of a call has the right fields and no secrets', hostOpts, async () => {
  const secret = `s3cr3t-${randomToken()}`;
  const code = `import os\nprint(len(os.environ["SECRET_VALUE"]))  # ${randomToken()}`;
  const c = await connectClient('ops-audit');
  let sid;
  try {
    sid = c.transport.sessionId;
    const r = await runPython(c.client, { code, env_variables: { SECRET_VALUE: secret } });
    assert.equal(r.structuredContent.stdout, `${secret.length}\n`);
  } finally {
    await closeClient(c);
  }
  const line = auditLines().find((l) => l.session_id === sid);
  assert.ok(line, 'an audit line for the session');
  assert.deepEqual(Object.keys(line).sort(), ['bytes_returned', 'code_bytes', 'code_sha256', 'cpu_ms', 'duration_ms',
    'exit_code', 'outcome', 'packages', 'peak_memory_kb', 'request_id', 'restored', 'session_id', 'state_lost', 'time',
    'token', 'tool'].sort());
  assert.equal(line.restored, false, 'a sandbox that did not hibernate');
  assert.equal(line.state_lost, false);
  assert.equal(line.tool, 'execute_python');
  assert.equal(line.token, 'default');
  assert.equal(line.outcome, 'ok');
  assert.equal(line.exit_code, 0);
  assert.equal(line.code_sha256, createHash('sha256').update(code).digest('hex'));
  assert.equal(line.code_bytes, Buffer.byteLength(code));
  assert.deepEqual(line.packages, []);
  assert.ok(line.cpu_ms > 0 && line.peak_memory_kb > 0 && line.duration_ms > 0);
  assert.equal(line.bytes_returned, `${secret.length}\n`.length);
  assert.match(line.request_id, /^[0-9a-f]{32}$/);
  assert.ok(!Number.isNaN(Date.parse(line.time)));
  const raw = fs.readFileSync(path.join(STATE, 'logs', 'audit.log'), 'utf8');
  assert.ok(!raw.includes(secret), 'no env value in the audit log');
  assert.ok(!raw.includes(MCP_TOKEN), 'no token in the audit log');
  assert.ok(!raw.includes('SECRET_VALUE'), 'no code in the audit log');
});

// Six print(1) calls in a new session, enough to reach every responder
// process; its session id.
async function callsOnEveryResponder(name) {
  const c = await connectClient(name);
  try {
    for (let i = 0; i < 6; i++) await runPython(c.client, { code: 'print(1)' });
    return c.transport.sessionId;
  } finally {
    await closeClient(c);
  }
}

test('SIGHUP to the master reopens the audit log (rotation)', hostOpts, async () => {
  const log = path.join(STATE, 'logs', 'audit.log');
  const rotated = `${log}.1`;
  fs.renameSync(log, rotated);
  try {
    process.kill(Number(fs.readFileSync(path.join(STATE, 'mcp-server.pid'), 'utf8')), 'SIGHUP');
    await new Promise((r) => setTimeout(r, 300));
    const sid = await callsOnEveryResponder('ops-rotate');
    assert.ok(fs.existsSync(log), 'a new audit.log was opened');
    assert.equal(auditLines().filter((l) => l.session_id === sid).length, 6, 'every call went to the new file');
    assert.ok(!fs.readFileSync(rotated, 'utf8').includes(sid), 'nothing went to the rotated file');
  } finally {
    if (fs.existsSync(rotated)) {
      const rest = fs.readFileSync(rotated, 'utf8');
      fs.appendFileSync(log, rest);
      fs.unlinkSync(rotated);
    }
  }
});

// The rotation a scripts/run stack runs on its logs (scripts/lib/rotate-logs
// with <state>/logrotate.conf), forced once here: each log is moved to .1,
// and each writer goes on in a new file (the responders after the master's
// SIGHUP, Squid after SIGUSR1; nginx's logs and the server's standard error
// are copied and truncated in place).  Afterwards the old lines are put
// back, as the test above does.
test('the stack rotates its logs, and every writer goes on in a new file', hostOpts, async (t) => {
  const conf = path.join(STATE, 'logrotate.conf');
  if (!fs.existsSync(conf)) {
    t.skip('no logrotate.conf (MCP_LOGS=stdout or MCP_LOG_ROTATE_SIZE=off)');
    return;
  }
  const logs = path.join(STATE, 'logs');
  const file = (n) => path.join(logs, n);
  const names = ['audit.log', 'nginx-access.log', 'mcp-server.log'];
  const before = Object.fromEntries(names.map((n) => [n, fs.readFileSync(file(n))]));
  const status = path.join(STATE, 'logrotate-test.status');
  const folders = [logs, path.join(STATE, 'egress', 'logs')];
  execFileSync('logrotate', ['-f', '-s', status, conf]);
  try {
    for (const n of names) {
      const old = fs.readFileSync(file(`${n}.1`));
      assert.ok(old.subarray(0, before[n].length).equals(before[n]), `${n}.1 holds what ${n} held`);
    }
    assert.ok(fs.statSync(file('mcp-server.log')).size < before['mcp-server.log'].length,
      'mcp-server.log was truncated in place');
    const sid = await callsOnEveryResponder('ops-logrotate');
    assert.equal(auditLines().filter((l) => l.session_id === sid).length, 6, 'every call went to the new audit.log');
    assert.ok(!fs.readFileSync(file('audit.log.1'), 'utf8').includes(sid), 'none to the rotated one');
    const access = fs.readFileSync(file('nginx-access.log'), 'utf8');
    assert.ok(access.split('\n').filter((l) => l.includes(`session=${sid}`)).length >= 6,
      'nginx wrote the requests to its new access log');
    assert.ok(!fs.readFileSync(file('nginx-access.log.1'), 'utf8').includes(sid), 'none to the rotated one');
  } finally {
    // Put every rotated file's lines back (after the new ones: the writers
    // hold the new files open).
    for (const dir of folders) {
      for (const n of fs.existsSync(dir) ? fs.readdirSync(dir) : []) {
        if (!n.endsWith('.1')) continue;
        const rotated = path.join(dir, n);
        fs.appendFileSync(path.join(dir, n.slice(0, -2)), fs.readFileSync(rotated));
        fs.unlinkSync(rotated);
      }
    }
    fs.rmSync(status, { force: true });
  }
});

test('a configuration value takes effect: the timeout cap', opts, async () => {
  const cap = Number(process.env.MCP_TEST_TIMEOUT_MAX || 0);
  const c = await connectClient('ops-config');
  try {
    const tool = (await c.client.listTools()).tools.find((t) => t.name === 'execute_python');
    const max = tool.inputSchema.properties.timeout_seconds.maximum;
    if (cap) assert.equal(max, cap, 'tools/list shows the configured cap');
    const over = await runPython(c.client, { code: 'print(1)', timeout_seconds: max + 1 });
    assert.equal(over.isError, true);
    assert.match(over.content[0].text, new RegExp(`timeout_seconds must be an integer from 1 to ${max}`));
    const at = await runPython(c.client, { code: 'print(1)', timeout_seconds: max });
    assert.equal(at.structuredContent.stdout, '1\n');
  } finally {
    await closeClient(c);
  }
});

// The CPU weights (cpu.shares, or cpu.weight on cgroup v2) of the
// sandboxes the pool is booting now (pool/.new-*), added to `seen`.
function poolBootWeights(cfg, seen) {
  const pool = path.join(STATE, 'pool');
  for (const n of fs.readdirSync(pool).filter((x) => x.startsWith('.new-'))) {
    let id;
    try {
      id = fs.readFileSync(path.join(pool, n, 'sandbox'), 'utf8').trim();
    } catch {
      continue; /* published or removed meanwhile */
    }
    for (const f of [
      path.join('/sys/fs/cgroup/cpu', cfg.cgroup_parent, `mcp${id}`, 'cpu.shares'),
      path.join('/sys/fs/cgroup', cfg.cgroup_parent, `mcp${id}`, 'cpu.weight'),
    ]) {
      try {
        seen.add(fs.readFileSync(f, 'utf8').trim());
      } catch {
        /* not this cgroup version, or not created yet */
      }
    }
  }
}

// The pool follows demand (pool_max, pool_window): after a burst of new
// sessions the keeper keeps more sandboxes started (mcp_pool_target), and
// the pool fills up to it; a later burst finds them ready.  Nobody waits
// for those boots: they weigh a quarter of a sandbox at work on the cores
// (cpu.shares 256, cpu.weight 25), not the 4 times of a boot a session
// waits for (sandbox/cgroups.h).
test('a burst of new sessions grows the pool beyond pool_size (mcp_pool_target), up to pool_max, and it fills', hostOpts, async (t) => {
  const cfg = effectiveConfig(STATE);
  if (!(cfg.pool_size > 0 && cfg.pool_max > cfg.pool_size)) return; // not configured to grow
  const burst = Math.min(cfg.pool_max, cfg.pool_size + 3);
  const clients = await Promise.all(Array.from({ length: burst }, (_, i) => connectClient(`ops-pool-${i}`)));
  try {
    await Promise.all(clients.map((c) => runPython(c.client, { code: 'print(1)' })));
  } finally {
    await Promise.all(clients.map((c) => closeClient(c)));
  }
  let m;
  const ready = () => fs.readdirSync(path.join(STATE, 'pool')).filter((n) => /^[0-9a-f]{32}$/.test(n)).length;
  const weights = new Set();
  const deadline = Date.now() + 90_000;
  let scraped = 0;
  do {
    if (cfg.cgroup_parent) poolBootWeights(cfg, weights);
    if (Date.now() - scraped >= 500) {
      m = await metrics();
      scraped = Date.now();
      if (get(m, 'mcp_pool_target') >= burst && ready() >= get(m, 'mcp_pool_target')) break;
    }
    await new Promise((r) => setTimeout(r, 20));
  } while (Date.now() < deadline);
  const target = get(m, 'mcp_pool_target');
  assert.ok(target >= burst && target <= cfg.pool_max, `mcp_pool_target ${target}: from ${burst} new sessions up to pool_max ${cfg.pool_max}`);
  assert.ok(ready() >= target, `the pool filled up to it: ${ready()} ready of ${target}`);
  assert.equal(get(m, 'mcp_sandboxes_ready'), ready(), 'mcp_sandboxes_ready counts them');
  if (cfg.cgroup_parent && cfg.backend !== 'direct') {
    // Its weight holds from runsc's first step: runsc creates the cgroup
    // with the bundle's (linux.resources.cpu.shares), not at the default.
    let checked = 0;
    for (const n of fs.readdirSync(path.join(STATE, 'pool')).filter((x) => /^[0-9a-f]{32}$/.test(x))) {
      let spec;
      try {
        spec = JSON.parse(fs.readFileSync(path.join(STATE, 'pool', n, 'bundle', 'config.json'), 'utf8'));
      } catch (e) {
        if (e.code === 'ENOENT') continue; /* claimed meanwhile */
        throw e;
      }
      assert.equal(spec.linux?.resources?.cpu?.shares, 256, `pool sandbox ${n} is created at a quarter of the weight`);
      checked++;
    }
    assert.ok(checked > 0, 'the bundle of a ready pool sandbox was read');
  }
  if (weights.size > 0) {
    const seen = [...weights].sort().join(', ');
    t.diagnostic(`CPU weights of the pool's boots: ${seen}`);
    assert.ok(!weights.has('4096') && !weights.has('400'), `a pool boot never weighs what a boot a session waits for does (seen: ${seen})`);
    assert.ok(weights.has('256') || weights.has('25'), `a pool boot weighs a quarter of a sandbox at work (seen: ${seen})`);
  }
});
