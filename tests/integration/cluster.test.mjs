// Cells behind the router (README.md, "Cells and the router"), on the
// cluster of scripts/cluster: 3 cells as containers of the image and the
// router, reached through the router with the real SDK clients of both eras
// (@modelcontextprotocol/sdk 1.x: 2025 sessions; @modelcontextprotocol/client
// 2.4.0 pinned to 2026-07-28: sandbox handles).  Every response names the
// cell that answered it (Mcp-Cell) and, when it was forwarded, the cell
// that forwarded it (Mcp-Forwarded-By): a client's fetch records both.
//
// Environment (scripts/test sets it): MCP_CLUSTER_PORT (the router's port;
// cell i's plain-HTTP MCP port is + 10 + i and its /cell + 30 + i),
// MCP_CLUSTER_SCRIPT (scripts/cluster, which it runs to kill, stop, start
// and add cells) and what scripts/cluster needs (MCP_CLUSTER_DIR).
// The tests run in order and share the cluster: spread, owners, the logs,
// forwarding, a killed cell, a drained cell, the load with a cell killed and started
// during it, a fourth cell, a step of the wall clock, then a crashed server.
import test from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  Client as Client2,
  StreamableHTTPClientTransport as StreamableHTTPClientTransport2,
} from '@modelcontextprotocol/client';
import { MCP_URL, MCP_TOKEN, PROTOCOL_VERSION, randomToken, rawRequest } from './lib/common.mjs';

const run = promisify(execFile);
const PORT = Number(process.env.MCP_CLUSTER_PORT);
const SCRIPT = process.env.MCP_CLUSTER_SCRIPT;
const METRICS_URL = `http://127.0.0.1:${PORT + 1}/metrics`;
const CELLS = ['cell-0', 'cell-1', 'cell-2'];
const cellUrl = (cell) => `http://127.0.0.1:${PORT + 10 + Number(cell.split('-')[1])}/mcp`;
const cellStatusUrl = (cell) => `http://127.0.0.1:${PORT + 30 + Number(cell.split('-')[1])}`;
const LOAD_SESSIONS = Number(process.env.MCP_TEST_CLUSTER_SESSIONS || 32);
const LOAD_CALLS = Number(process.env.MCP_TEST_CLUSTER_CALLS || 20);
const opts = { timeout: Number(process.env.MCP_TEST_TIMEOUT_MS || 600_000) };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const ownerOf = (id) => (id || '').split('.')[0];

/** A docker command's output, trimmed. */
const docker = async (...args) => (await run('/usr/bin/docker', args)).stdout.trim();

async function cluster(...args) {
  const { stdout } = await run(SCRIPT, args, { env: process.env, timeout: 400_000 });
  return stdout.trim();
}

// Every response seen: the session or handle it was for and who answered.
const seen = [];
function recordingFetch() {
  return async (url, init = {}) => {
    const res = await fetch(url, init);
    const h = new Headers(init.headers || {});
    let id = h.get('mcp-session-id') || res.headers.get('mcp-session-id') || '';
    const sandbox = h.get('mcp-param-sandbox') || '';
    if (!id && sandbox && !sandbox.startsWith('=?base64?')) id = sandbox;
    if (!id && typeof init.body === 'string') {
      const m = init.body.match(/"sandbox":"([a-z0-9-]+\.[0-9a-f]{32})"/);
      if (m) id = m[1];
    }
    seen.push({ id, status: res.status, cell: res.headers.get('mcp-cell'), by: res.headers.get('mcp-forwarded-by') });
    return res;
  };
}
// Responses for a session or sandbox that another cell than its owner gave.
const misrouted = () => seen.filter((s) => s.id && s.cell && s.cell !== ownerOf(s.id));

