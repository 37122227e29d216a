// Integration tests with the official TypeScript SDK client
// (@modelcontextprotocol/sdk: Client + StreamableHTTPClientTransport).
// Every test opens its own session(s) and ends them with DELETE.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
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
import { PY_OTHERS, leftovers } from './lib/hostile.mjs';

const opts = { timeout: TEST_TIMEOUT_MS };

const RESULT_FIELDS = {
  stdout: 'string',
  stderr: 'string',
  exit_code: 'number',
  timed_out: 'boolean',
  duration_ms: 'number',
  truncated: 'boolean',
};

/**
 * Check the shape every execute_python result must have: structuredContent
 * with the six fields, and the same JSON serialized in a text content block.
 * Returns structuredContent.
 */
function checkResult(result) {
  assert.ok(Array.isArray(result.content), 'result.content is an array');
  const sc = result.structuredContent;
  assert.equal(typeof sc, 'object', 'structuredContent is present');
  assert.notEqual(sc, null);
  for (const [k, t] of Object.entries(RESULT_FIELDS)) {
    assert.equal(typeof sc[k], t, `structuredContent.${k} is a ${t} (got ${JSON.stringify(sc[k])})`);
  }
  assert.ok(Number.isInteger(sc.exit_code), 'exit_code is an integer');
  assert.ok(Number.isInteger(sc.duration_ms) && sc.duration_ms >= 0, 'duration_ms is a non-negative integer');
  const texts = result.content.filter((b) => b.type === 'text');
  assert.ok(
    texts.some((b) => {
      try {
        assert.deepEqual(JSON.parse(b.text), sc);
        return true;
      } catch {
        return false;
      }
    }),
    `a text content block carries the same JSON as structuredContent; content=${JSON.stringify(result.content)}`,
  );
  return sc;
}

const show = (r) => JSON.stringify(r);

test('initialize: serverInfo, protocolVersion, capabilities.tools, session id', opts, async () => {
  // The SDK offers its latest protocol version; the server must echo it.
  assert.equal(LATEST_PROTOCOL_VERSION, PROTOCOL_VERSION, 'SDK offers 2025-11-25');
  const c = await connectClient('sdk-initialize');
  try {
    const info = c.client.getServerVersion();
    assert.equal(typeof info?.name, 'string', 'serverInfo.name is a string');
    assert.ok(info.name.length > 0, 'serverInfo.name is not empty');
    assert.equal(typeof info.version, 'string', 'serverInfo.version is a string');
    assert.ok(info.version.length > 0, 'serverInfo.version is not empty');
    assert.equal(c.transport.protocolVersion, PROTOCOL_VERSION, 'negotiated protocolVersion');
    const caps = c.client.getServerCapabilities();
    assert.equal(typeof caps?.tools, 'object', `capabilities.tools is an object: ${show(caps)}`);
    assert.notEqual(caps.tools, null);
    const sid = c.transport.sessionId;
    assert.equal(typeof sid, 'string', 'Mcp-Session-Id issued');
    assert.match(sid, /^[\x21-\x7E]+$/, 'session id is visible ASCII');
    assert.ok(sid.length >= 16, `session id is long enough to be unguessable: ${sid}`);
    // ping works on the session
    assert.deepEqual(await c.client.ping(), {});
  } finally {
    await closeClient(c);
  }
});

test('tools/list: execute_python with inputSchema and outputSchema', opts, async () => {
  const c = await connectClient('sdk-tools-list');
  try {
    const { tools } = await c.client.listTools();
    const tool = tools.find((t) => t.name === 'execute_python');
    assert.ok(tool, `execute_python listed; got ${show(tools.map((t) => t.name))}`);
    assert.equal(typeof tool.description, 'string');
    assert.ok(tool.description.length > 0, 'description is not empty');

    const is = tool.inputSchema;
    assert.equal(is.type, 'object', 'inputSchema.type');
    assert.equal(is.properties?.code?.type, 'string', 'code is a string');
    assert.ok(Array.isArray(is.required) && is.required.includes('code'), 'code is required');
    assert.equal(is.properties?.packages?.type, 'array', 'packages is an array');
    assert.equal(is.properties?.packages?.items?.type, 'string', 'packages items are strings');
    assert.equal(is.properties?.env_variables?.type, 'object', 'env_variables is an object');
    assert.equal(is.properties?.timeout_seconds?.type, 'integer', 'timeout_seconds is an integer');

    const os = tool.outputSchema;
    assert.equal(typeof os, 'object', 'outputSchema present');
    assert.equal(os.type, 'object', 'outputSchema.type');
    const expect = { ...RESULT_FIELDS, exit_code: 'integer', duration_ms: 'integer' };
    for (const [k, t] of Object.entries(expect)) {
      assert.equal(os.properties?.[k]?.type, t, `outputSchema.properties.${k}.type`);
    }
  } finally {
    await closeClient(c);
  }
});

