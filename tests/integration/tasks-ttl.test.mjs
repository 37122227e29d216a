// Tasks (io.modelcontextprotocol/tasks) on a stack with a short idle_timeout
// and background runs longer than plain calls (scripts/test's faults stack:
// idle_timeout 10, timeout_max 120, background_timeout_max 180): a task's
// ttlMs is kept (never discarded before createdAt + ttlMs, gone soon after),
// it grows while the run works past idle_timeout, and a call only a task
// could run is -32021 for a client that did not declare the extension.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TEST_TIMEOUT_MS, SLACK_MS } from './lib/common.mjs';
import { show } from './lib/rpc.mjs';
import { STATE_DIR } from './lib/hostile.mjs';
import { effectiveConfig } from './lib/host.mjs';
import { EXT, python, getTask, startTask, untilDone, handleOf, tool } from './lib/tasks.mjs';

const cfg = STATE_DIR ? effectiveConfig() : null;
const opts = { timeout: TEST_TIMEOUT_MS };
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

function needs(t, what, ok) {
  if (!cfg) t.skip('needs MCP_STATE_DIR (the stack\'s configuration)');
  else if (!ok) t.skip(`needs ${what} (this stack: idle_timeout ${cfg.idle_timeout}, timeout_max ${cfg.timeout_max}, background_timeout_max ${cfg.background_timeout_max})`);
  return Boolean(cfg && ok);
}

/** Poll tasks/get once a second until it is not found; returns when (ms since the epoch). */
async function goneAt(taskId, maxMs) {
  for (const t0 = Date.now(); Date.now() - t0 < maxMs; await sleep(1000)) {
    const r = await getTask(taskId);
    if (r.error) {
      assert.equal(r.error.code, -32602, show(r.json));
      assert.match(r.error.message, /Task not found/);
      return Date.now();
    }
  }
  assert.fail(`the task was still there after ${maxMs} ms`);
}

test('an ended task is kept for its ttlMs, then discarded with its sandbox', opts, async (t) => {
  if (!needs(t, 'an idle_timeout of at most 30 s', Number(cfg?.idle_timeout) <= 30)) return;
  const created = await startTask({ code: 'print("short")', background: true });
  const { task } = await untilDone(created.taskId, 20000);
  assert.equal(task.status, 'completed', show(task));
  const until = Date.parse(task.createdAt) + task.ttlMs;
  t.diagnostic(`ttlMs ${task.ttlMs}: kept until ${new Date(until).toISOString()}`);
  assert.ok(task.ttlMs >= cfg.idle_timeout * 1000, `ttlMs ${task.ttlMs} >= idle_timeout`);
  const gone = await goneAt(created.taskId, task.ttlMs + 20000);
  assert.ok(gone >= until, `not discarded before createdAt + ttlMs (${gone - until} ms after)`);
  assert.ok(gone <= until + 5000 + SLACK_MS, `discarded soon after (${gone - until} ms after)`);
});

test('a task that works past idle_timeout is kept, its ttlMs growing, and discarded idle_timeout after its end', { timeout: TEST_TIMEOUT_MS }, async (t) => {
  const idle = Number(cfg?.idle_timeout);
  if (!needs(t, 'runs longer than idle_timeout (at most 30 s)', idle <= 30 && cfg.background_timeout_max > idle + 5)) return;
  const created = await startTask({ code: `import time\ntime.sleep(${idle + 4})\nprint("outlived")`, background: true });
  await sleep((idle + 1) * 1000);
  const working = await getTask(created.taskId);
  assert.equal(working.result?.status, 'working', `kept past idle_timeout while it works: ${show(working.json)}`);
  assert.ok(working.result.ttlMs > created.ttlMs, `ttlMs grew: ${created.ttlMs} -> ${working.result.ttlMs}`);
  assert.ok(working.result.pollIntervalMs > created.pollIntervalMs || working.result.pollIntervalMs === cfg.task_poll_max, 'pollIntervalMs grows with its age');
  const { task } = await untilDone(created.taskId, 20000);
  assert.equal(task.result?.structuredContent?.stdout, 'outlived\n', show(task));
  const gone = await goneAt(created.taskId, (idle + 20) * 1000);
  assert.ok(gone >= Date.parse(task.createdAt) + task.ttlMs, 'not before its ttlMs');
});

test('timeout_seconds above timeout_max: a task for a declaring client, -32021 for one that did not declare the extension', opts, async (t) => {
  if (!needs(t, 'background_timeout_max above timeout_max', cfg?.background_timeout_max > cfg?.timeout_max)) return;
  const long = cfg.timeout_max + 1;
  const plain = await python({ code: 'print(1)', timeout_seconds: long }, { declared: false });
  assert.equal(plain.status, 400, show(plain.json));
  assert.equal(plain.error?.code, -32021);
  assert.deepEqual(plain.error.data, { requiredCapabilities: { extensions: { [EXT]: {} } } });
  assert.match(plain.error.message, new RegExp(`above ${cfg.timeout_max} runs only as a task`));
  const created = await startTask({ code: 'print("long allowed")', timeout_seconds: long });
  try {
    const { task } = await untilDone(created.taskId, 20000);
    assert.equal(task.result.structuredContent.stdout, 'long allowed\n', show(task));
    assert.match(task.statusMessage, /Finished with exit code 0/);
  } finally {
    await tool('close_sandbox', { sandbox: handleOf(created.taskId) }).catch(() => {});
  }
});