async function legacySession(url = MCP_URL, fetchFn = recordingFetch()) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${MCP_TOKEN}` } },
    fetch: fetchFn,
  });
  const client = new Client({ name: 'cluster-test', version: '1.0.0' }, { capabilities: {} });
  await client.connect(transport);
  return { era: '2025', client, transport, id: transport.sessionId };
}

async function modernClient(url = MCP_URL, fetchFn = recordingFetch()) {
  const transport = new StreamableHTTPClientTransport2(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${MCP_TOKEN}` } },
    fetch: fetchFn,
  });
  const client = new Client2({ name: 'cluster-test', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(transport);
  return client;
}

/** A 2026-07-28 sandbox: a client and the handle its first call made. */
async function modernSandbox(code = 'print("new")') {
  const client = await modernClient();
  const r = await client.callTool({ name: 'execute_python', arguments: { code } });
  assert.ok(!r.isError, JSON.stringify(r.content));
  return { era: '2026', client, id: r.structuredContent.sandbox };
}

/** Run code in a session or sandbox; the structured result.  timeout: the
 * SDK's wait for the answer (a call whose stream broke with its cell is
 * only given up by the SDK then). */
async function py(s, code, extra = {}, timeout = 300_000) {
  const args = { code, ...extra };
  if (s.era === '2026') args.sandbox = s.id;
  return s.client.callTool({ name: 'execute_python', arguments: args }, undefined, { timeout });
}

async function closeAll(list) {
  for (const s of list) {
    try {
      if (s.era === '2025') await s.transport.terminateSession();
      else await s.client.callTool({ name: 'close_sandbox', arguments: { sandbox: s.id } });
    } catch {
      /* a cell may be away: the session expires */
    }
    await s.client.close().catch(() => {});
  }
}

async function routerMetric(line) {
  const r = await rawRequest('GET', METRICS_URL);
  const m = r.body.split('\n').find((l) => l.startsWith(line + ' '));
  return m ? Number(m.split(' ').pop()) : 0;
}

async function waitRouter(line, value, ms = 30_000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if ((await routerMetric(line)) === value) return;
    await sleep(250);
  }
  assert.fail(`the router's ${line} did not become ${value}`);
}

/** A raw POST with the token and JSON headers: {status, headers, body}. */
const rawPost = (url, headers, message) =>
  rawRequest('POST', url, { Authorization: `Bearer ${MCP_TOKEN}`, 'Content-Type': 'application/json', ...headers }, JSON.stringify(message));

/** tools/list of a 2025 session (through the router unless url says otherwise). */
const rawSessionCall = (id, url = MCP_URL) =>
  rawPost(
    url,
    { Accept: 'application/json, text/event-stream', 'Mcp-Session-Id': id, 'MCP-Protocol-Version': PROTOCOL_VERSION },
    { jsonrpc: '2.0', id: 7, method: 'tools/list' },
  );

const modernMeta = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': {},
};

/** A raw 2026-07-28 tools/call (the caller adds Mcp-Param-Sandbox or not). */
const rawModernCall = (url, handle, code, headers) =>
  rawPost(
    url,
    { Accept: 'application/json', 'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': 'tools/call', 'Mcp-Name': 'execute_python', ...headers },
    { jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'execute_python', arguments: { code, sandbox: handle }, _meta: modernMeta } },
  );

const pool = []; // sessions and sandboxes the tests share: {era, client, id, file, text}

test('sessions and sandboxes of both eras spread over the cells', opts, async () => {
  assert.ok(PORT > 0 && SCRIPT, 'MCP_CLUSTER_PORT and MCP_CLUSTER_SCRIPT must be set (scripts/test)');
  await waitRouter('mcp_router_cells_ready', CELLS.length);
  for (let i = 0; i < 6; i++) pool.push(await legacySession());
  for (let i = 0; i < 6; i++) pool.push(await modernSandbox());
  const per = {};
  for (const s of pool) per[ownerOf(s.id)] = (per[ownerOf(s.id)] || 0) + 1;
  console.log(`# sessions per cell: ${JSON.stringify(per)}`);
  assert.deepEqual(Object.keys(per).sort(), CELLS, `every cell got sessions: ${JSON.stringify(per)}`);
  for (const c of CELLS) assert.ok(per[c] >= 2, `fewest sessions first: ${JSON.stringify(per)}`);
});

