// Background runs (issue 20, points 1-4): `background` returns a run id at
// once, get_run reads its status, output (from offsets) and result,
// cancel_run stops it; runs go on beside other calls, are bounded per
// session and per token, belong to their token, and outlive a responder.
// TypeScript SDK 1.32.2 (2025 sessions) and 2.4.0 (2026-07-28 handles).
//
// The "10-minute run" is MCP_TEST_RUN_SECONDS long (600 by default;
// scripts/test shortens it), and background_timeout_max is the stack's
// (scripts/test sets it short: MCP_TEST_BACKGROUND_TIMEOUT_MAX).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TEST_TIMEOUT_MS, SLACK_MS, connectClient, connectClient2, closeClient } from './lib/common.mjs';
import { STATE_DIR, show, checkResult, PY_NO_LEFTOVER } from './lib/hostile.mjs';
import { otherToken, inventory, effectiveConfig } from './lib/host.mjs';
import { PY_FORK_BOMB } from './lib/hostile-cases.mjs';

const RUN_SECONDS = Number(process.env.MCP_TEST_RUN_SECONDS || 600);
const BACKGROUND_MAX = Number(process.env.MCP_TEST_BACKGROUND_TIMEOUT_MAX || 3600);
const opts = { timeout: Math.max(TEST_TIMEOUT_MS, (RUN_SECONDS + 60) * 1000) };

async function tool(c, name, args) {
  const client = c.client ?? c;
  return client.callTool({ name, arguments: args }, undefined, { timeout: TEST_TIMEOUT_MS });
}

async function start(c, code, extra = {}, name = 'execute_python') {
  const r = await tool(c, name, { code, background: true, ...extra });
  const sc = checkResult(r);
  assert.equal(r.isError ?? false, false, show(r));
  assert.equal(sc.status, 'running', show(sc));
  assert.match(sc.run, /^([a-z0-9-]+\.)?[0-9a-f]{32}\.r[0-9a-f]{16}$/, `a run id: ${show(sc)}`);
  return sc.run;
}

async function getRun(c, run, args = {}) {
  const r = await tool(c, 'get_run', { run, ...args });
  return { r, sc: r.structuredContent };
}

/** Poll until the run ends; returns the concatenated output and the last result. */
async function follow(c, run, maxMs) {
  let out = '', err = '', offsets = { stdout_offset: 0, stderr_offset: 0 }, last, polls = 0;
  const t0 = Date.now();
  for (;;) {
    last = await getRun(c, run, { ...offsets, wait_seconds: 5 });
    assert.equal(last.r.isError && last.sc?.status === 'running', false, show(last.r));
    out += last.sc.stdout;
    err += last.sc.stderr;
    assert.ok(last.sc.stdout_offset >= offsets.stdout_offset, 'offsets move forward');
    offsets = { stdout_offset: last.sc.stdout_offset, stderr_offset: last.sc.stderr_offset };
    polls++;
    if (last.sc.status !== 'running') return { out, err, last, polls };
    assert.ok(Date.now() - t0 < maxMs, `the run ended within ${maxMs} ms`);
  }
}

