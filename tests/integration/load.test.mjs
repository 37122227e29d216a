// Load through nginx: MCP_LOAD_SESSIONS (32) sessions at once, each making
// MCP_LOAD_CALLS (20) calls one after the other, all sessions concurrently,
// with a raw MCP client of our own (lib/rpc.mjs, keep-alive connections).
//
// Call k of session i appends k to /work/log.txt and prints
// sha256("<session id>:<k>"), i * 1000 + k and the number of lines in
// log.txt: every answer is checked against the value expected for exactly
// that session and call, and the line count proves that each call ran once,
// in order, in its own session's workspace. Zero wrong or lost results.
//
// A call refused because the server is at capacity (max_concurrent, after
// capacity_wait; or its sandbox still starting after ready_wait) is a clear
// answer, not a lost one: it is retried after a pause and counted (reported
// as a diagnostic). Any other error, HTTP status, transport failure, no
// answer within the server's own bound, or wrong value fails the test.
//
// Afterwards every session is ended (DELETE) and, with MCP_STATE_DIR set
// (root on the stack's host), nothing of them may be left (folder, trash,
// runsc container, cgroup, mount, process) and nothing may exist beyond the
// live sessions and the pool (lib/host.mjs strays()).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { TEST_TIMEOUT_MS } from './lib/common.mjs';
import { RawSession, keepAliveAgent, resultText, show } from './lib/rpc.mjs';
import { STATE_DIR, sleep, effectiveConfig, waitNoStrays, leftoversOf, sandboxIdOf } from './lib/host.mjs';

const SESSIONS = Number(process.env.MCP_LOAD_SESSIONS || 32);
const CALLS = Number(process.env.MCP_LOAD_CALLS || 20);
const MAX_CAPACITY_RETRIES = 50; // per call: beyond that the server never frees a slot
const opts = { timeout: Math.max(TEST_TIMEOUT_MS, 600_000) };

const CALL_TIMEOUT_S = 60;
// A call is lost only when the server does not answer within its own bound:
// ready_wait for the sandbox (on an overloaded machine, boots queue), then
// capacity_wait for a slot and the call's timeout.  Beyond ready_wait the
// server answers "at capacity" (retried below), never silence.
const cfg = STATE_DIR ? effectiveConfig() : {};
const SERVER_BOUND_MS = ((cfg.ready_wait ?? 120) + (cfg.capacity_wait ?? 10) + CALL_TIMEOUT_S + 30) * 1000;
const agent = keepAliveAgent(SESSIONS * 2);
const sessions = [];

const expected = (sid, i, k) => `${createHash('sha256').update(`${sid}:${k}`).digest('hex')} ${i * 1000 + k} ${k + 1}\n`;
const code = (sid, i, k) =>
  `import hashlib\n` +
  `with open("log.txt", "a") as f:\n    f.write("${k}\\n")\n` +
  `n = len(open("log.txt").read().split())\n` +
  `print(hashlib.sha256(b"${sid}:${k}").hexdigest(), ${i} * 1000 + ${k}, n)\n`;

function percentile(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] : 0;
}