test('every request of a session reaches the cell that owns it', opts, async () => {
  for (const s of pool) {
    s.file = `f-${randomToken()}.txt`;
    s.text = `${s.id} ${randomToken()}`;
    const w = await py(s, `open(${JSON.stringify(s.file)}, "w").write(${JSON.stringify(s.text)})`);
    assert.ok(!w.isError, JSON.stringify(w.content));
    const r = await py(s, `print(open(${JSON.stringify(s.file)}).read())`);
    assert.equal(r.structuredContent.stdout, `${s.text}\n`);
  }
  const named = seen.filter((x) => x.id);
  assert.ok(named.length >= pool.length * 2, 'responses were recorded');
  assert.deepEqual(misrouted(), [], 'no response came from another cell');
  assert.ok(named.every((x) => x.cell === ownerOf(x.id)), 'every response names its owner');
});

test("a cell's and the router's logs are their containers' output (the image's MCP_LOGS=stdout), rotated by Docker, and none is a file in their state folders", opts, async () => {
  const s = pool.find((x) => x.era === '2025');
  const cell = ownerOf(s.id);
  const code = `print(${JSON.stringify(`log-${randomToken()}`)})`;
  const r = await py(s, code);
  assert.ok(!r.isError, JSON.stringify(r.content));
  const sha = createHash('sha256').update(code).digest('hex');
  const accessLine = (log) => log.split('\n').find((l) => l.includes('"POST /mcp" 200 ') && l.includes(` session=${s.id} `));
  let cellLog = '';
  let routerLog = '';
  for (let i = 0; i < 40 && !(cellLog.includes(sha) && accessLine(cellLog) && accessLine(routerLog)); i++) {
    if (i > 0) await sleep(250);
    cellLog = await cluster('logs', cell);
    routerLog = await cluster('logs', 'router');
  }
  // The audit line of the call (common/util.h: log_open, audit_log = stderr).
  const audit = cellLog
    .split('\n')
    .filter((l) => l.startsWith('{"time":'))
    .map((l) => JSON.parse(l))
    .find((e) => e.code_sha256 === sha);
  assert.ok(audit, `the call's audit line is in ${cell}'s log`);
  assert.equal(audit.session_id, s.id);
  assert.equal(audit.tool, 'execute_python');
  assert.equal(audit.outcome, 'ok');
  assert.equal(audit.token, 'default', 'the token by its name');
  // nginx's access lines, the cell's and the router's (which names the cell it chose).
  assert.match(accessLine(cellLog) || '', /token=default /, `${cell}'s nginx access line`);
  assert.match(accessLine(routerLog) || '', /upstream=\S+:8080 upstream_status=200 /, "the router's access line");
  assert.match(cellLog, /mcp-sandbox is running\./, "scripts/run's summary");
  assert.match(cellLog, /logs: +this output \(MCP_LOGS=stdout\)/, 'which says where the logs are');
  assert.ok(!cellLog.includes(MCP_TOKEN) && !routerLog.includes(MCP_TOKEN), 'no log names the token');
  // Nothing of it is written in the state folders (volumes: on Cloud Run, memory).
  const dir = process.env.MCP_CLUSTER_DIR;
  assert.ok(dir, 'MCP_CLUSTER_DIR is set (scripts/test)');
  // Docker keeps that output rotated (scripts/cluster: MCP_LOG_ROTATE_SIZE, MCP_LOG_ROTATE_KEEP).
  for (const name of [cell, 'router']) {
    const config = JSON.parse(await docker('inspect', '-f', '{{json .HostConfig.LogConfig}}', `mcpcells-${PORT}-${name}`));
    assert.deepEqual(config, { Type: 'local', Config: { 'max-size': '100m', 'max-file': '13' } },
      `${name}'s log is rotated by Docker`);
  }
  for (const [folder, names] of [
    [`${dir}/cells/${cell}/logs`, ['audit.log', 'egress.log', 'mcp-server.log', 'nginx-access.log', 'nginx-error.log']],
    [`${dir}/router/logs`, ['router-access.log', 'router-error.log']],
  ]) {
    const present = existsSync(folder) ? readdirSync(folder) : [];
    for (const n of names) assert.ok(!present.includes(n), `no ${folder}/${n} (found: ${present.join(' ')})`);
  }
});

