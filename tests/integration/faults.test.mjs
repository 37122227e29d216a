// Sessions shared on disk by the responder pool: serialization, ownership,
// idle expiry, capacity limits, and faults (a responder killed in the middle
// of a call, a sandbox killed from outside between calls).
//
// It needs its own stack (scripts/test starts one in run-test-faults/):
// small max_sessions, max_concurrent, capacity_wait, busy_wait and
// idle_timeout, and a tokens file with a second token; and it runs as root
// on the stack's host with MCP_STATE_DIR set, since it kills processes and
// inspects /proc, /sys/fs/cgroup and the state folder.  The settings are
// read from the running server (mcp-server --print-config in the master's
// environment), so the assertions follow whatever the stack was given.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import tls from 'node:tls';
import http from 'node:http';
import net from 'node:net';
import {
  MCP_URL,
  MCP_TOKEN,
  CA_PEM,
  PROTOCOL_VERSION,
  TEST_TIMEOUT_MS,
  NGINX_TOKEN_REQUESTS,
  randomToken,
  SESSION_ID,
  connectClient,
  connectClient2,
  closeClient,
  runPython,
} from './lib/common.mjs';
import { RawSession, request, resultText, show } from './lib/rpc.mjs';
import {
  STATE_DIR,
  sleep,
  alive,
  effectiveConfig,
  inventory,
  waitNoStrays,
  leftoversOf,
  sandboxIdOf,
  sessionProcesses,
  responderServing,
  otherToken,
  stackTokens,
} from './lib/host.mjs';

const opts = { timeout: TEST_TIMEOUT_MS };

if (!STATE_DIR) throw new Error('faults.test.mjs needs MCP_STATE_DIR (the state folder of the stack under test)');
if (process.getuid() !== 0) throw new Error('faults.test.mjs must run as root (it kills processes of the stack)');

const cfg = effectiveConfig();

// Every session a test opened: ended (DELETE) by the test, or here.
const opened = new Set();

async function open(name, token = MCP_TOKEN) {
  const s = new RawSession({ name: `faults-${name}`, token });
  const r = await s.init();
  assert.equal(r.status, 200, `initialize (${name}): HTTP ${r.status} ${r.body}`);
  assert.match(s.sid, SESSION_ID, 'a session id');
  opened.add(s);
  return s;
}

async function end(s) {
  if (!s) return;
  await s.del().catch(() => {});
  opened.delete(s);
}

/** A tools/call that must succeed; returns structuredContent. */
async function ok(s, code, args = {}) {
  const r = await s.run(code, args);
  assert.equal(r.status, 200, `tools/call: HTTP ${r.status} ${r.body}`);
  const sc = r.result?.structuredContent;
  assert.ok(sc && !r.result.isError && sc.exit_code === 0, `the call succeeds: ${show(r.json)}`);
  return sc;
}

const workFile = (s, name) => path.join(STATE_DIR, 'sessions', s.sid, 'work', name);

/** Wait until the call running in session s has created /work/<name> (seen from the host). */
async function waitFile(s, name, ms = 20000) {
  const deadline = Date.now() + ms;
  while (!fs.existsSync(workFile(s, name))) {
    if (Date.now() > deadline) assert.fail(`/work/${name} of session ${s.sid} did not appear within ${ms} ms`);
    await sleep(25);
  }
}

async function until(what, pred, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await pred();
    if (v) return v;
    if (Date.now() > deadline) assert.fail(`${what}: not within ${ms} ms`);
    await sleep(100);
  }
}

/** Poll fn() (a list) until it is empty or ms have passed; returns the last list. */
async function settle(fn, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v.length === 0 || Date.now() > deadline) return v;
    await sleep(200);
  }
}

function sessionFolders() {
  return fs.readdirSync(path.join(STATE_DIR, 'sessions')).filter((n) => SESSION_ID.test(n));
}

test('the stack under test has the settings this file needs, and no session yet', opts, async (t) => {
  t.diagnostic(
    `max_sessions ${cfg.max_sessions}, max_concurrent ${cfg.max_concurrent}, capacity_wait ${cfg.capacity_wait}, ` +
      `busy_wait ${cfg.busy_wait}, idle_timeout ${cfg.idle_timeout}, pool_size ${cfg.pool_size}, responders ${cfg.responders}`,
  );
  assert.ok(cfg.busy_wait >= 2 && cfg.busy_wait <= 5, `busy_wait 2-5 s (is ${cfg.busy_wait})`);
  assert.ok(cfg.idle_timeout >= 5 && cfg.idle_timeout <= 20, `idle_timeout 5-20 s (is ${cfg.idle_timeout})`);
  assert.ok(cfg.max_sessions >= 3 && cfg.max_sessions <= 8, `max_sessions 3-8 (is ${cfg.max_sessions})`);
  assert.ok(Number.isInteger(cfg.max_concurrent), `the server has a max_concurrent setting (print-config: ${cfg.max_concurrent})`);
  assert.ok(cfg.max_concurrent + 1 <= cfg.max_sessions, `max_concurrent + 1 <= max_sessions (${cfg.max_concurrent}, ${cfg.max_sessions})`);
  assert.ok(otherToken(MCP_TOKEN), `the tokens file in ${STATE_DIR} has a second token`);
  // Sessions of an earlier, interrupted run expire after idle_timeout.
  assert.deepEqual(await settle(sessionFolders, (cfg.idle_timeout + 15) * 1000), [], 'no session is open');
});

// ---- serialization ---------------------------------------------------------