test('execute_python: print() output comes back in stdout', opts, async () => {
  const c = await connectClient('sdk-print');
  try {
    const r = await runPython(c.client, {
      code: 'import sys\nprint("hello", 6 * 7)\nprint("to-stderr", file=sys.stderr)\n',
    });
    const sc = checkResult(r);
    assert.equal(r.isError ?? false, false, `isError is not set: ${show(r)}`);
    assert.equal(sc.stdout, 'hello 42\n');
    assert.equal(sc.stderr, 'to-stderr\n');
    assert.equal(sc.exit_code, 0);
    assert.equal(sc.timed_out, false);
    assert.equal(sc.truncated, false);
  } finally {
    await closeClient(c);
  }
});

// The age of the call's process in ms (its start in /proc/self/stat against
// the uptime), and others() (lib/hostile.mjs): [pid, uid, ppid] of every
// other process but PID 1.
const AGE_AND_OTHERS = PY_OTHERS + String.raw`import json, os
up = float(open("/proc/uptime").read().split()[0])
start = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
print(json.dumps({"age_ms": round((up - start) * 1000), "others": others()}))
`;

test('back to back: a session whose requests come right on the answers keeps a second spare, so the call after a pause and the one right after it both find their process forked ahead; beside a call only root\'s spares', opts, async () => {
  const c = await connectClient('sdk-pair');
  const age = async () => {
    const sc = checkResult(await runPython(c.client, { code: AGE_AND_OTHERS }));
    assert.equal(sc.exit_code, 0, show(sc));
    return JSON.parse(sc.stdout);
  };
  try {
    // Requests sent as soon as the answers come: the executor pairs its spares.
    for (let i = 0; i < 4; i++) await age();
    await new Promise((res) => setTimeout(res, 3000)); // time to fork and warm both
    const first = await age();
    const second = await age(); // sent on the first one's answer
    assert.ok(first.age_ms >= 1000, `the first call after the pause ran in a spare forked during it: ${show(first)}`);
    assert.ok(second.age_ms >= 1000, `so did the one right after it (the second spare), not a fork on demand: ${show(second)}`);
    assert.ok(first.others.length >= 1, `the second spare was there beside the first call: ${show(first)}`);
    for (const r of [first, second]) {
      assert.deepEqual(leftovers(r.others), [], `beside a call only root's spares, children of PID 1: ${show(r)}`);
    }
  } finally {
    await closeClient(c);
  }
});

test('execute_python: an uncaught exception gives isError and a traceback in stderr', opts, async () => {
  const c = await connectClient('sdk-raise');
  try {
    const r = await runPython(c.client, { code: 'print("before")\n1 / 0\nprint("after")\n' });
    const sc = checkResult(r);
    assert.equal(r.isError, true, `isError: ${show(r)}`);
    assert.equal(sc.stdout, 'before\n');
    assert.match(sc.stderr, /Traceback \(most recent call last\):/);
    assert.match(sc.stderr, /ZeroDivisionError: division by zero/);
    assert.equal(sc.exit_code, 1);
    assert.equal(sc.timed_out, false);
  } finally {
    await closeClient(c);
  }
});

test('workspace: a file written in one call is read in the next call of the session', opts, async () => {
  const c = await connectClient('sdk-persist');
  const value = `value-${randomToken()}`;
  try {
    const w = await runPython(c.client, {
      code: `import os\nwith open("persist.txt", "w") as f:\n    f.write(${JSON.stringify(value)})\nprint(os.getcwd())\n`,
    });
    const ws = checkResult(w);
    assert.equal(w.isError ?? false, false, show(w));
    assert.equal(ws.stdout, '/work\n', 'working directory is /work');

    const r = await runPython(c.client, { code: 'print(open("/work/persist.txt").read())\n' });
    const rs = checkResult(r);
    assert.equal(r.isError ?? false, false, show(r));
    assert.equal(rs.stdout, `${value}\n`);
  } finally {
    await closeClient(c);
  }
});