test('a handle or session sent to another cell, or without a routing header the router can read, is forwarded to its owner', opts, async () => {
  const modern = pool.filter((s) => s.era === '2026');
  const legacy = pool.filter((s) => s.era === '2025');
  const before = {};
  for (const c of CELLS) {
    const r = await rawRequest('GET', `${cellStatusUrl(c)}/metrics`);
    before[c] = Number(r.body.match(/^mcp_requests_forwarded_total (\d+)$/m)[1]);
  }
  // 1. Straight to a cell that does not own it (the SDK 2.4 client on that cell's URL).
  for (const s of modern) {
    const other = CELLS.find((c) => c !== ownerOf(s.id));
    const client = await modernClient(cellUrl(other));
    const r = await client.callTool({ name: 'execute_python', arguments: { code: `print(open(${JSON.stringify(s.file)}).read())`, sandbox: s.id } });
    assert.equal(r.structuredContent.stdout, `${s.text}\n`, 'the owner ran it, in its sandbox');
    const last = seen[seen.length - 1];
    assert.equal(last.cell, ownerOf(s.id));
    assert.equal(last.by, other, 'the other cell forwarded it');
    await client.close();
  }
  for (const s of legacy) {
    const other = CELLS.find((c) => c !== ownerOf(s.id));
    const r = await rawSessionCall(s.id, cellUrl(other));
    assert.equal(r.status, 200, r.body);
    assert.equal(r.headers['mcp-cell'], ownerOf(s.id));
    assert.equal(r.headers['mcp-forwarded-by'], other);
  }
  // 2. Through the router with Mcp-Param-Sandbox base64-encoded (the router
  // cannot read it: new work to any cell, which reads the body).
  const encoding = async (url, init = {}) => {
    const h = new Headers(init.headers || {});
    const v = h.get('mcp-param-sandbox');
    if (v) h.set('mcp-param-sandbox', `=?base64?${Buffer.from(v).toString('base64')}?=`);
    return recordingFetch()(url, { ...init, headers: h });
  };
  const viaRouter = await modernClient(MCP_URL, encoding);
  for (const s of modern) {
    const r = await viaRouter.callTool({ name: 'execute_python', arguments: { code: `print(open(${JSON.stringify(s.file)}).read())`, sandbox: s.id } });
    assert.equal(r.structuredContent.stdout, `${s.text}\n`);
    assert.equal(seen[seen.length - 1].cell, ownerOf(s.id));
  }
  // 3. resources/read of a file whose name is not ASCII: the SDK sends
  // Mcp-Name base64-encoded.
  for (const s of modern) {
    const name = `données-${randomToken(2)}.txt`;
    const w = await py(s, `open(${JSON.stringify(name)}, "w").write("é ${s.id}")`);
    assert.ok(!w.isError);
    const read = await viaRouter.readResource({ uri: `sandbox://${s.id}/${name}` });
    assert.equal(read.contents[0].text, `é ${s.id}`);
  }
  await viaRouter.close();
  // 4. Without the header at all: forwarded, and the owner answers as the
  // specification says (-32020), not "unknown sandbox" from another cell.
  const s = modern[0];
  const other = CELLS.find((c) => c !== ownerOf(s.id));
  const r = await rawModernCall(cellUrl(other), s.id, 'print(1)', {});
  assert.equal(r.status, 400, r.body);
  assert.equal(JSON.parse(r.body).error.code, -32020);
  assert.equal(r.headers['mcp-cell'], ownerOf(s.id));
  assert.equal(r.headers['mcp-forwarded-by'], other);
  let forwarded = 0;
  for (const c of CELLS) {
    const m = await rawRequest('GET', `${cellStatusUrl(c)}/metrics`);
    forwarded += Number(m.body.match(/^mcp_requests_forwarded_total (\d+)$/m)[1]) - before[c];
  }
  assert.ok(forwarded >= modern.length + legacy.length + 1, `the cells counted their forwards (${forwarded})`);
  assert.deepEqual(misrouted(), []);
});