test(`${SESSIONS} concurrent sessions x ${CALLS} calls through nginx: every result right, none lost`, opts, async (t) => {
  const t0 = Date.now();
  // All sessions at once.
  const inits = await Promise.all(
    Array.from({ length: SESSIONS }, async (_, i) => {
      const s = new RawSession({ agent, name: `load-${i}` });
      try {
        const r = await s.init();
        if (r.status === 200) sessions.push(s);
        return { i, s, status: r.status, body: r.body };
      } catch (e) {
        return { i, s, status: 0, body: String(e) };
      }
    }),
  );
  const failedInits = inits.filter((x) => x.status !== 200);
  assert.deepEqual(failedInits.map((x) => `${x.i}: HTTP ${x.status} ${x.body.slice(0, 200)}`), [], 'every session was created');
  t.diagnostic(`${SESSIONS} sessions initialized in ${Date.now() - t0} ms`);

  const problems = [];
  const latencies = [];
  const firstCalls = []; /* ms from the start of the calls to each session's first answer (its sandbox's boot) */
  let capacityRetries = 0;
  const t1 = Date.now();
  await Promise.all(
    inits.map(async ({ i, s }) => {
      for (let k = 0; k < CALLS; k++) {
        let r;
        for (let attempt = 0; ; attempt++) {
          try {
            r = await s.run(code(s.sid, i, k), { timeout_seconds: CALL_TIMEOUT_S }, { timeoutMs: SERVER_BOUND_MS });
          } catch (e) {
            r = { status: 0, body: String(e), ms: 0 };
          }
          const refused = r.status === 200 && r.result?.isError && !r.result?.structuredContent && /capacity/i.test(resultText(r.result));
          if (!refused || attempt >= MAX_CAPACITY_RETRIES) break;
          capacityRetries++;
          await sleep(200 + Math.floor(Math.random() * 300));
        }
        latencies.push(r.ms);
        if (k === 0) firstCalls.push(Date.now() - t1);
        const sc = r.result?.structuredContent;
        const want = expected(s.sid, i, k);
        if (r.status !== 200) problems.push(`session ${i} call ${k}: HTTP ${r.status} ${r.body.slice(0, 300)}`);
        else if (!sc || r.result.isError || sc.exit_code !== 0 || sc.stdout !== want)
          problems.push(`session ${i} call ${k}: expected ${JSON.stringify(want)}, got ${show(r.json).slice(0, 600)}`);
        // A session whose workspace went wrong would fail every later call: stop it.
        if (problems.length && problems[problems.length - 1].startsWith(`session ${i} `)) break;
      }
    }),
  );
  const elapsed = Date.now() - t1;
  const total = SESSIONS * CALLS;
  t.diagnostic(
    `${total} calls in ${elapsed} ms (${((total / elapsed) * 1000).toFixed(1)} calls/s); latency p50 ${percentile(latencies, 50)} ms, ` +
      `p95 ${percentile(latencies, 95)} ms, max ${Math.max(...latencies)} ms; first calls answered after p50 ${percentile(firstCalls, 50)} ms, ` +
      `max ${Math.max(...firstCalls)} ms; ${capacityRetries} calls retried after an at-capacity answer`,
  );
  assert.deepEqual(problems, [], `zero wrong or lost results out of ${total}`);
});

test('afterwards: every load session ended, nothing of them left, nothing beyond the live sessions', opts, async (t) => {
  assert.ok(sessions.length > 0, 'the load test opened sessions');
  const ids = sessions.map((s) => ({ sid: s.sid, sb: STATE_DIR ? sandboxIdOf(s.sid) : null }));
  const dels = await Promise.all(sessions.map((s) => s.del().catch((e) => ({ status: 0, body: String(e) }))));
  const bad = dels.map((r, i) => [i, r]).filter(([, r]) => r.status !== 204 && r.status !== 200);
  sessions.length = 0;
  assert.deepEqual(bad.map(([i, r]) => `${i}: HTTP ${r.status}`), [], 'every DELETE answered 204');
  if (!STATE_DIR) {
    t.diagnostic('MCP_STATE_DIR is not set: skipping the host-side leftover check');
    return;
  }
  assert.ok(ids.every((x) => x.sb), 'meta.json named a sandbox for every session');
  const deadline = Date.now() + 30000;
  let left;
  for (;;) {
    left = ids.flatMap(({ sid, sb }) => leftoversOf(sid, [sb], cfg));
    if (left.length === 0 || Date.now() > deadline) break;
    await sleep(250);
  }
  assert.deepEqual(left, [], 'nothing of the ended sessions is left (folder, trash, container, cgroup, mount, process)');
  assert.deepEqual(await waitNoStrays(cfg, 15000), [], 'nothing beyond the live sessions and the pool');
});

after(async () => {
  await Promise.all(sessions.map((s) => s.del().catch(() => {})));
  agent.destroy();
});