test(`a ${RUN_SECONDS} s run: started, polled with output offsets, finished with its files; a fresh call runs beside it`, opts, async (t) => {
  const c = await connectClient('runs-long');
  try {
    const run = await start(c, `import sys, time
t0 = time.time()
i = 0
while time.time() - t0 < ${RUN_SECONDS}:
    print("tick", i, flush=True)
    print("tock", i, file=sys.stderr, flush=True)
    i += 1
    time.sleep(0.5)
open("output/result.csv", "w").write("ticks\\n%d\\n" % i)
print("done", i)
`);
    // A fresh-process call runs beside it, at once, in the same sandbox.
    const t1 = Date.now();
    const beside = await tool(c, 'execute_python', { code: 'import os\nprint(len([p for p in os.listdir("/proc") if p.isdigit()]) >= 3, flush=True)' });
    assert.equal(beside.structuredContent.stdout, 'True\n', `a call beside the run sees it running: ${show(beside)}`);
    assert.ok(Date.now() - t1 < 2000 + SLACK_MS, 'the call did not wait for the run');
    const { out, err, last, polls } = await follow(c, run, (RUN_SECONDS + 30) * 1000);
    t.diagnostic(`${polls} polls; ${show(last.sc).slice(0, 400)}`);
    assert.equal(last.sc.status, 'finished', show(last.sc));
    assert.equal(last.sc.exit_code, 0);
    assert.equal(last.r.isError ?? false, false);
    const ticks = out.trim().split('\n');
    const n = Number(ticks[ticks.length - 1].split(' ')[1]);
    assert.deepEqual(ticks, [...[...Array(n).keys()].map((i) => `tick ${i}`), `done ${n}`], 'every line once, in order, across the polls');
    assert.deepEqual(err.trim().split('\n'), [...Array(n).keys()].map((i) => `tock ${i}`));
    assert.ok(polls >= 2 || RUN_SECONDS < 5, 'polled while it ran');
    assert.deepEqual(last.sc.files.map((f) => f.name), ['result.csv'], show(last.sc.files));
    const block = last.r.content.find((b) => b.type === 'resource');
    assert.equal(block?.resource?.text, `ticks\n${n}\n`, 'the output file comes back as content');
    // The whole output again from offset 0, and the files again.
    const again = await getRun(c, run);
    assert.equal(again.sc.stdout, out);
    assert.deepEqual(again.sc.files.map((f) => f.name), ['result.csv']);
  } finally {
    await closeClient(c);
  }
});

test('cancel_run ends the run and every process it started within a second', opts, async () => {
  const c = await connectClient('runs-cancel');
  try {
    const run = await start(c, 'import subprocess, time\nsubprocess.Popen(["sleep", "1000"], start_new_session=True)\nprint("started", flush=True)\ntime.sleep(1000)');
    await getRun(c, run, { wait_seconds: 1 });
    const t0 = Date.now();
    const r = await tool(c, 'cancel_run', { run });
    const ms = Date.now() - t0;
    assert.equal(r.structuredContent.status, 'cancelled', show(r));
    assert.equal(r.isError, true);
    assert.ok(ms < 1000 + SLACK_MS, `cancelled in ${ms} ms`);
    const left = await tool(c, 'execute_python', { code: PY_NO_LEFTOVER });
    assert.equal(left.structuredContent.stdout, 'True\n', `nothing of the run is left: ${show(left)}`);
    const again = await tool(c, 'cancel_run', { run });
    assert.equal(again.structuredContent.status, 'cancelled', 'cancelling an ended run changes nothing');
  } finally {
    await closeClient(c);
  }
});

test(`a run is stopped at background_timeout_max (${BACKGROUND_MAX} s): timed_out`, { timeout: (BACKGROUND_MAX + 60) * 1000 }, async () => {
  const c = await connectClient('runs-timeout');
  try {
    const run = await start(c, 'console.log("waiting"); await new Promise(() => setInterval(() => {}, 1000));', {}, 'execute_javascript');
    const { last } = await follow(c, run, (BACKGROUND_MAX + 30) * 1000);
    assert.equal(last.sc.status, 'timed_out', show(last.sc));
    assert.equal(last.sc.timed_out, true);
    assert.ok(last.sc.duration_ms >= BACKGROUND_MAX * 1000 - 100, `ran ${last.sc.duration_ms} ms`);
    const long = await tool(c, 'execute_python', { code: 'pass', background: true, timeout_seconds: BACKGROUND_MAX + 1 });
    assert.equal(long.isError, true);
    assert.match(long.content[0].text, /timeout_seconds must be an integer from 1 to \d+ for a background run/);
  } finally {
    await closeClient(c);
  }
});