test('a killed cell: the other cells serve, its sessions answer 503 with Retry-After (never 404), then come back with their files; a call it was running ends with an error once it is back, not at the client\'s timeout', opts, async () => {
  const victim = 'cell-1';
  // A call in flight: its stream breaks with the cell; the SDK resumes it
  // (GET with Last-Event-ID), which the router holds until the cell is
  // back, and the cell answers that the call was lost (fcgi/stream.h).
  const busy = pool.find((x) => ownerOf(x.id) === victim && x.era === '2025');
  assert.ok(busy, 'the victim has a 2025 session');
  const inFlight = py(busy, 'import time; time.sleep(60)', {}, 300_000).then(
    (r) => ({ r }),
    (e) => ({ e }),
  );
  await sleep(3000);
  const killedAt = Date.now();
  await cluster('kill', victim);
  await waitRouter(`mcp_router_cell_up{cell="${victim}"}`, 0);
  for (const s of pool) {
    if (ownerOf(s.id) === victim) {
      const r = s.era === '2025' ? await rawSessionCall(s.id) : await rawModernCall(MCP_URL, s.id, 'print(1)', { 'Mcp-Param-Sandbox': s.id });
      assert.equal(r.status, 503, `${s.id}: ${r.status} ${r.body}`);
      assert.ok(Number(r.headers['retry-after']) > 0, 'Retry-After');
    } else {
      const r = await py(s, `print(open(${JSON.stringify(s.file)}).read())`);
      assert.equal(r.structuredContent.stdout, `${s.text}\n`);
    }
  }
  const fresh = await legacySession();
  assert.notEqual(ownerOf(fresh.id), victim, 'new sessions go to the cells that are up');
  await closeAll([fresh]);
  await cluster('start', victim);
  const startedAt = Date.now();
  const lost = await inFlight;
  const ended = Date.now();
  console.log(`# the call in flight ended ${ended - killedAt} ms after the kill, ${ended - startedAt} ms after the start: ${lost.e ? lost.e.message : JSON.stringify(lost.r).slice(0, 200)}`);
  assert.ok(lost.e, 'the call whose cell was killed got no result');
  assert.match(lost.e.message, /was lost/, 'it ended with the cell\'s error for a lost call');
  assert.doesNotMatch(lost.e.message, /timed out/i, 'not with the client\'s timeout');
  for (const s of pool.filter((x) => ownerOf(x.id) === victim)) {
    const r = await py(s, `print(open(${JSON.stringify(s.file)}).read())`);
    assert.equal(r.structuredContent.stdout, `${s.text}\n`, 'the files are intact');
  }
  assert.deepEqual(misrouted(), []);
});

test('a drained cell finishes its running call, sends new sessions elsewhere, and comes back', opts, async () => {
  const victim = 'cell-2';
  const s = pool.find((x) => ownerOf(x.id) === victim && x.era === '2025');
  const long = py(s, `import time; time.sleep(6); print(open(${JSON.stringify(s.file)}).read())`);
  await sleep(2000);
  const stopping = cluster('stop', victim);
  await waitRouter(`mcp_router_cell_ready{cell="${victim}"}`, 0);
  const during = [];
  for (let i = 0; i < 3; i++) during.push(await legacySession());
  assert.ok(during.every((x) => ownerOf(x.id) !== victim), 'no new session on the draining cell');
  const r = await long;
  assert.equal(r.structuredContent.stdout, `${s.text}\n`, 'the running call finished');
  await stopping;
  const away = await rawSessionCall(s.id);
  assert.equal(away.status, 503);
  await cluster('start', victim);
  const back = await py(s, `print(open(${JSON.stringify(s.file)}).read())`);
  assert.equal(back.structuredContent.stdout, `${s.text}\n`);
  await closeAll(during);
});

