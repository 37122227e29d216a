// The tasks extension (io.modelcontextprotocol/tasks, issue 20 point 5)
// through nginx: which calls become tasks, a task's life (working, completed
// with the plain call's result and files, cancelled, failed when the run is
// lost), TTL and poll interval, the gate for clients that did not declare the
// extension, the routing headers, authorization, and a task that outlives its
// responders.  Tasks are background runs: get_run reads them too.
//
// The official conformance suite's tasks-* scenarios call the reference
// server's fixture tools (greet, slow_compute, failing_job, ...); the checks
// that need them are exercised here with this server's own tools, each test
// naming the conformance checks it stands for.  The TypeScript SDK 2.4.0
// client has no tasks runtime (see lib/tasks.mjs): it is used for what it
// does (server/discover, the per-request declaration, tasks/update), raw
// requests for the rest.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TEST_TIMEOUT_MS, SLACK_MS, MCP_URL, MCP_TOKEN } from './lib/common.mjs';
import { Client as Client2, StreamableHTTPClientTransport as Transport2 } from '@modelcontextprotocol/client';
import { show } from './lib/rpc.mjs';
import { STATE_DIR, PY_NO_LEFTOVER } from './lib/hostile.mjs';
import { otherToken, inventory, effectiveConfig, sessionProcesses } from './lib/host.mjs';
import { EXT, ISO, NOT_ON_A_TASK, python, getTask, cancelTask, updateTask, tool, modern, handleOf, startTask, untilDone } from './lib/tasks.mjs';

const opts = { timeout: TEST_TIMEOUT_MS };
const cfg = STATE_DIR ? effectiveConfig() : {};
const TASK_AFTER = Number(cfg.task_after ?? process.env.MCP_TEST_TASK_AFTER ?? 60);
const IDLE_MS = Number(cfg.idle_timeout ?? 600) * 1000;
const PROMPT_MS = 3000 + SLACK_MS;

async function connect2(declared) {
  const transport = new Transport2(new URL(MCP_URL), { requestInit: { headers: { Authorization: `Bearer ${MCP_TOKEN}` } } });
  const client = new Client2(
    { name: 'tasks-sdk', version: '1.0.0' },
    { versionNegotiation: { mode: { pin: '2026-07-28' } }, capabilities: declared ? { extensions: { [EXT]: {} } } : {} },
  );
  await client.connect(transport);
  return client;
}

/** A Standard Schema that takes any result (the SDK asks one for a method it does not know). */
const ANY = { '~standard': { version: 1, vendor: 'tasks-test', validate: (value) => ({ value }) } };

async function closeSandbox(handle) {
  await tool('close_sandbox', { sandbox: handle }).catch(() => {});
}

test('client 2.4.0: server/discover advertises the extension; a declaring request gets a task, a plain one a run id; tasks/update through the client', opts, async () => {
  // tasks-extension-advertised, sep-2663-server-rejects-undeclared-client, tasks-per-request-meta-opt-in,
  // sep-2663-tasks-methods-non-declaring (tasks/update)
  const plain = await connect2(false);
  const declaring = await connect2(true);
  let handle;
  try {
    const caps = plain.getDiscoverResult().capabilities;
    assert.deepEqual(caps.extensions?.[EXT], {}, show(caps));
    assert.equal(caps.tasks, undefined, 'no 2025-style capabilities.tasks');
    const run = await plain.callTool({ name: 'execute_python', arguments: { code: 'print("as a run")', background: true } });
    handle = run.structuredContent.sandbox;
    assert.match(run.structuredContent.run, /\.r[0-9a-f]{16}$/, 'without the extension: a run id, no task');
    assert.equal(run.taskId, undefined);
    await assert.rejects(
      declaring.callTool({ name: 'execute_python', arguments: { code: 'print(1)', background: true, sandbox: handle } }),
      (e) => e.code === 'UNSUPPORTED_RESULT_TYPE' && e.data?.resultType === 'task',
      'the declaring client got a task (which SDK 2.4.0 cannot consume)',
    );
    await assert.rejects(
      plain.request({ method: 'tasks/update', params: { taskId: `${handle}.r0123456789abcdef`, inputResponses: {} } }, ANY),
      (e) => e.code === -32021 && e.data?.requiredCapabilities?.extensions?.[EXT] !== undefined,
      'tasks/update without the extension: -32021 with requiredCapabilities',
    );
    await assert.rejects(
      declaring.request({ method: 'tasks/update', params: { taskId: `${handle}.r0123456789abcdef`, inputResponses: {} } }, ANY),
      (e) => e.code === -32602 && /Task not found/.test(e.message),
      'tasks/update of an unknown task: -32602',
    );
  } finally {
    if (handle) await closeSandbox(handle);
    await plain.close();
    await declaring.close();
  }
});