test('runs are bound to their token and sandbox: another token, another session, a made-up id are refused alike', opts, async (t) => {
  const c = await connectClient('runs-owner');
  const d = await connectClient('runs-other-session');
  try {
    const run = await start(c, 'import time\ntime.sleep(30)');
    const unknown = /Unknown run/;
    for (const [label, client, id] of [
      ['another session of the token', d, run],
      ['a made-up run of this sandbox', c, run.replace(/r[0-9a-f]{16}$/, 'r0123456789abcdef')],
      ['not a run id', c, '../../etc/passwd'],
    ]) {
      const r = await tool(client, 'get_run', { run: id });
      assert.equal(r.isError, true, `${label}: ${show(r)}`);
      assert.match(r.content[0].text, unknown, label);
      const k = await tool(client, 'cancel_run', { run: id });
      assert.equal(k.isError, true, `${label}: cancel ${show(k)}`);
    }
    const other = STATE_DIR ? otherToken(process.env.MCP_TOKEN) : null;
    if (!other) t.diagnostic('no second token known (MCP_STATE_DIR unset): the other-token case is not run');
    if (other) {
      const m = await connectClient2({ pin: '2026-07-28' }, other[1], 'runs-other-token');
      try {
        for (const name of ['get_run', 'cancel_run']) {
          const r = await m.callTool({ name, arguments: { run } });
          assert.equal(r.isError, true, `${name} of another token: ${show(r)}`);
          assert.match(r.content[0].text, unknown);
        }
      } finally {
        await m.close();
      }
    }
    const still = await getRun(c, run);
    assert.equal(still.sc.status, 'running', 'the run went on');
    await tool(c, 'cancel_run', { run });
  } finally {
    await closeClient(c);
    await closeClient(d);
  }
});

test('runs_per_session: one more active run than allowed is refused with a sentence; an ended one frees its place', opts, async () => {
  const c = await connectClient('runs-limit');
  try {
    const cfg = STATE_DIR ? effectiveConfig() : null;
    const limit = Number(cfg?.runs_per_session ?? process.env.MCP_TEST_RUNS_PER_SESSION ?? 2);
    const runs = [];
    for (let i = 0; i < limit; i++) runs.push(await start(c, 'import time\ntime.sleep(60)'));
    const over = await tool(c, 'execute_python', { code: 'pass', background: true });
    assert.equal(over.isError, true, show(over));
    assert.match(over.content[0].text, new RegExp(`maximum of ${limit} background runs`));
    await tool(c, 'cancel_run', { run: runs[0] });
    runs[0] = await start(c, 'print("in its place")');
    const { last } = await follow(c, runs[0], 30000);
    assert.equal(last.sc.stdout, 'in its place\n');
    for (const r of runs.slice(1)) await tool(c, 'cancel_run', { run: r });
  } finally {
    await closeClient(c);
  }
});

test('runs_per_token: the runs of a token across its sessions are bounded; the next is refused with a sentence', opts, async () => {
  const cfg = STATE_DIR ? effectiveConfig() : null;
  const perToken = Number(cfg?.runs_per_token ?? process.env.MCP_TEST_RUNS_PER_TOKEN ?? 8);
  const perSession = Number(cfg?.runs_per_session ?? process.env.MCP_TEST_RUNS_PER_SESSION ?? 2);
  const sessions = [];
  const runs = [];
  try {
    // Enough sessions for perToken runs, and one more with room for a run.
    for (let i = 0; i <= Math.ceil(perToken / perSession); i++) sessions.push(await connectClient(`runs-token-${i}`));
    for (let i = 0; i < perToken; i++) {
      const c = sessions[Math.floor(i / perSession)];
      runs.push([c, await start(c, 'import time\ntime.sleep(60)')]);
    }
    const spare = sessions[sessions.length - 1];
    const over = await tool(spare, 'execute_python', { code: 'print("never")', background: true });
    assert.equal(over.isError, true, show(over));
    assert.match(over.content[0].text, new RegExp(`This token already has its maximum of ${perToken} background runs active`), show(over));
    // A call that is not a run is not held back by them.
    const fresh = await tool(spare, 'execute_python', { code: 'print("fresh")' });
    assert.equal(fresh.structuredContent.stdout, 'fresh\n', show(fresh));
    // An ended run gives its place back to the token.
    const [c0, r0] = runs.shift();
    await tool(c0, 'cancel_run', { run: r0 });
    const ok = await start(spare, 'print("in its place")');
    const { last } = await follow(spare, ok, 30000);
    assert.equal(last.sc.stdout, 'in its place\n', show(last.sc));
  } finally {
    for (const [c, r] of runs) await tool(c, 'cancel_run', { run: r }).catch(() => {});
    for (const c of sessions) await closeClient(c);
  }
});

