// Streaming: progress, log lines and cancellation of a running call, with
// the TypeScript SDK through nginx and with mcp-remote over stdio.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { createRequire } from 'node:module';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import {
  MCP_URL,
  MCP_TOKEN,
  TEST_TIMEOUT_MS,
  PROTOCOL_VERSION,
  connectClient,
  closeClient,
  runPython,
  rawRequest,
  initializeBody,
  randomToken,
} from './lib/common.mjs';

const opts = { timeout: TEST_TIMEOUT_MS };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

test('progress notifications arrive about once a second during a 5-second call', opts, async () => {
  const c = await connectClient('stream-progress');
  try {
    const seen = [];
    const t0 = Date.now();
    const r = await c.client.callTool(
      { name: 'execute_python', arguments: { code: 'import time; time.sleep(5); print("done")', timeout_seconds: 20 } },
      undefined,
      { timeout: TEST_TIMEOUT_MS, onprogress: (p) => seen.push({ ...p, at: Date.now() - t0 }) },
    );
    assert.equal(r.structuredContent.stdout, 'done\n');
    assert.ok(seen.length >= 3 && seen.length <= 6, `3-6 progress notifications: ${JSON.stringify(seen)}`);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i].progress > seen[i - 1].progress, 'strictly increasing');
    assert.equal(seen[0].total, 20);
    assert.ok(seen[0].at < 2500, `the first one arrives early: ${seen[0].at} ms`);
  } finally {
    await closeClient(c);
  }
});

test('with logging/setLevel, stdout and stderr lines arrive before the result', opts, async () => {
  const c = await connectClient('stream-logging');
  try {
    assert.ok(c.client.getServerCapabilities().logging, 'logging capability');
    const lines = [];
    let resultAt = null;
    c.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) =>
      lines.push({ ...n.params, at: Date.now() }));
    await c.client.setLoggingLevel('info');
    const marker = randomToken();
    const call = runPython(c.client, {
      code: `import sys, time\nprint("first ${marker}", flush=True)\ntime.sleep(2)\nprint("oops", file=sys.stderr)\nprint("last")`,
    }).then((r) => {
      resultAt = Date.now();
      return r;
    });
    const r = await call;
    assert.equal(r.structuredContent.stdout, `first ${marker}\nlast\n`, 'the result still carries the output');
    const first = lines.find((l) => l.data === `first ${marker}`);
    assert.ok(first, `streamed line: ${JSON.stringify(lines)}`);
    assert.equal(first.logger, 'stdout');
    assert.ok(first.at <= resultAt - 1500, 'the first line arrived while the code ran');
    const err = lines.find((l) => l.data === 'oops');
    assert.equal(err?.logger, 'stderr');
  } finally {
    await closeClient(c);
  }
});

test('an AbortSignal cancels a while-True call; the session keeps working', opts, async () => {
  const c = await connectClient('stream-cancel');
  try {
    const ac = new AbortController();
    const t0 = Date.now();
    const pending = c.client.callTool(
      { name: 'execute_python', arguments: { code: 'open("started", "w").write("1")\nwhile True: pass', timeout_seconds: 120 } },
      undefined,
      { signal: ac.signal, timeout: TEST_TIMEOUT_MS },
    );
    await sleep(1500);
    ac.abort('test cancels');
    await assert.rejects(pending);
    // The next call must run at once: the busy loop is gone (it would hold
    // the session for 120 s otherwise).
    const r = await runPython(c.client, { code: 'import os; print(os.path.exists("started"))' });
    assert.equal(r.structuredContent.stdout, 'True\n');
    assert.ok(Date.now() - t0 < 10_000, `cancelled within a second or so: ${Date.now() - t0} ms`);
  } finally {
    await closeClient(c);
  }
});