test('a task: CreateTaskResult, tasks/get while it works and at once, a call beside it, the completed result with its output and files', opts, async (t) => {
  // sep-2663-result-type-task-on-create, sep-2663-durable-create-strong-consistency, sep-2663-tasks-get-status-working,
  // sep-2663-tasks-get-status-completed, tasks-wire-field-renames, tasks-no-early-ttl-expiry,
  // tasks-no-related-task-meta-on-inlined-result, tasks-create-result-no-request-state,
  // tasks-get-detailed-no-request-state, sep-2663-routing-headers-accepted-on-tasks-get
  const created = await startTask({
    code: 'import os, time\nfor i in range(6):\n    print("tick", i, flush=True)\n    time.sleep(0.5)\nos.makedirs("output", exist_ok=True)\nopen("output/answer.txt", "w").write("42")\nprint("done")',
    background: true,
  });
  const handle = handleOf(created.taskId);
  try {
    assert.equal(created.status, 'working');
    assert.match(created.createdAt, ISO);
    assert.match(created.lastUpdatedAt, ISO);
    assert.ok(Number.isInteger(created.ttlMs) && created.ttlMs >= IDLE_MS, `ttlMs ${created.ttlMs}`);
    assert.ok(Number.isInteger(created.pollIntervalMs) && created.pollIntervalMs > 0, `pollIntervalMs ${created.pollIntervalMs}`);
    for (const k of [...NOT_ON_A_TASK, 'result', 'error', 'content']) assert.equal(created[k], undefined, `no ${k}: ${show(created)}`);
    const now = await getTask(created.taskId);
    assert.equal(now.status, 200, show(now.json));
    assert.equal(now.result.taskId, created.taskId, 'tasks/get right after the CreateTaskResult finds it');
    assert.equal(now.result.resultType, 'complete');
    assert.equal(now.result.status, 'working');
    for (const k of [...NOT_ON_A_TASK, 'result', 'error']) assert.equal(now.result[k], undefined, `no ${k} while working`);
    const beside = await python({ code: 'print(open("/proc/loadavg").read() != "")', sandbox: handle });
    assert.equal(beside.result?.structuredContent?.stdout, 'True\n', `a plain call beside the task: ${show(beside.json)}`);
    const { task, polls } = await untilDone(created.taskId, 30000);
    t.diagnostic(`${polls} polls; ${show(task).slice(0, 300)}`);
    assert.equal(task.status, 'completed');
    assert.equal(task.resultType, 'complete');
    assert.ok(polls >= 2, 'it was polled while it worked');
    const r = task.result;
    assert.equal(r.structuredContent.stdout, [...Array(6).keys()].map((i) => `tick ${i}\n`).join('') + 'done\n');
    assert.equal(r.isError, false);
    assert.equal(r.structuredContent.sandbox, handle, 'the result names its sandbox');
    assert.deepEqual(r.structuredContent.files.map((f) => f.name), ['answer.txt']);
    assert.equal(r.content.find((b) => b.type === 'resource')?.resource?.text, '42', 'the file comes back as content');
    assert.equal(r._meta?.['io.modelcontextprotocol/related-task'], undefined);
    for (const k of [...NOT_ON_A_TASK, 'error']) assert.equal(task[k], undefined, `no ${k} on a completed task`);
    assert.ok(Date.parse(task.lastUpdatedAt) >= Date.parse(task.createdAt));
    await new Promise((res) => setTimeout(res, 500));
    const again = await getTask(created.taskId, { headers: { 'Mcp-Method': 'tasks/get', 'Mcp-Name': created.taskId } });
    assert.equal(again.result.ttlMs, task.ttlMs, 'an ended task keeps its ttlMs');
    assert.equal(again.result.result.structuredContent.stdout, r.structuredContent.stdout, 'and its result');
    const run = await tool('get_run', { run: created.taskId });
    assert.equal(run.result.structuredContent.status, 'finished', 'get_run reads the same run');
  } finally {
    await closeSandbox(handle);
  }
});