test('two calls on one session at once are serialized: the second waits, then runs after the first', opts, async () => {
  const s = await open('serial');
  try {
    await ok(s, 'print("warm")');
    const first = s.run(
      'import time\nopen("first-start", "w").close()\ntime.sleep(1)\nopen("first-end", "w").close()\nprint("first")',
      { timeout_seconds: 30 },
    );
    await waitFile(s, 'first-start');
    const sc2 = await ok(s, 'import os\nprint(os.path.exists("first-end"))');
    const r1 = await first;
    assert.equal(r1.result?.structuredContent?.stdout, 'first\n', `the first call: ${show(r1.json)}`);
    assert.equal(sc2.stdout, 'True\n', 'the second call ran after the first had finished');
  } finally {
    await end(s);
  }
});

test('a call on a busy session waits busy_wait, then gets a clear "session busy" result; the running call is unharmed', opts, async (t) => {
  const s = await open('busy');
  try {
    await ok(s, 'print("warm")');
    const long = cfg.busy_wait + 3;
    const first = s.run(
      `import time\nopen("long-start", "w").close()\ntime.sleep(${long})\nopen("long-end", "w").close()\nprint("long")`,
      { timeout_seconds: long + 30 },
    );
    await waitFile(s, 'long-start');
    const r = await s.run('print("second")');
    t.diagnostic(`second call answered after ${r.ms} ms: ${show(r.json)}`);
    assert.equal(r.status, 200, `HTTP ${r.status}`);
    assert.equal(r.result?.isError, true, `isError: ${show(r.json)}`);
    assert.match(resultText(r.result), /busy/i, 'the result says the session is busy');
    assert.equal(r.result?.structuredContent?.stdout, undefined, 'the code did not run');
    assert.ok(r.ms >= cfg.busy_wait * 1000 - 300, `it waited busy_wait (${cfg.busy_wait} s): ${r.ms} ms`);
    assert.ok(r.ms < cfg.busy_wait * 1000 + 2500, `and not much longer: ${r.ms} ms`);
    assert.ok(!fs.existsSync(workFile(s, 'long-end')), 'the busy answer came while the first call still ran');
    const r1 = await first;
    assert.equal(r1.result?.structuredContent?.stdout, 'long\n', `the running call finished normally: ${show(r1.json)}`);
    assert.notEqual(r1.result?.isError, true);
    const sc = await ok(s, 'print("after")');
    assert.equal(sc.stdout, 'after\n');
  } finally {
    await end(s);
  }
});

test('calls on different sessions run in parallel', opts, async () => {
  const a = await open('parallel-a');
  const b = await open('parallel-b');
  try {
    await Promise.all([ok(a, 'print(1)'), ok(b, 'print(2)')]);
    const code = 'import time\nt0 = time.time()\ntime.sleep(1.5)\nprint(t0, time.time())';
    const [ra, rb] = await Promise.all([ok(a, code), ok(b, code)]);
    const [a0, a1] = ra.stdout.trim().split(' ').map(Number);
    const [b0, b1] = rb.stdout.trim().split(' ').map(Number);
    assert.ok(Math.max(a0, b0) < Math.min(a1, b1), `the two calls overlapped in time: A ${a0}-${a1}, B ${b0}-${b1}`);
  } finally {
    await end(a);
    await end(b);
  }
});

// ---- ownership -------------------------------------------------------------

test('2026-07-28: a sandbox handle belongs to the token that made it (call, resources/read, close_sandbox refused)', opts, async () => {
  const [, other] = otherToken(MCP_TOKEN);
  const mine = await connectClient2({ pin: '2026-07-28' });
  const theirs = await connectClient2({ pin: '2026-07-28' }, other, 'faults-thief');
  try {
    const secret = randomToken();
    const made = await mine.callTool({ name: 'execute_python', arguments: { code: `open("s.txt", "w").write("${secret}")` } });
    const handle = made.structuredContent.sandbox;
    const call = await theirs.callTool({
      name: 'execute_python',
      arguments: { code: 'print(open("s.txt").read())', sandbox: handle },
    });
    assert.equal(call.isError, true, 'a call with another token\'s handle is refused');
    assert.match(call.content[0].text, /Omit `sandbox` to start a new one/);
    await assert.rejects(theirs.readResource({ uri: `sandbox://${handle}/s.txt` }), /not found/i);
    const close = await theirs.callTool({ name: 'close_sandbox', arguments: { sandbox: handle } });
    assert.equal(close.isError, true, 'close_sandbox with another token is refused');
    for (const r of [call, close]) assert.ok(!JSON.stringify(r).includes(secret), 'nothing leaks');
    const still = await mine.callTool({ name: 'execute_python', arguments: { code: 'print(open("s.txt").read())', sandbox: handle } });
    assert.equal(still.structuredContent.stdout, `${secret}\n`, 'the owner still has the sandbox and its file');
    await mine.callTool({ name: 'close_sandbox', arguments: { sandbox: handle } });
  } finally {
    await mine.close();
    await theirs.close();
  }
});


test('a session belongs to the token that created it: another valid token gets 404 and changes nothing', opts, async () => {
  const [otherName, other] = otherToken(MCP_TOKEN);
  const s = await open('owner');
  let own;
  try {
    const secret = randomToken();
    await ok(s, `open("owned.txt", "w").write("${secret}")`);
    const meta = JSON.parse(fs.readFileSync(path.join(STATE_DIR, 'sessions', s.sid, 'meta.json'), 'utf8'));
    assert.notEqual(meta.token_id, otherName, 'meta.json names the creating token');
    // The same session id with the other token.
    const thief = new RawSession({ token: other, name: 'faults-thief' });
    thief.sid = s.sid;
    for (const [what, r] of [
      ['ping', await thief.ping()],
      ['tools/list', await thief.rpc('tools/list')],
      ['tools/call', await thief.run('print(open("owned.txt").read())')],
      ['notifications/initialized', await thief.notify('notifications/initialized')],
      ['DELETE', await thief.del()],
    ]) {
      assert.equal(r.status, 404, `${what} with another token's session: HTTP ${r.status} ${r.body}`);
      assert.ok(!r.body.includes(secret), `${what}: the answer leaks nothing`);
    }
    // The owner still has the session, with its file.
    const sc = await ok(s, 'print(open("owned.txt").read())');
    assert.equal(sc.stdout, `${secret}\n`, 'the session and its file are intact');
    // The other token works for sessions of its own, which do not see the first one's files.
    own = await open('owner-other', other);
    const sc2 = await ok(own, 'import os\nprint(os.path.exists("owned.txt"))');
    assert.equal(sc2.stdout, 'False\n');
  } finally {
    await end(s);
    await end(own);
  }
});