test(`a load of ${LOAD_SESSIONS} sessions x ${LOAD_CALLS} calls over 3 cells, one cell killed and started again during it, loses and misroutes nothing`, opts, async () => {
  const sessions = [];
  for (let i = 0; i < LOAD_SESSIONS; i++) {
    sessions.push(i % 2 === 0 ? await legacySession() : await modernSandbox('print(0)'));
  }
  const perCell = {};
  for (const s of sessions) perCell[ownerOf(s.id)] = (perCell[ownerOf(s.id)] || 0) + 1;
  const seenBefore = seen.length;
  const stats = { lost: new Set(), failed: 0, notRun: 0, retried: 0, stall: {}, done: 0, killAt: 0, restartedAt: 0,
    timedOut: 0 };
  const victim = 'cell-1';
  const total = LOAD_SESSIONS * LOAD_CALLS;
  let chaos = null;
  // Each call moves the session's counter from i to i + 1, once: a retry
  // after a call that ran but whose answer was lost finds i + 1.  A call
  // in flight on the killed cell loses its answer: a 2025 session resumes
  // its stream and gets an error once the cell is back; a 2026 call, which
  // streams only after 5 s or its first notification (none here), gets the
  // router's 503 at once (a stream of that era would not resume, and its
  // client would wait for its request timeout, 120 s here).
  const step = (i) =>
    `import os\ni = ${i}\nn = int(open("counter").read()) if os.path.exists("counter") else 0\n` +
    `if n == i:\n    open("counter.tmp", "w").write(str(i + 1))\n    os.replace("counter.tmp", "counter")\nprint(n)`;
  async function one(s) {
    let last = Date.now();
    for (let i = 0; i < LOAD_CALLS; i++) {
      const deadline = Date.now() + 300_000;
      let attempt = 0;
      const tries = []; // what each failed attempt of this call got, and when
      for (;;) {
        attempt++;
        let r = null;
        let error = null;
        const t0 = Date.now();
        try {
          r = await py(s, step(i), {}, 120_000);
        } catch (e) {
          error = e;
        }
        const text = error ? String(error.message || error) : r.isError ? JSON.stringify(r.content).slice(0, 300) : '';
        if (text) {
          if (/timed out/i.test(text)) stats.timedOut++;
          // The JSON-RPC message of an HTTP error, else the text; runs of the
          // same one are counted.
          const said = (text.match(/"message":"([^"]{0,120})/) || [null, text.slice(0, 120)])[1];
          const prev = tries[tries.length - 1];
          if (prev && prev.said === said) {
            prev.n++;
            prev.ms += Date.now() - t0;
          } else tries.push({ said, n: 1, ms: Date.now() - t0 });
        }
        if (!error && !r.isError) {
          const n = Number(r.structuredContent.stdout.trim());
          if (!(n === i || (attempt > 1 && n === i + 1))) {
            stats.lost.add(`${s.id}: call ${i} found ${n}`);
            return;
          }
          break;
        }
        if (/404|[Uu]nknown sandbox|not found/.test(text)) {
          stats.lost.add(`${s.id}: ${text}`);
          return;
        }
        if (Date.now() > deadline) {
          // The session stops here: its later calls would only find the
          // counter where this one left it.
          stats.failed++;
          stats.notRun += LOAD_CALLS - i - 1;
          console.log(`# failed call ${s.id} #${i}: ${text}`);
          return;
        }
        stats.retried++;
        await sleep(1000);
      }
      const now = Date.now();
      if (now - last > (stats.stall[s.era]?.ms ?? -1))
        stats.stall[s.era] = { ms: now - last, what: `call ${i}, failed tries: ${tries.map((x) => `${x.n} x ${x.ms} ms "${x.said}"`).join('; ') || 'none'}` };
      last = now;
      stats.done++;
      if (!chaos && stats.done >= Math.floor(total / 4)) {
        stats.killAt = stats.done;
        chaos = (async () => {
          // When the router sees the cell back, from the kill: how long
          // its sessions could not be served.
          const t0 = Date.now();
          await cluster('kill', victim);
          stats.killMs = Date.now() - t0;
          await sleep(5000);
          const t1 = Date.now();
          let started = true;
          const ready = (async () => {
            for (const end = Date.now() + 300_000; started && Date.now() < end; await sleep(250)) {
              const up = await routerMetric(`mcp_router_cell_ready{cell="${victim}"}`).catch(() => 0);
              if (up === 1) {
                stats.readyMs = Date.now() - t0;
                return;
              }
            }
          })();
          await cluster('start', victim).catch((e) => {
            started = false;
            throw e;
          });
          stats.startMs = Date.now() - t1;
          await ready;
          stats.restartedAt = stats.done;
        })();
      }
    }
  }
  const started = Date.now();
  await Promise.all(sessions.map(one));
  await chaos;
  const wrong = seen.slice(seenBefore).filter((x) => x.id && x.cell && x.cell !== ownerOf(x.id));
  console.log(
    `# cluster load: ${LOAD_SESSIONS} sessions (${JSON.stringify(perCell)}), ${total} calls in ${Date.now() - started} ms; ` +
      `${victim} killed after ${stats.killAt} calls (its kill took ${stats.killMs} ms), started again 5 s later, by ` +
      `${stats.restartedAt} (its start took ${stats.startMs} ms; the router saw it ready ${stats.readyMs} ms after the kill); ` +
      `sessions lost ${stats.lost.size}, misrouted ${wrong.length}, failed calls ${stats.failed} (${stats.notRun} not run after them), ` +
      `retried calls ${stats.retried}, tries that waited for the client's timeout ${stats.timedOut}; longest stall ` +
      Object.entries(stats.stall).map(([era, x]) => `of a ${era} session ${x.ms} ms: ${x.what}`).join('; '),
  );
  for (const l of stats.lost) console.log(`# lost: ${l}`);
  assert.equal(Object.keys(perCell).length, 3, `the sessions spread over the 3 cells: ${JSON.stringify(perCell)}`);
  assert.ok(perCell[victim] > 0, 'the killed cell had sessions');
  assert.equal(stats.lost.size, 0, 'sessions lost');
  assert.equal(wrong.length, 0, 'responses from another cell than the owner');
  assert.equal(stats.failed, 0, 'calls that never succeeded');
  await closeAll(sessions);
});