test('a tool error and a timeout are completed tasks with isError; a short call of a declaring client, and the 2025 `task` param, stay plain', opts, async () => {
  // sep-2663-tool-error-uses-completed-status, tasks-server-directed-creation-no-hint, tasks-sync-tool-call,
  // sep-2663-legacy-task-param-ignored, tasks-immediate-result-shortcut, tasks-result-type-complete-on-non-task-responses
  const handles = [];
  try {
    const failing = await startTask({ code: 'import sys\nprint("failing", file=sys.stderr)\nsys.exit(3)', timeout_seconds: TASK_AFTER + 1 });
    handles.push(handleOf(failing.taskId));
    const f = (await untilDone(failing.taskId, 30000)).task;
    assert.equal(f.status, 'completed', 'a tool error is completed, not failed');
    assert.equal(f.result.isError, true);
    assert.equal(f.result.structuredContent.exit_code, 3);
    assert.equal(f.result.structuredContent.stderr, 'failing\n');
    assert.equal(f.error, undefined);
    const slow = await startTask({ code: 'import time\ntime.sleep(60)', background: true, timeout_seconds: 2, sandbox: handles[0] });
    const s = (await untilDone(slow.taskId, 30000)).task;
    assert.equal(s.status, 'completed');
    assert.equal(s.result.structuredContent.timed_out, true);
    assert.equal(s.result.isError, true);
    assert.match(s.statusMessage, /wall-clock limit of 2 s/);
    const short = await python({ code: 'print("plain")', sandbox: handles[0] });
    assert.equal(short.result.resultType, 'complete', 'a call within task_after: a plain result');
    assert.equal(short.result.taskId, undefined);
    assert.equal(short.result.structuredContent.stdout, 'plain\n');
    const legacy = await modern('tools/call', { name: 'execute_python', arguments: { code: 'print(7)', sandbox: handles[0] }, task: { ttl: 60000, pollInterval: 100 } });
    assert.equal(legacy.status, 200, show(legacy.json));
    assert.equal(legacy.result.resultType, 'complete', 'the 2025 `task` param makes no task');
    assert.equal(legacy.result.structuredContent.stdout, '7\n');
  } finally {
    for (const h of handles) await closeSandbox(h);
  }
});

test('tasks/cancel: an empty ack at once, the task settles to cancelled and its processes are gone; again on the ended task, the same ack', opts, async () => {
  // sep-2663-cancel-ack-empty-result, tasks-cancel-terminal-idempotent-ack, tasks-mrtr-tasks-update-resumes (the ack)
  const created = await startTask({
    code: 'import subprocess, time\nsubprocess.Popen(["sleep", "1000"], start_new_session=True)\nprint("started", flush=True)\ntime.sleep(1000)',
    background: true,
  });
  const handle = handleOf(created.taskId);
  try {
    await new Promise((res) => setTimeout(res, 1000));
    const t0 = Date.now();
    const ack = await cancelTask(created.taskId);
    assert.equal(ack.status, 200, show(ack.json));
    assert.equal(ack.result.resultType, 'complete');
    for (const k of ['taskId', 'status', 'result', 'error', 'inputRequests']) assert.equal(ack.result[k], undefined, `the ack has no ${k}`);
    const { task } = await untilDone(created.taskId, PROMPT_MS);
    assert.equal(task.status, 'cancelled', show(task));
    assert.ok(Date.now() - t0 < PROMPT_MS, 'cancelled within a second or so');
    assert.equal(task.result, undefined);
    const left = await python({ code: PY_NO_LEFTOVER, sandbox: handle });
    assert.equal(left.result.structuredContent.stdout, 'True\n', `nothing of the task is left: ${show(left.json)}`);
    const again = await cancelTask(created.taskId);
    assert.deepEqual(Object.keys(again.result).filter((k) => k !== '_meta'), ['resultType'], show(again.json));
    const update = await updateTask(created.taskId, { 'never-asked': { action: 'accept', content: {} } });
    assert.equal(update.result.resultType, 'complete', 'tasks/update ignores keys that are not outstanding');
  } finally {
    await closeSandbox(handle);
  }
});

test('without the extension: tasks/get, tasks/update, tasks/cancel are -32021; headers are checked; removed and unknown ids', opts, async () => {
  // sep-2663-tasks-methods-non-declaring, sep-2663-server-rejects-mismatched-mcp-name-on-tasks-get,
  // tasks-headers-reject-mismatched-method, sep-2663-tasks-result-removed-method-not-found, tasks-removed-tasks-list,
  // sep-2663-tasks-get-invalid-task-id-32602
  const created = await startTask({ code: 'import time\ntime.sleep(30)', background: true });
  const handle = handleOf(created.taskId);
  try {
    for (const [method, params] of [
      ['tasks/get', { taskId: created.taskId }],
      ['tasks/update', { taskId: created.taskId, inputResponses: {} }],
      ['tasks/cancel', { taskId: created.taskId }],
    ]) {
      const r = await modern(method, params, { declared: false });
      assert.equal(r.status, 400, `${method}: ${show(r.json)}`);
      assert.equal(r.error?.code, -32021);
      assert.deepEqual(r.error.data, { requiredCapabilities: { extensions: { [EXT]: {} } } });
    }
    assert.equal((await getTask(created.taskId)).result.status, 'working', 'the refused tasks/cancel changed nothing');
    for (const [what, headers] of [
      ['no Mcp-Name', { 'Mcp-Name': null }],
      ['another Mcp-Name', { 'Mcp-Name': 'sep-2663-wrong-task-id-for-routing-header-mismatch' }],
    ]) {
      const r = await getTask(created.taskId, { headers });
      assert.equal(r.status, 400, `${what}: ${show(r.json)}`);
      assert.equal(r.error?.code, -32020, what);
    }
    const b64 = await getTask(created.taskId, { headers: { 'Mcp-Name': `=?base64?${Buffer.from(created.taskId).toString('base64')}?=` } });
    assert.equal(b64.result?.status, 'working', 'Mcp-Name in base64 is decoded');
    const mismatched = await python({ code: 'print(1)' }, { headers: { 'Mcp-Method': 'tasks/get' } });
    assert.equal(mismatched.status, 400);
    assert.equal(mismatched.error?.code, -32020);
    for (const method of ['tasks/result', 'tasks/list']) {
      const r = await modern(method, { taskId: created.taskId });
      assert.equal(r.status, 404, method);
      assert.equal(r.error?.code, -32601, method);
    }
    for (const id of ['tasks-conformance-nonexistent-12345', `${handle}.r0123456789abcdef`]) {
      const r = await getTask(id);
      assert.equal(r.error?.code, -32602, `${id}: ${show(r.json)}`);
      assert.match(r.error.message, /Task not found/);
    }
  } finally {
    await cancelTask(created.taskId);
    await closeSandbox(handle);
  }
});