// ---- idle expiry -----------------------------------------------------------

test('idle sessions expire: the keeper destroys the sandbox and removes the folder, the id gets 404; activity and a running call keep sessions alive', opts, async (t) => {
  const idleMs = cfg.idle_timeout * 1000;
  const idle = await open('expire-idle');
  const pinged = await open('expire-pinged');
  const busy = await open('expire-busy');
  let stopPing = false;
  try {
    await ok(idle, 'open("f.txt", "w").write("x")');
    const sb = sandboxIdOf(idle.sid);
    const { supervisor } = sessionProcesses(idle.sid, cfg);
    assert.ok(sb && supervisor, `session ${idle.sid} has a sandbox id and a supervisor`);
    const lastUse = Date.now();
    // A session that is used keeps living; one whose only call lasts longer
    // than idle_timeout too.
    const pinger = (async () => {
      const fails = [];
      while (!stopPing) {
        const r = await pinged.ping();
        if (r.status !== 200) fails.push(`ping: HTTP ${r.status}`);
        await sleep(idleMs / 4);
      }
      return fails;
    })();
    const busyFrom = Date.now();
    let longDone = false;
    const longCall = busy
      .run(`import time\ntime.sleep(${cfg.idle_timeout + 4})\nprint("still here")`, { timeout_seconds: cfg.idle_timeout + 30 })
      .finally(() => (longDone = true));
    const folder = path.join(STATE_DIR, 'sessions', idle.sid);
    await until('the idle session folder is removed', () => !fs.existsSync(folder), idleMs + 20000);
    const goneAfter = Date.now() - lastUse;
    // Past idle_timeout, with its call still running, the busy session
    // answers other requests (a ping; notifications/cancelled would too).
    while (Date.now() - busyFrom < idleMs + 500) await sleep(100);
    const during = await busy.ping();
    assert.ok(!longDone, 'the long call still runs');
    assert.equal(during.status, 200, `a ping past idle_timeout while the session's call runs: HTTP ${during.status} ${during.body}`);
    t.diagnostic(`idle session removed ${goneAfter} ms after its last request (idle_timeout ${idleMs} ms)`);
    assert.ok(goneAfter >= idleMs - 500, `not before idle_timeout: ${goneAfter} ms`);
    for (const [what, r] of [
      ['ping', await idle.ping()],
      ['tools/call', await idle.run('print(1)')],
      ['DELETE', await idle.del()],
    ]) {
      assert.equal(r.status, 404, `${what} on an expired session: HTTP ${r.status} ${r.body}`);
    }
    opened.delete(idle);
    const left = await settle(() => leftoversOf(idle.sid, [sb], cfg), 10000);
    assert.deepEqual(left, [], "the expired session's sandbox, container, cgroups, mount and processes are gone");
    assert.ok(!alive(supervisor.pid), `its supervisor ${supervisor.pid} has exited`);
    const r = await longCall;
    assert.equal(r.result?.structuredContent?.stdout, 'still here\n', `a call longer than idle_timeout completes: ${show(r.json)}`);
    const sc = await ok(busy, 'print("alive")');
    assert.equal(sc.stdout, 'alive\n', 'and its session lives on');
    stopPing = true;
    const fails = await pinger;
    assert.deepEqual(fails, [], 'a session pinged every idle_timeout/4 never expired');
    assert.equal((await pinged.ping()).status, 200, 'the pinged session is alive');
  } finally {
    stopPing = true;
    await end(idle);
    await end(pinged);
    await end(busy);
  }
});

// ---- capacity --------------------------------------------------------------

test('max_sessions: a new session beyond it gets 503 with Retry-After and leaves nothing; one ends, a new one works', opts, async (t) => {
  const mine = [];
  try {
    await settle(sessionFolders, 15000);
    const before = sessionFolders().length;
    let refused = null;
    for (let i = 0; i <= cfg.max_sessions; i++) {
      const s = new RawSession({ name: `faults-cap-${i}` });
      const r = await s.init();
      if (r.status === 200) {
        mine.push(s);
        opened.add(s);
        continue;
      }
      refused = r;
      break;
    }
    assert.ok(refused, `a session beyond max_sessions (${cfg.max_sessions}) was refused`);
    t.diagnostic(`refused after ${mine.length} new sessions (${before} existed): HTTP ${refused.status} ${show(refused.headers)} ${refused.body}`);
    assert.equal(mine.length + before, cfg.max_sessions, `exactly max_sessions sessions were accepted`);
    assert.equal(refused.status, 503, 'HTTP 503');
    assert.match(String(refused.headers['retry-after']), /^[1-9][0-9]*$/, 'Retry-After: a number of seconds');
    assert.equal(refused.headers['mcp-session-id'], undefined, 'no session id');
    assert.match(refused.json?.error?.message || '', /maximum number of sessions/i, `a JSON-RPC error that says why: ${refused.body}`);
    assert.equal(sessionFolders().length, cfg.max_sessions, 'no folder for the refused session');
    // Refused again, promptly: no queue, no hang.
    const again = await new RawSession({ name: 'faults-cap-again' }).init();
    assert.equal(again.status, 503);
    assert.ok(again.ms < 3000, `the 503 is immediate: ${again.ms} ms`);
    // The sessions at the limit work.
    const sc = await ok(mine[0], 'print("at the limit")');
    assert.equal(sc.stdout, 'at the limit\n');
    // One ends: a new session is accepted and works.
    await end(mine.shift());
    const s = new RawSession({ name: 'faults-cap-after' });
    const r = await s.init();
    assert.equal(r.status, 200, `after a DELETE a new session is accepted: HTTP ${r.status} ${r.body}`);
    mine.push(s);
    opened.add(s);
    const sc2 = await ok(s, 'print("new")');
    assert.equal(sc2.stdout, 'new\n');
  } finally {
    for (const s of mine) await end(s);
  }
});