test('adding a cell moves no session, and new sessions go to it first', opts, async () => {
  const added = (await cluster('add')).split('\n').pop();
  assert.equal(added, 'cell-3');
  await waitRouter('mcp_router_cells_ready', 4);
  for (const s of pool) {
    const r = await py(s, `print(open(${JSON.stringify(s.file)}).read())`);
    assert.equal(r.structuredContent.stdout, `${s.text}\n`, `${s.id} kept its files`);
    assert.equal(seen[seen.length - 1].cell, ownerOf(s.id), `${s.id} is still served by its owner`);
  }
  const fresh = await legacySession();
  assert.equal(ownerOf(fresh.id), 'cell-3', 'the cell with the fewest sessions takes the next one');
  const r = await py(fresh, 'print("on the new cell")');
  assert.equal(r.structuredContent.stdout, 'on the new cell\n');
  await closeAll([fresh, ...pool]);
  assert.deepEqual(misrouted(), []);
});

test("a step of the wall clock stops no cell and not the router (their PID files seem older than their processes)", opts, async () => {
  // A virtual machine resumed from a snapshot stepped the clock 4.5 s
  // forward: the kernel's boot time (/proc/stat btime) moved with it, and
  // every script that judged its PID files by their times took its live
  // server or nginx for gone and stopped the container.  Moving the PID
  // files' times an hour back is the same step, seen from the files.
  const containers = (await docker('ps', '--filter', `name=^mcpcells-${PORT}-`, '--format', '{{.Names}}')).split('\n').filter(Boolean);
  const cells = containers.filter((c) => /-cell-\d+$/.test(c)).map((c) => c.replace(/^.*-(cell-\d+)$/, '$1'));
  assert.ok(cells.length >= 3 && containers.some((c) => c.endsWith('-router')), containers.join(' '));
  const step = 'for f in /var/lib/mcp-sandbox/mcp-server.pid /var/lib/mcp-sandbox/egress/squid.run.pid ' +
    '/run/mcp-sandbox/*/nginx.pid /run/mcp-sandbox/*/router.pid; do [ -f "$f" ] && touch -d "-1 hour" "$f" && echo "$f"; done; true';
  for (const c of containers) {
    const touched = (await docker('exec', c, 'sh', '-c', step)).split('\n').filter(Boolean);
    const want = c.endsWith('-router') ? ['router.pid'] : ['mcp-server.pid', 'squid.run.pid', 'nginx.pid'];
    for (const w of want) assert.ok(touched.some((f) => f.endsWith('/' + w)), `${c}: ${w} among ${touched.join(' ')}`);
  }
  // The scripts look every second; a cell that took its server for gone
  // would be draining (SIGTERM) within 2 s, the router gone at once.
  await sleep(4000);
  for (const c of containers) {
    assert.equal(await docker('inspect', '-f', '{{.State.Running}}', c), 'true', `${c} still runs`);
  }
  for (const c of cells) {
    const r = await rawRequest('GET', `${cellStatusUrl(c)}/cell`);
    assert.equal(r.status, 200, `${c}'s /cell`);
    assert.match(r.body, /"draining":false,"healthy":true/, `${c} neither drains nor is unhealthy: ${r.body}`);
  }
  await waitRouter('mcp_router_cells_ready', cells.length);
  const s = await legacySession();
  const m = await modernSandbox('print("after the step")');
  assert.equal((await py(s, 'print(6 * 7)')).structuredContent.stdout, '42\n');
  assert.equal((await py(m, 'print(7 * 6)')).structuredContent.stdout, '42\n');
  await closeAll([s, m]);
});