test("workspace: two sessions cannot see each other's files", opts, async () => {
  const a = await connectClient('sdk-isolation-a');
  let b;
  try {
    b = await connectClient('sdk-isolation-b');
    assert.notEqual(a.transport.sessionId, b.transport.sessionId, 'distinct session ids');
    const name = `secret-${randomToken()}.txt`;
    const valueA = `from-a-${randomToken()}`;
    const valueB = `from-b-${randomToken()}`;

    const wa = await runPython(a.client, {
      code: `open(${JSON.stringify('/work/' + name)}, "w").write(${JSON.stringify(valueA)})\nprint("ok")\n`,
    });
    assert.equal(checkResult(wa).stdout, 'ok\n', show(wa));

    const rb = await runPython(b.client, {
      code: `import os\nprint(os.path.exists(${JSON.stringify(name)}), os.path.exists(${JSON.stringify('/work/' + name)}))\n`,
    });
    assert.equal(checkResult(rb).stdout, 'False False\n', `session B must not see A's file: ${show(rb)}`);

    const wb = await runPython(b.client, {
      code: `open(${JSON.stringify(name)}, "w").write(${JSON.stringify(valueB)})\nprint(open(${JSON.stringify(name)}).read())\n`,
    });
    assert.equal(checkResult(wb).stdout, `${valueB}\n`, show(wb));

    const ra = await runPython(a.client, { code: `print(open(${JSON.stringify(name)}).read())\n` });
    assert.equal(checkResult(ra).stdout, `${valueA}\n`, `session A keeps its own file: ${show(ra)}`);
  } finally {
    await closeClient(a);
    await closeClient(b);
  }
});

test('DELETE ends the session: a later request with the old Mcp-Session-Id gets 404', opts, async () => {
  const c = await connectClient('sdk-delete');
  try {
    const sid = c.transport.sessionId;
    const pv = c.transport.protocolVersion;
    assert.equal(typeof sid, 'string', 'session id issued');
    const headers = {
      Authorization: `Bearer ${MCP_TOKEN}`,
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'Mcp-Session-Id': sid,
      'MCP-Protocol-Version': pv,
    };
    const body = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} });

    // Control: the very same raw request works while the session is alive.
    const before = await rawRequest('POST', MCP_URL, headers, body);
    assert.equal(before.status, 200, `live session answers 200: ${before.status} ${before.body}`);
    assert.match(before.body, /execute_python/);

    await c.transport.terminateSession();
    assert.equal(c.transport.sessionId, undefined, 'SDK dropped the session id after DELETE');

    const after = await rawRequest('POST', MCP_URL, headers, body);
    assert.equal(after.status, 404, `ended session answers 404: ${after.status} ${after.body}`);
  } finally {
    await closeClient(c);
  }
});

for (const [label, auth] of [
  ['no token', undefined],
  ['a wrong token', `Bearer wrong-${randomToken()}`],
]) {
  test(`auth: ${label} gets 401 with WWW-Authenticate: Bearer`, opts, async () => {
    const headers = {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
    };
    if (auth) headers.Authorization = auth;
    const res = await rawRequest('POST', MCP_URL, headers, initializeBody(1, 'auth-test'));
    assert.equal(res.status, 401, `status: ${res.status} ${res.body}`);
    const www = res.headers['www-authenticate'];
    assert.equal(typeof www, 'string', 'WWW-Authenticate header present');
    assert.ok(www.startsWith('Bearer'), `WWW-Authenticate starts with Bearer: ${www}`);
    assert.equal(res.headers['mcp-session-id'], undefined, 'no session is issued without auth');
  });
}

test('env_variables are visible to the code', opts, async () => {
  const c = await connectClient('sdk-env');
  try {
    const r = await runPython(c.client, {
      code: 'import os\nprint(os.environ["MCP_TEST_GREETING"] + "|" + os.environ["MCP_TEST_OTHER"])\n',
      env_variables: { MCP_TEST_GREETING: 'hello env', MCP_TEST_OTHER: 'a=b c' },
    });
    const sc = checkResult(r);
    assert.equal(r.isError ?? false, false, show(r));
    assert.equal(sc.stdout, 'hello env|a=b c\n');
    assert.equal(sc.exit_code, 0);
  } finally {
    await closeClient(c);
  }
});

test('timeout_seconds: 2 stops an endless loop with timed_out and isError', opts, async () => {
  const c = await connectClient('sdk-timeout');
  try {
    const t0 = Date.now();
    const r = await runPython(c.client, { code: 'while True:\n    pass\n', timeout_seconds: 2 });
    const elapsed = Date.now() - t0;
    const sc = checkResult(r);
    assert.equal(r.isError, true, `isError: ${show(r)}`);
    assert.equal(sc.timed_out, true, `timed_out: ${show(sc)}`);
    assert.ok(sc.duration_ms >= 1900, `duration_ms ${sc.duration_ms} >= ~2000`);
    assert.ok(sc.duration_ms < 15000, `duration_ms ${sc.duration_ms} < 15000 (timeout enforced)`);
    assert.ok(elapsed < 30000, `call returned in ${elapsed} ms`);
  } finally {
    await closeClient(c);
  }
});