test('a task of another token is unknown to it, exactly as a made-up one, and its tasks/cancel changes nothing', opts, async (t) => {
  const other = STATE_DIR ? otherToken(MCP_TOKEN) : null;
  if (!other) return t.skip('no second token known (MCP_STATE_DIR unset)');
  const created = await startTask({ code: 'import time\ntime.sleep(30)', background: true });
  const handle = handleOf(created.taskId);
  try {
    const madeUp = await getTask(`${handle}.r0123456789abcdef`, { token: other[1] });
    for (const [method, run] of [
      ['tasks/get', () => getTask(created.taskId, { token: other[1] })],
      ['tasks/update', () => updateTask(created.taskId, {}, { token: other[1] })],
      ['tasks/cancel', () => cancelTask(created.taskId, { token: other[1] })],
    ]) {
      const r = await run();
      assert.equal(r.status, 200, method);
      assert.equal(r.error?.code, -32602, `${method}: ${show(r.json)}`);
      assert.equal(r.error.message, madeUp.error.message, `${method}: the same answer as for a task that never existed`);
    }
    const run = await tool('get_run', { run: created.taskId }, { token: other[1] });
    assert.equal(run.result.isError, true, 'get_run of it from the other token: unknown too');
    assert.equal((await getTask(created.taskId)).result.status, 'working', 'the task went on');
  } finally {
    await cancelTask(created.taskId);
    await closeSandbox(handle);
  }
});

test('a task survives a kill of every responder; a task whose supervisor dies is failed (-32603), never missing', opts, async (t) => {
  // sep-2663-tasks-get-status-failed (a protocol-level failure: the run was lost with its supervisor)
  if (!STATE_DIR) return t.skip("needs MCP_STATE_DIR (root on the stack's host)");
  const created = await startTask({ code: 'import time\nfor i in range(8):\n    print("line", i, flush=True)\n    time.sleep(0.5)', background: true });
  const handle = handleOf(created.taskId);
  try {
    const before = inventory(STATE_DIR).responders;
    for (const pid of before) process.kill(pid, 'SIGKILL');
    t.diagnostic(`killed responders ${before.join(' ')}`);
    let task;
    for (const t0 = Date.now(); Date.now() - t0 < 30000; await new Promise((res) => setTimeout(res, 300))) {
      try {
        const r = await getTask(created.taskId);
        if (r.status === 200 && r.result.status !== 'working') {
          task = r.result;
          break;
        }
      } catch {
        /* the pool restarts them */
      }
    }
    assert.equal(task?.status, 'completed', show(task));
    assert.equal(task.result.structuredContent.stdout, [...Array(8).keys()].map((i) => `line ${i}\n`).join(''));
    const lost = await startTask({ code: 'import time\nprint("before", flush=True)\ntime.sleep(60)', background: true, sandbox: handle });
    await new Promise((res) => setTimeout(res, 1000));
    const { supervisor } = sessionProcesses(handle, cfg);
    assert.ok(supervisor, 'the sandbox has its supervisor');
    process.kill(supervisor.pid, 'SIGKILL');
    const { task: failed } = await untilDone(lost.taskId, 15000);
    assert.equal(failed.status, 'failed', show(failed));
    assert.equal(failed.error.code, -32603);
    assert.equal(failed.result, undefined);
    const run = await tool('get_run', { run: lost.taskId });
    assert.equal(run.result.structuredContent.status, 'lost');
    assert.equal(run.result.structuredContent.stdout, 'before\n', 'what it wrote is kept');
  } finally {
    await closeSandbox(handle);
  }
});