// A fork bomb in a run: RLIMIT_NPROC holds it, and its failed forks keep
// growing gVisor's host tasks (sandbox/GVISOR.md) until the supervisor's
// host-task guard stops it, as it stops a call: the run ends `finished`
// with processes_exceeded (a limit, as cpu_exceeded), and its sandbox is
// replaced (the lingering host tasks go): the interpreter beside it loses
// its state and the next persistent call says so; the workspace stays.
test('a fork bomb in a run is stopped by the host-task guard: finished, processes_exceeded; the sandbox is replaced, the interpreter beside it says state_lost', { timeout: (BACKGROUND_MAX + 90) * 1000 }, async (t) => {
  const c = await connectClient('runs-bomb');
  try {
    const kept = await tool(c, 'execute_python', { code: 'open("kept.txt", "w").write("kept")\nx = 41\nx + 1', persistent: true });
    assert.equal(kept.structuredContent.value, '42', show(kept));
    const run = await start(c, PY_FORK_BOMB, { timeout_seconds: BACKGROUND_MAX });
    const { out, last } = await follow(c, run, (BACKGROUND_MAX + 60) * 1000);
    t.diagnostic(show(last.sc).slice(0, 500));
    assert.match(out, /^fork failed errno 11 after /m, `the bomb met RLIMIT_NPROC: ${show(last.sc)}`);
    assert.equal(last.sc.processes_exceeded, true, `the host-task guard stopped it (not its wall clock of ${BACKGROUND_MAX} s): ${show(last.sc)}`);
    assert.equal(last.sc.status, 'finished', show(last.sc));
    assert.equal(last.sc.sandbox_restarted, false, 'the guard, not the pids backstop');
    assert.equal(last.r.isError, true);
    assert.ok(last.r.content.some((b) => b.type === 'text' && /too many host tasks/.test(b.text)), show(last.r));
    const after = await tool(c, 'execute_python', { code: 'import os\nprint(open("kept.txt").read(), sorted(int(p) for p in os.listdir("/proc") if p.isdigit()) == [1, os.getpid()])\n"x" in globals()', persistent: true });
    assert.equal(after.structuredContent.stdout, 'kept True\n', `a new sandbox, the same workspace: ${show(after)}`);
    assert.equal(after.structuredContent.value, 'False', show(after));
    assert.equal(after.structuredContent.state_lost, true, `the next persistent call says its state was lost: ${show(after)}`);
  } finally {
    await closeClient(c);
  }
});

test('a run survives a kill of every responder: its output goes on and its result is read by a new responder', opts, async (t) => {
  if (!STATE_DIR) return t.skip('needs MCP_STATE_DIR (root on the stack\'s host)');
  const c = await connectClient('runs-responders');
  try {
    const run = await start(c, 'import time\nfor i in range(8):\n    print("line", i, flush=True)\n    time.sleep(0.5)');
    const before = inventory(STATE_DIR).responders;
    assert.ok(before.length > 0, 'responders found');
    for (const pid of before) process.kill(pid, 'SIGKILL');
    t.diagnostic(`killed responders ${before.join(' ')}`);
    let last;
    for (const t0 = Date.now(); Date.now() - t0 < 30000;) {
      try {
        last = await getRun(c, run, { wait_seconds: 2 });
        if (last.sc?.status !== 'running') break;
      } catch {
        await new Promise((r) => setTimeout(r, 200)); /* the pool restarts them */
      }
    }
    assert.equal(last?.sc?.status, 'finished', show(last?.sc));
    assert.equal(last.sc.stdout, [...Array(8).keys()].map((i) => `line ${i}\n`).join(''));
  } finally {
    await closeClient(c);
  }
});

test('the 2026-07-28 era: background in a sandbox handle, get_run, cancel_run', opts, async () => {
  const m = await connectClient2({ pin: '2026-07-28' });
  let handle;
  try {
    const tools = (await m.listTools()).tools.map((x) => x.name);
    assert.ok(tools.includes('get_run') && tools.includes('cancel_run'), tools.join(' '));
    const a = await m.callTool({ name: 'execute_javascript', arguments: { code: 'console.log(6 * 7)', background: true } });
    handle = a.structuredContent.sandbox;
    assert.ok(a.structuredContent.run.startsWith(`${handle}.`), show(a.structuredContent));
    const g = await m.callTool({ name: 'get_run', arguments: { run: a.structuredContent.run, wait_seconds: 20 } });
    assert.equal(g.structuredContent.status, 'finished', show(g));
    assert.equal(g.structuredContent.stdout, '42\n');
  } finally {
    if (handle) await m.callTool({ name: 'close_sandbox', arguments: { sandbox: handle } }).catch(() => {});
    await m.close();
  }
});