test('a client that disconnects does not cancel: the call finishes within its limits', opts, async () => {
  const headers = { Authorization: `Bearer ${MCP_TOKEN}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };
  const init = await rawRequest('POST', MCP_URL, headers, initializeBody(1, 'stream-disconnect'));
  const sid = init.headers['mcp-session-id'];
  const h = { ...headers, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL_VERSION };
  try {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'execute_python',
      arguments: { code: 'import time; time.sleep(2); open("finished", "w").write("yes")' } } });
    const ac = new AbortController();
    const gone = fetch(MCP_URL, { method: 'POST', headers: h, body, signal: ac.signal }).catch(() => null);
    await sleep(500);
    ac.abort();
    await gone;
    await sleep(2500);
    const check = JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'execute_python',
      arguments: { code: 'print(open("finished").read())' } } });
    const r = await rawRequest('POST', MCP_URL, { ...h, Accept: 'application/json' }, check);
    assert.equal(JSON.parse(r.body).result.structuredContent.stdout, 'yes\n', r.body);
  } finally {
    await rawRequest('DELETE', MCP_URL, { Authorization: `Bearer ${MCP_TOKEN}`, 'Mcp-Session-Id': sid });
  }
});

// mcp-remote: the stdio bridge forwards progress and cancellation.
const require = createRequire(import.meta.url);
const MCP_REMOTE = path.join(path.dirname(require.resolve('mcp-remote/package.json')), 'dist', 'proxy.js');

function startRemote() {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-remote-stream-'));
  const child = spawn(process.execPath, [MCP_REMOTE, MCP_URL, '--transport', 'http-only', '--header',
    'Authorization: Bearer ${MCP_TOKEN}'], {
    env: { ...process.env, HOME: tmp, MCP_REMOTE_CONFIG_DIR: path.join(tmp, 'mcp-auth') },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const msgs = [];
  const waiters = [];
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  createInterface({ input: child.stdout }).on('line', (line) => {
    let m;
    try { m = JSON.parse(line); } catch { return; }
    m.at = Date.now();
    msgs.push(m);
    for (const w of [...waiters]) if (w.pred(m)) { waiters.splice(waiters.indexOf(w), 1); w.resolve(m); }
  });
  const send = (m) => child.stdin.write(JSON.stringify(m) + '\n');
  const waitFor = (pred, ms = 60_000) => {
    const hit = msgs.find(pred);
    if (hit) return Promise.resolve(hit);
    return new Promise((resolve, reject) => {
      const w = { pred, resolve };
      waiters.push(w);
      setTimeout(() => reject(new Error(`timed out; stderr: ${stderr.slice(-2000)}`)), ms);
    });
  };
  const close = () => {
    child.stdin.end();
    setTimeout(() => child.kill('SIGKILL'), 5000).unref();
    fs.rmSync(tmp, { recursive: true, force: true });
  };
  return { send, waitFor, msgs, close };
}

test('mcp-remote: progress arrives during the call, and a cancelled call stops', { timeout: TEST_TIMEOUT_MS * 2 }, async () => {
  const r = startRemote();
  try {
    r.send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: PROTOCOL_VERSION, capabilities: {},
      clientInfo: { name: 'mcp-remote-streaming', version: '1' } } });
    await r.waitFor((m) => m.id === 1);
    r.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    r.send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { _meta: { progressToken: 'tok-2' },
      name: 'execute_python', arguments: { code: 'import time; time.sleep(3); print("ok")' } } });
    const prog = await r.waitFor((m) => m.method === 'notifications/progress' && m.params.progressToken === 'tok-2');
    const res = await r.waitFor((m) => m.id === 2);
    assert.ok(prog.at < res.at, 'progress came before the result');
    assert.equal(res.result.structuredContent.stdout, 'ok\n');
    // Cancel a busy loop, then the session answers again at once.
    r.send({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'execute_python',
      arguments: { code: 'while True: pass', timeout_seconds: 120 } } });
    await sleep(1500);
    r.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 3, reason: 'test' } });
    const t0 = Date.now();
    r.send({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'execute_python', arguments: { code: 'print("next")' } } });
    const next = await r.waitFor((m) => m.id === 4);
    assert.equal(next.result.structuredContent.stdout, 'next\n');
    assert.ok(Date.now() - t0 < 10_000, `the cancelled call did not hold the session: ${Date.now() - t0} ms`);
    assert.equal(r.msgs.find((m) => m.id === 3 && m.result), undefined, 'no result for the cancelled request');
  } finally {
    r.close();
  }
});