test("a cell whose server crashes is started again by Docker and serves its sessions again, files and all", opts, async () => {
  const victim = 'cell-0';
  const c = `mcpcells-${PORT}-${victim}`;
  const inspect = (f) => docker('inspect', '-f', f, c);
  const s = await legacySession(cellUrl(victim));
  assert.equal(ownerOf(s.id), victim);
  await py(s, 'open("kept.txt", "w").write("through the crash")');
  const restarts = Number(await inspect('{{.RestartCount}}'));
  const t0 = Date.now();
  await docker('exec', c, 'sh', '-c', 'kill -KILL "$(cat /var/lib/mcp-sandbox/mcp-server.pid)"');
  // scripts/run sees its server gone, stops what is left and exits; Docker
  // starts the container again (--restart unless-stopped).
  const end = Date.now() + 240_000;
  while (Date.now() < end && Number(await inspect('{{.RestartCount}}')) === restarts) await sleep(250);
  assert.equal(Number(await inspect('{{.RestartCount}}')), restarts + 1, `${c} was started again`);
  await waitRouter(`mcp_router_cell_ready{cell="${victim}"}`, 1, 240_000);
  console.log(`# ${victim}'s server killed: the router saw it ready again ${Date.now() - t0} ms later`);
  const r = await py(s, 'print(open("kept.txt").read())');
  assert.equal(r.structuredContent.stdout, 'through the crash\n', 'the session and its files came back');
  assert.equal(seen[seen.length - 1].cell, victim, 'served by its owner');
  await closeAll([s]);
  assert.deepEqual(misrouted(), []);
});