test('max_sessions is exact under a burst: many initializes at once, exactly max_sessions are accepted, the rest get 503', opts, async (t) => {
  const mine = [];
  try {
    await settle(sessionFolders, 15000);
    const before = sessionFolders().length;
    // Several rounds: a race that loses only now and then must still show.
    for (let round = 0; round < 3; round++) {
      const burst = Array.from({ length: 4 * cfg.max_sessions }, (_, i) => new RawSession({ name: `faults-burst-${round}-${i}` }));
      const answers = await Promise.all(burst.map((s) => s.init()));
      const accepted = burst.filter((s, i) => answers[i].status === 200);
      for (const s of accepted) {
        mine.push(s);
        opened.add(s);
      }
      const statuses = answers.map((r) => r.status);
      t.diagnostic(`round ${round}: ${accepted.length} accepted, statuses ${[...new Set(statuses)].join(',')}`);
      assert.equal(accepted.length + before, cfg.max_sessions, `exactly max_sessions sessions live: ${statuses.join(',')}`);
      assert.ok(statuses.every((c) => c === 200 || c === 503), `only 200 and 503: ${statuses.join(',')}`);
      assert.equal(sessionFolders().length, cfg.max_sessions, 'as many folders as sessions');
      while (mine.length) await end(mine.pop());
      await settle(sessionFolders, 15000);
    }
  } finally {
    for (const s of mine) await end(s);
  }
});

/** One counter of /metrics (the loopback listener endpoint.env names). */
async function metric(name) {
  const url = process.env.MCP_METRICS_URL;
  assert.ok(url, 'endpoint.env names MCP_METRICS_URL');
  const r = await new Promise((resolve, reject) => {
    http.get(url, (res) => {
      let b = '';
      res.on('data', (c) => (b += c));
      res.on('end', () => resolve(b));
    }).on('error', reject);
  });
  const line = r.split('\n').find((l) => l.startsWith(name + ' '));
  return line ? Number(line.split(' ')[1]) : NaN;
}

test('per-token limits from the tokens file: a token with max_sessions=2 max_concurrent=1 gets 503 at its third session and "at capacity" for its second call at once, while the other token goes on', opts, async (t) => {
  const second = otherToken(MCP_TOKEN);
  const [, , options] = stackTokens().find(([name]) => name === second[0]);
  assert.match(options, /max_sessions=2 max_concurrent=1/, 'the stack gives the second token its own limits');
  const mine = [];
  const sessionsBefore = await metric('mcp_requests_rejected_total{reason="token_sessions"}');
  const callsBefore = await metric('mcp_requests_rejected_total{reason="token_calls"}');
  try {
    for (let i = 0; i < 2; i++) mine.push(await open(`token-${i}`, second[1]));
    const third = await new RawSession({ name: 'faults-token-third', token: second[1] }).init();
    assert.equal(third.status, 503, `the token's third session: HTTP ${third.status} ${third.body}`);
    assert.match(third.json?.error?.message || '', /token has reached its maximum of 2 sessions/, third.body);
    // The other token is not held back by it.
    const other = await open('token-other');
    mine.push(other);
    for (const s of mine) await ok(s, 'print("warm")');
    const [a, b] = mine;
    const hold = cfg.capacity_wait + 4;
    const running = a.run(`import time\nopen("slot", "w").close()\ntime.sleep(${hold})\nprint("held")`, { timeout_seconds: hold + 30 });
    await waitFile(a, 'slot');
    const r = await b.run('print("second call")');
    t.diagnostic(`the token's second call at once: ${r.ms} ms ${show(r.json)}`);
    assert.equal(r.result?.isError, true, show(r.json));
    assert.match(resultText(r.result), /token already runs its maximum of 1 call/, 'says the token is at its limit');
    const o = await other.run('print("other")');
    assert.equal(o.result?.structuredContent?.stdout, 'other\n', `the other token's call runs meanwhile: ${show(o.json)}`);
    assert.equal((await running).result?.structuredContent?.stdout, 'held\n');
    assert.equal(await metric('mcp_requests_rejected_total{reason="token_sessions"}'), sessionsBefore + 1, 'counted: token_sessions');
    assert.equal(await metric('mcp_requests_rejected_total{reason="token_calls"}'), callsBefore + 1, 'counted: token_calls');
  } finally {
    for (const s of mine) await end(s);
  }
});

test('max_requests: a flood of one token\'s calls holds at most 4 responder threads (429 at once beyond, with Retry-After); the other token is answered meanwhile', opts, async (t) => {
  const second = otherToken(MCP_TOKEN);
  const [, , options] = stackTokens().find(([name]) => name === second[0]);
  assert.match(options, /max_requests=4/, 'the stack gives the second token max_requests=4');
  // 60 requests at once: below nginx's 64 of a token, so that every refusal
  // is the cell's. Without the bound they would hold 60 threads (one runs,
  // the others wait busy_wait in line); with it, 4.
  const threads = cfg.responders * cfg.responder_threads;
  const n = NGINX_TOKEN_REQUESTS - 4;
  const before = await metric('mcp_requests_rejected_total{reason="token_requests"}');
  const flooder = await open('requests-flood', second[1]);
  const other = await open('requests-other');
  try {
    await ok(flooder, 'print("warm")');
    let firstAdmittedAt = Infinity;
    const flood = Array.from({ length: n }, () =>
      flooder.run('import time\ntime.sleep(3)', { timeout_seconds: 30 }).then((r) => {
        if (r.status !== 429) firstAdmittedAt = Math.min(firstAdmittedAt, Date.now());
        return r;
      }));
    await sleep(500);
    const p = await other.ping();
    const pingAt = Date.now();
    assert.equal(p.status, 200, `the other token's ping: HTTP ${p.status} ${p.body}`);
    const results = await Promise.all(flood);
    const refused = results.filter((r) => r.status === 429);
    t.diagnostic(`${n} calls at once (${threads} responder threads): ${refused.length} refused with 429, ` +
      `${n - refused.length} served; the other token's ping answered ${firstAdmittedAt - pingAt} ms before the first served call`);
    assert.ok(refused.length >= n - 4, `at most 4 served at once: ${refused.length} of ${n} refused`);
    assert.ok(pingAt < firstAdmittedAt, 'the ping was answered while the flood\'s served calls still held their threads');
    for (const r of refused) {
      assert.ok(Number(r.headers['retry-after']) > 0, 'Retry-After');
      assert.equal(r.json?.error?.code, -32000, r.body);
      assert.match(r.json?.error?.message || '', /Too Many Requests: this token already has 4 requests in progress/, r.body);
    }
    for (const r of results.filter((x) => x.status !== 429)) assert.equal(r.status, 200, `a served call: HTTP ${r.status} ${r.body}`);
    assert.equal(await metric('mcp_requests_rejected_total{reason="token_requests"}'), before + refused.length,
      'counted: token_requests');
    assert.equal((await ok(flooder, 'print("after")')).stdout, 'after\n', 'the token\'s next call is served');
  } finally {
    await end(flooder);
    await end(other);
  }
});

test('max_concurrent: a call beyond it waits capacity_wait, then gets an isError result saying the server is at capacity', opts, async (t) => {
  const n = cfg.max_concurrent;
  const wait = cfg.capacity_wait ?? 0;
  const sessions = [];
  try {
    for (let i = 0; i <= n; i++) sessions.push(await open(`conc-${i}`));
    for (const s of sessions) await ok(s, 'print("warm")');
    const hold = wait + 4;
    const running = sessions.slice(0, n).map((s) =>
      s.run(`import time\nopen("slot", "w").close()\ntime.sleep(${hold})\nprint("held")`, { timeout_seconds: hold + 30 }));
    for (const s of sessions.slice(0, n)) await waitFile(s, 'slot');
    const extra = sessions[n];
    const r = await extra.run('print("extra")');
    t.diagnostic(`call number ${n + 1} answered after ${r.ms} ms: ${show(r.json)}`);
    assert.equal(r.status, 200, `HTTP ${r.status} ${r.body}`);
    assert.equal(r.result?.isError, true, `isError: ${show(r.json)}`);
    assert.match(resultText(r.result), /capacity/i, 'the result says the server is at capacity');
    assert.ok(r.ms < wait * 1000 + 3000, `answered within capacity_wait (${wait} s) + 3 s: ${r.ms} ms`);
    for (const p of running) {
      const rr = await p;
      assert.equal(rr.result?.structuredContent?.stdout, 'held\n', `the running calls finish normally: ${show(rr.json)}`);
    }
    const sc = await ok(extra, 'print("extra")');
    assert.equal(sc.stdout, 'extra\n', 'with slots free again the call runs');
  } finally {
    for (const s of sessions) await end(s);
  }
});

/** Execution slots held now: the lock files in <state>/slots/ (the
 * service's own, not a token's) that another process has locked. */
function slotsHeld() {
  const dir = path.join(STATE_DIR, 'slots');
  const out = execFileSync('/usr/bin/python3', ['-c', `
import fcntl, os, sys
d = sys.argv[1]
held = 0
for n in os.listdir(d):
    if not n.isdigit():
        continue
    fd = os.open(os.path.join(d, n), os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.lockf(fd, fcntl.LOCK_UN)
    except OSError:
        held += 1
    os.close(fd)
print(held)`, dir], { encoding: 'utf8' });
  return Number(out.trim());
}

/**
 * A client that asks for a call as a stream and then reads nothing: the
 * request goes out on a raw connection that is paused at once, so its
 * answer piles up in the kernel, nginx and the service.  Returns the socket.
 */
function slowReader(s, code, args) {
  const u = new URL(MCP_URL);
  const body = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call',
    params: { name: 'execute_python', arguments: { code, ...args } } });
  const head = [`POST ${u.pathname} HTTP/1.1`, `Host: ${u.host}`, `Authorization: Bearer ${s.token}`,
    'Content-Type: application/json', 'Accept: application/json, text/event-stream',
    `MCP-Protocol-Version: ${PROTOCOL_VERSION}`, `Mcp-Session-Id: ${s.sid}`, `Content-Length: ${Buffer.byteLength(body)}`,
    '', ''].join('\r\n');
  const port = Number(u.port || (u.protocol === 'https:' ? 443 : 80));
  const sock = u.protocol === 'https:' ? tls.connect({ host: u.hostname, port, ca: CA_PEM, servername: 'localhost' })
    : net.connect({ host: u.hostname, port });
  sock.on('error', () => {});
  sock.write(head + body);
  sock.once(u.protocol === 'https:' ? 'secureConnect' : 'connect', () => sock.pause());
  return sock;
}

test('slow readers: clients that stop reading their streams do not keep the execution slots; their calls end at their deadlines and their supervisors stay small', opts, async (t) => {
  const n = cfg.max_concurrent;
  const timeout = 4;
  const slow = [], sockets = [];
  let other;
  try {
    for (let i = 0; i < n; i++) {
      const s = await open(`slow-${i}`);
      await ok(s, 'print("warm")');
      const lv = await s.rpc('logging/setLevel', { level: 'info' });
      assert.equal(lv.status, 200, `logging/setLevel: ${lv.body}`);
      slow.push(s);
    }
    other = await open('not-starved');
    await ok(other, 'print("warm")');
    // Each writes empty lines until its wall-clock limit: every line is an
    // event of its stream (about 120 bytes), so its 1 MiB of output becomes
    // far more than the kernel, nginx and the service buffer.
    const started = Date.now();
    const code = 'import sys\nwhile True:\n    sys.stdout.write("\\n" * 65536)\n    sys.stdout.flush()';
    for (const s of slow) sockets.push(slowReader(s, code, { timeout_seconds: timeout }));
    await until('both calls hold a slot', () => slotsHeld() === n, 10000);
    t.diagnostic(`${n} slow readers hold ${slotsHeld()} slots after ${Date.now() - started} ms`);
    // The calls end at their deadline whatever their clients do, and give
    // their slots back.
    await until('the slots are free again', () => slotsHeld() === 0, (timeout + 6) * 1000);
    const freed = Date.now() - started;
    t.diagnostic(`the slots were free ${freed} ms after the calls started (timeout_seconds ${timeout})`);
    assert.ok(freed < (timeout + 6) * 1000, `freed within the deadline and a little more: ${freed} ms`);
    const r = await other.run('print("ran")');
    assert.equal(r.result?.isError ?? false, false, `another tenant's call runs: ${show(r.json)}`);
    assert.equal(r.result?.structuredContent?.stdout, 'ran\n');
    // Each slow session's supervisor held at most its bounded queue.
    for (const s of slow) {
      const sup = sessionProcesses(s.sid, cfg).supervisor;
      assert.ok(sup, `the supervisor of ${s.sid} runs`);
      const rss = Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${sup.pid}/status`, 'utf8'))?.[1]);
      t.diagnostic(`supervisor ${sup.pid}: VmRSS ${rss} kB`);
      assert.ok(rss < 64 * 1024, `a slow client costs its supervisor bounded memory: ${rss} kB`);
    }
  } finally {
    for (const sock of sockets) sock.destroy();
    for (const s of slow) await end(s);
    await end(other);
  }
});

// ---- faults ----------------------------------------------------------------

// ---- the CPU time limit ------------------------------------------------------

test('cpu_limit: a CPU loop is stopped by its CPU time (RLIMIT_CPU inside), reported as cpu_exceeded, not as a timeout', opts, async (t) => {
  assert.ok(cfg.cpu_limit >= 1 && cfg.cpu_limit <= 5, `the stack runs with a small cpu_limit (is ${cfg.cpu_limit})`);
  const s = await open('cpu');
  try {
    const t0 = Date.now();
    const r = await s.run('import time\nt = time.time()\nwhile True: pass', { timeout_seconds: 60 });
    const ms = Date.now() - t0;
    const sc = r.result?.structuredContent;
    t.diagnostic(`CPU loop answered after ${ms} ms: ${show(sc)}`);
    assert.equal(r.result?.isError, true, show(r.json));
    assert.equal(sc.cpu_exceeded, true, 'cpu_exceeded');
    assert.equal(sc.timed_out, false, 'not the wall clock');
    assert.equal(sc.exit_code, 128 + 24, 'SIGXCPU');
    assert.ok(ms < (cfg.cpu_limit + 20) * 1000, `stopped near cpu_limit, long before the 60 s timeout: ${ms} ms`);
    assert.match(resultText(r.result), /CPU time limit/);
    // A process that sleeps uses no CPU: only the wall clock ends it.
    const sleep = await s.run('import time; time.sleep(' + (cfg.cpu_limit + 2) + '); print("slept")', { timeout_seconds: 30 });
    assert.equal(sleep.result?.structuredContent?.stdout, 'slept\n', show(sleep.json));
  } finally {
    await end(s);
  }
});

test('kill -9 of the responder serving a call: the client gets an error promptly, the pool restarts it, the session keeps its files, no orphan', opts, async (t) => {
  const s = await open('kill-responder');
  try {
    await ok(s, 'open("before.txt", "w").write("before")');
    const { sandbox } = sessionProcesses(s.sid, cfg);
    assert.ok(sandbox, 'the session has a sandbox process');
    const respondersBefore = inventory(STATE_DIR, cfg).responders;
    let settled = null;
    const call = s
      .run('import time\nopen("c-start", "w").close()\ntime.sleep(3)\nopen("c-end", "w").write("end")\nprint("C")', {
        timeout_seconds: 30,
      })
      .then(
        (r) => (settled = { at: Date.now(), r }),
        (e) => (settled = { at: Date.now(), e }),
      );
    await waitFile(s, 'c-start');
    const victim = responderServing(s.sid, cfg);
    assert.ok(victim, `a responder holds session ${s.sid} open (responders ${respondersBefore})`);
    const killedAt = Date.now();
    process.kill(victim, 'SIGKILL');
    await call;
    const delay = settled.at - killedAt;
    t.diagnostic(`responder ${victim} killed; the client got ${settled.e ? `error ${settled.e.message}` : `HTTP ${settled.r.status} ${settled.r.body.slice(0, 200)}`} after ${delay} ms`);
    assert.ok(settled.e || settled.r.status >= 500 || settled.r.json?.error || settled.r.result?.isError,
      `the client gets an error: ${show(settled.r?.json ?? settled.r?.body)}`);
    assert.ok(delay < 2000, `promptly: ${delay} ms after the kill`);
    // The pool restarts the responder.
    const responders = await until('the master restarts the responder', () => {
      const r = inventory(STATE_DIR, cfg).responders;
      return r.length === respondersBefore.length && !r.includes(victim) ? r : null;
    }, 5000);
    t.diagnostic(`responders before ${respondersBefore}, after ${responders}`);
    // The session is usable with its files; the interrupted call ran to its
    // end in the sandbox (the supervisor keeps it), and the next call runs
    // after it.
    const sc = await ok(s, 'import os\nprint(open("before.txt").read(), open("c-end").read() if os.path.exists("c-end") else "no-c-end")');
    assert.equal(sc.stdout, 'before end\n', 'the files are there, the interrupted call finished');
    const now = sessionProcesses(s.sid, cfg).sandbox;
    assert.equal(now?.pid, sandbox.pid, 'the sandbox survived the responder');
    const left = await waitNoStrays(cfg, 10000);
    assert.deepEqual(left, [], 'no orphaned sandbox, process, container, cgroup or mount');
  } finally {
    await end(s);
  }
});

test('a streamed answer that nginx took but its client never read (a connection gone silent; a cell or the router killed a moment later): the client resumes the stream and gets the answer, once', opts, async (t) => {
  const s = await open('silent');
  let sock;
  try {
    const answered = 'mcp_stream_resumes_total{outcome="answered"}';
    const before = await metric(answered);
    // A client that reads nothing of its stream: the answer goes into the
    // kernel's buffers, and nginx and the service see it delivered.
    sock = slowReader(s, 'import time\nopen("silent-start", "w").close()\ntime.sleep(1)\nprint("kept for the resume")', {});
    await waitFile(s, 'silent-start');
    const dir = path.join(STATE_DIR, 'sessions', s.sid, 'streams');
    const prefix = fs.readdirSync(dir).find((n) => /^[0-9a-f]{12}$/.test(n));
    assert.ok(prefix, 'the running call has a stream record');
    const record = path.join(dir, prefix);
    // The call is over when its record is marked delivered (mode 0400), or
    // gone.
    const mode = await until('the call is over', () => {
      if (!fs.existsSync(record)) return 'gone';
      const m = fs.statSync(record).mode & 0o7777;
      return m === 0o400 ? '0400' : null;
    }, 20000);
    t.diagnostic(`the call is over; its record: ${mode}`);
    sock.destroy();
    const resume = () => request('GET', s.headers({ Accept: 'text/event-stream', 'Last-Event-ID': `${prefix}-0` }));
    const r = await resume();
    assert.equal(r.status, 200, `the resume: HTTP ${r.status} ${r.body}`);
    assert.match(r.body, /"stdout":"kept for the resume\\n"/, 'the resumed stream carries the answer');
    assert.equal(await metric(answered) - before, 1, `${answered} counts it`);
    const again = await resume();
    assert.equal(again.status, 404, `a second resume of a stream whose answer a resume took: ${again.status} ${again.body}`);
    assert.ok(!fs.existsSync(record), 'the record is gone');
  } finally {
    sock?.destroy();
    await end(s);
  }
});

/**
 * An SDK client's call of execute_python (args; its code creates
 * /work/<startFile> first) whose responder is killed (kill -9) once that
 * file is there: what the client got ({ r } or { e }), ms after the kill.
 */
async function killResponderDuring(t, client, s, args, startFile) {
  const call = client.callTool({ name: 'execute_python', arguments: args }, undefined, { timeout: TEST_TIMEOUT_MS })
    .then((r) => ({ at: Date.now(), r }), (e) => ({ at: Date.now(), e }));
  await waitFile(s, startFile);
  const victim = responderServing(s.sid, cfg);
  assert.ok(victim, `a responder serves ${s.sid}`);
  const killedAt = Date.now();
  process.kill(victim, 'SIGKILL');
  const settled = await call;
  settled.ms = settled.at - killedAt;
  t.diagnostic(`responder ${victim} killed; the client got ${settled.e ? settled.e.message : JSON.stringify(settled.r).slice(0, 200)} after ${settled.ms} ms`);
  return settled;
}

test('kill -9 of the responder serving an SDK client\'s streamed call: the client resumes the stream and gets an error for its call at once, not at its timeout', opts, async (t) => {
  const { client, transport } = await connectClient('faults-resume');
  const s = { sid: transport.sessionId };
  const lostSeries = 'mcp_stream_resumes_total{outcome="lost"}';
  try {
    const lostBefore = await metric(lostSeries);
    const settled = await killResponderDuring(t, client, s,
      { code: 'import time\nopen("r-start", "w").close()\ntime.sleep(4)\nprint("R")' }, 'r-start');
    assert.ok(settled.e, 'no result: the call\'s answer had no one to go to');
    assert.match(settled.e.message, /was lost/, 'the error of a resumed stream whose responder died');
    assert.doesNotMatch(settled.e.message, /timed out/i, 'not the client\'s own timeout');
    assert.equal(await metric(lostSeries) - lostBefore, 1, `${lostSeries} counts the resume`);
    const next = await runPython(client, { code: 'print("after")' });
    assert.equal(next.structuredContent.stdout, 'after\n', 'the session goes on');
  } finally {
    await closeClient({ client, transport }).catch(() => {});
  }
});

test('kill -9 of the responder serving a 2026-07-28 client\'s call: the client gets a JSON-RPC error at once (the call answers in one piece, not as a stream that would break), not its timeout', opts, async (t) => {
  const c = await connectClient2({ pin: '2026-07-28' });
  try {
    const made = await c.callTool({ name: 'execute_python', arguments: { code: 'print("ready")' } });
    const s = { sid: made.structuredContent.sandbox };
    const settled = await killResponderDuring(t, c, s, { code: 'import time\nopen("m-start", "w").close()\n' +
      'time.sleep(4)\nopen("m-end", "w").close()\nprint("M")', sandbox: s.sid }, 'm-start');
    assert.ok(settled.e, 'no result: the call\'s answer had no one to go to');
    assert.match(settled.e.message, /lost this request before answering it/, 'nginx\'s JSON-RPC error for a lost request');
    assert.ok(settled.ms < 2000, `at once: ${settled.ms} ms after the kill`);
    await waitFile(s, 'm-end'); // the interrupted call ran to its end in the sandbox
    const next = await c.callTool({ name: 'execute_python', arguments: { code: 'print("after")', sandbox: s.sid } });
    assert.equal(next.structuredContent.stdout, 'after\n', 'the sandbox goes on');
    await c.callTool({ name: 'close_sandbox', arguments: { sandbox: s.sid } });
  } finally {
    await c.close();
  }
});

test("max_body from mcp.conf reaches nginx: a body just under it is served, one just over it gets nginx's 413 naming it", opts, async (t) => {
  const MiB = 1 << 20;
  assert.ok(cfg.max_body > 10 * MiB, `the stack's mcp.conf sets max_body above nginx's former fixed 10m (is ${cfg.max_body})`);
  const s = await open('max-body');
  try {
    // A ping whose whole body is `size` bytes.
    const body = (size) => {
      const shell = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'ping', params: { pad: '' } });
      return shell.replace('"pad":""', `"pad":"${'x'.repeat(size - shell.length)}"`);
    };
    const under = await request('POST', s.headers(), body(cfg.max_body - 1024));
    t.diagnostic(`${cfg.max_body - 1024} bytes: HTTP ${under.status} in ${under.ms} ms`);
    assert.equal(under.status, 200, `a body 1 KiB under max_body is served: ${under.body.slice(0, 300)}`);
    assert.deepEqual(under.json?.result, {}, 'and answered');
    const over = await request('POST', s.headers(), body(cfg.max_body + 1024));
    t.diagnostic(`${cfg.max_body + 1024} bytes: HTTP ${over.status}: ${over.body.slice(0, 300)}`);
    assert.equal(over.status, 413, 'a body 1 KiB over max_body gets 413');
    assert.equal(over.json?.error?.code, -32600, `a JSON-RPC error: ${over.body.slice(0, 300)}`);
    assert.match(over.json.error.message, new RegExp(`server accepts \\(${cfg.max_body} bytes\\)`), "nginx's answer, with the configured limit");
    const again = await s.ping();
    assert.equal(again.status, 200, 'the session goes on');
  } finally {
    await end(s);
  }
});

function runsc(...args) {
  return execFileSync(cfg.runsc || '/usr/bin/runsc', [`--root=${path.join(STATE_DIR, 'runsc')}`, ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

for (const [how, kill] of [
  ['runsc kill <container> KILL', (sb) => runsc('kill', sb.cid, 'KILL')],
  ['kill -9 of its runsc-sandbox process', (sb) => process.kill(sb.pid, 'SIGKILL')],
]) {
  test(`the sandbox killed from outside between calls (${how}): the next call recreates it, the files are intact`, opts, async (t) => {
    const s = await open('kill-sandbox');
    try {
      const secret = randomToken();
      await ok(s, `open("keep.txt", "w").write("${secret}")`);
      const { sandbox } = sessionProcesses(s.sid, cfg);
      assert.ok(sandbox, 'the session has a sandbox process');
      kill(sandbox);
      await until(`the sandbox process ${sandbox.pid} is gone`, () => !alive(sandbox.pid), 10000);
      const t0 = Date.now();
      const sc = await ok(s, 'print(open("keep.txt").read())');
      t.diagnostic(`the next call took ${Date.now() - t0} ms: ${show(sc)}`);
      assert.equal(sc.stdout, `${secret}\n`, 'the workspace file is intact');
      const now = sessionProcesses(s.sid, cfg).sandbox;
      assert.ok(now && now.pid !== sandbox.pid, `a new sandbox runs (${now?.pid}, was ${sandbox.pid})`);
      const sc2 = await ok(s, 'print("again")');
      assert.equal(sc2.stdout, 'again\n');
      const left = await waitNoStrays(cfg, 10000);
      assert.deepEqual(left, [], 'nothing of the killed sandbox is left');
    } finally {
      await end(s);
    }
  });
}

test("kill -9 of a session's supervisor, then the session ended: its container, cgroup and mount go with it at once, not at the keeper's next reap", opts, async (t) => {
  const s = await open('kill-supervisor');
  try {
    await ok(s, 'print(1)');
    const { supervisor, sandbox } = sessionProcesses(s.sid, cfg);
    const id = sandboxIdOf(s.sid);
    assert.ok(supervisor && sandbox && id, 'the session has a supervisor, a sandbox and its id');
    process.kill(supervisor.pid, 'SIGKILL');
    await until(`the supervisor ${supervisor.pid} is gone`, () => !alive(supervisor.pid), 10000);
    // The executor ends on the end of its pipes, and the sandbox with it;
    // what runsc keeps of the container stays.
    const before = leftoversOf(s.sid, [id], cfg);
    t.diagnostic(`with the supervisor gone: ${show(before)}`);
    assert.ok(before.some((l) => l.startsWith('runsc state ')), 'its runsc state stays after it');
    const t0 = Date.now();
    await end(s);
    // The keeper reaps what no supervisor owns every 60 s: 5 s tells the two apart.
    const left = await settle(() => leftoversOf(s.sid, [id], cfg), 5000);
    t.diagnostic(`${Date.now() - t0} ms after the DELETE: ${show(left)}`);
    assert.deepEqual(left, [], 'nothing of the session is left');
    assert.ok(!alive(sandbox.pid), `its sandbox process ${sandbox.pid} is gone`);
  } finally {
    await end(s);
  }
});

// ---- afterwards ------------------------------------------------------------

test('afterwards: every session ended, nothing left beyond the pool', opts, async () => {
  for (const s of [...opened]) await end(s);
  assert.deepEqual(await settle(sessionFolders, 15000), [], 'no session folder left');
  const left = await waitNoStrays(cfg, 15000);
  assert.deepEqual(left, [], 'no sandbox, process, container, cgroup, mount or trash beyond the pool');
});

after(async () => {
  for (const s of [...opened]) await end(s);
});
