// The HTTP rules of the endpoint, through nginx, with raw requests: status
// codes, headers and JSON error bodies that no SDK client would provoke.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { MCP_URL, MCP_TOKEN, CA_PEM, TEST_TIMEOUT_MS, PROTOCOL_VERSION, rawRequest, initializeBody, SESSION_ID } from './lib/common.mjs';

const auth = { Authorization: `Bearer ${MCP_TOKEN}` };
const jsonHeaders = {
  ...auth,
  'Content-Type': 'application/json',
  Accept: 'application/json, text/event-stream',
};

async function initialize() {
  const r = await rawRequest('POST', MCP_URL, jsonHeaders, initializeBody(1, 'http-test'));
  assert.equal(r.status, 200, r.body);
  const sid = r.headers['mcp-session-id'];
  assert.match(sid, SESSION_ID, '[cell.]32 hex: 128 random bits');
  return sid;
}

async function end(sid) {
  await rawRequest('DELETE', MCP_URL, { ...auth, 'Mcp-Session-Id': sid });
}

function rpcError(r) {
  assert.match(r.headers['content-type'] || '', /application\/json/);
  const body = JSON.parse(r.body);
  assert.equal(body.jsonrpc, '2.0');
  assert.equal(typeof body.error.code, 'number');
  assert.equal(typeof body.error.message, 'string');
  return body.error;
}

test('a body over the limit gets 413 with a JSON-RPC error from nginx', { timeout: TEST_TIMEOUT_MS }, async () => {
  const big = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping', pad: 'x'.repeat(11 * 1024 * 1024) });
  const r = await rawRequest('POST', MCP_URL, jsonHeaders, big);
  assert.equal(r.status, 413);
  const e = rpcError(r);
  assert.match(e.message, /larger than/);
});

test('/.well-known probes get 404 without a token (no OAuth here)', { timeout: TEST_TIMEOUT_MS }, async () => {
  for (const p of ['/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-authorization-server',
    '/.well-known/openid-configuration']) {
    const r = await rawRequest('GET', new URL(p, MCP_URL).href, {});
    assert.equal(r.status, 404, p);
  }
});

test('GET /mcp with the token gets 405 and Allow (no standalone stream)', { timeout: TEST_TIMEOUT_MS }, async () => {
  const r = await rawRequest('GET', MCP_URL, { ...auth, Accept: 'text/event-stream' });
  assert.equal(r.status, 405);
  assert.match(r.headers.allow, /POST/);
});

test('wrong Content-Type gets 415, wrong Accept gets 406', { timeout: TEST_TIMEOUT_MS }, async () => {
  let r = await rawRequest('POST', MCP_URL, { ...jsonHeaders, 'Content-Type': 'text/plain' }, initializeBody());
  assert.equal(r.status, 415);
  rpcError(r);
  r = await rawRequest('POST', MCP_URL, { ...jsonHeaders, Accept: 'text/html' }, initializeBody());
  assert.equal(r.status, 406);
  rpcError(r);
});

test('malformed JSON gets 400 -32700, a batch gets 400 -32600', { timeout: TEST_TIMEOUT_MS }, async () => {
  let r = await rawRequest('POST', MCP_URL, jsonHeaders, '{"jsonrpc":"2.0","id":1,');
  assert.equal(r.status, 400);
  assert.equal(rpcError(r).code, -32700);
  r = await rawRequest('POST', MCP_URL, jsonHeaders, `[${initializeBody()}]`);
  assert.equal(r.status, 400);
  assert.equal(rpcError(r).code, -32600);
});

test('session rules: 400 without the id, 404 unknown or path-like, 400 bad protocol version', { timeout: TEST_TIMEOUT_MS }, async () => {
  const ping = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'ping' });
  let r = await rawRequest('POST', MCP_URL, jsonHeaders, ping);
  assert.equal(r.status, 400);
  for (const bogus of ['00000000-0000-4000-8000-000000000000', '../../etc', 'x'.repeat(300)]) {
    r = await rawRequest('POST', MCP_URL, { ...jsonHeaders, 'Mcp-Session-Id': bogus }, ping);
    assert.equal(r.status, 404, bogus);
    assert.equal(rpcError(r).code, -32001);
  }
  const sid = await initialize();
  try {
    r = await rawRequest('POST', MCP_URL, { ...jsonHeaders, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '1999-01-01' }, ping);
    assert.equal(r.status, 400);
    r = await rawRequest('POST', MCP_URL, { ...jsonHeaders, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL_VERSION }, ping);
    assert.equal(r.status, 200);
    assert.deepEqual(JSON.parse(r.body), { jsonrpc: '2.0', id: 7, result: {} });
  } finally {
    await end(sid);
  }
});

test('a foreign Origin gets 403; a localhost Origin is served', { timeout: TEST_TIMEOUT_MS }, async () => {
  let r = await rawRequest('POST', MCP_URL, { ...jsonHeaders, Origin: 'https://evil.example' }, initializeBody());
  assert.equal(r.status, 403);
  rpcError(r);
  r = await rawRequest('POST', MCP_URL, { ...jsonHeaders, Origin: 'https://localhost:8443' }, initializeBody());
  assert.equal(r.status, 200);
  await end(r.headers['mcp-session-id']);
});

test('notifications and responses get 202 with an empty body', { timeout: TEST_TIMEOUT_MS }, async () => {
  const sid = await initialize();
  try {
    const h = { ...jsonHeaders, 'Mcp-Session-Id': sid };
    let r = await rawRequest('POST', MCP_URL, h, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
    assert.equal(r.status, 202);
    assert.equal(r.body, '');
    r = await rawRequest('POST', MCP_URL, h, JSON.stringify({ jsonrpc: '2.0', id: 'srv-1', result: {} }));
    assert.equal(r.status, 202);
  } finally {
    await end(sid);
  }
});

test('unknown method -32601, unknown tool -32602', { timeout: TEST_TIMEOUT_MS }, async () => {
  const sid = await initialize();
  try {
    const h = { ...jsonHeaders, 'Mcp-Session-Id': sid };
    let r = await rawRequest('POST', MCP_URL, h, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'no/such' }));
    assert.equal(r.status, 200);
    assert.equal(JSON.parse(r.body).error.code, -32601);
    r = await rawRequest('POST', MCP_URL, h, JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'nope', arguments: {} } }));
    assert.equal(JSON.parse(r.body).error.code, -32602);
  } finally {
    await end(sid);
  }
});

// ---- the edge: what nginx answers before a responder sees anything ----

const URL_ = new URL(MCP_URL);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const MiB = 1024 * 1024;

/** A TLS (or TCP) connection to the endpoint; resolves once it is open. */
function connect() {
  return new Promise((resolve, reject) => {
    const opts = { host: URL_.hostname, port: Number(URL_.port || 443) };
    const s = URL_.protocol === 'https:' ? tls.connect({ ...opts, ca: CA_PEM }) : net.connect(opts);
    s.once(URL_.protocol === 'https:' ? 'secureConnect' : 'connect', () => resolve(s));
    s.once('error', reject);
  });
}

/** The status line, headers and body of what came back on a raw socket so far. */
function parseRaw(buf) {
  const text = buf.toString('latin1');
  const cut = text.indexOf('\r\n\r\n');
  if (cut < 0) return null;
  const lines = text.slice(0, cut).split('\r\n');
  const headers = {};
  for (const l of lines.slice(1)) {
    const i = l.indexOf(':');
    if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  const m = /^HTTP\/1\.1 (\d{3})/.exec(lines[0]);
  const len = Number(headers['content-length'] || 0);
  const body = buf.subarray(Buffer.byteLength(text.slice(0, cut + 4), 'latin1'));
  if (body.length < len) return null;
  return { status: m ? Number(m[1]) : 0, headers, body: body.subarray(0, len).toString('utf8') };
}

/**
 * Headers that announce `length` bytes of body, then only `send` of them:
 * resolves with the answer and how much had been sent when it came, or
 * with {status: 0} after waitMs without an answer. The socket is closed.
 */
async function partialBody(headers, length, send, waitMs) {
  const s = await connect();
  const head = [`POST ${URL_.pathname} HTTP/1.1`, `Host: ${URL_.host}`, 'Content-Type: application/json',
    'Accept: application/json, text/event-stream', `Content-Length: ${length}`, ...headers].join('\r\n') + '\r\n\r\n';
  let sent = 0;
  let got = Buffer.alloc(0);
  const answer = new Promise((resolve) => {
    s.on('data', (c) => {
      got = Buffer.concat([got, c]);
      const r = parseRaw(got);
      if (r) resolve({ ...r, sent });
    });
    s.on('error', () => resolve({ status: 0, sent }));
    s.on('close', () => resolve(parseRaw(got) ? { ...parseRaw(got), sent } : { status: 0, sent }));
  });
  s.write(head);
  const chunk = Buffer.alloc(64 * 1024, 0x20);
  while (sent < send) {
    const n = Math.min(chunk.length, send - sent);
    sent += n;
    if (!s.write(chunk.subarray(0, n))) await new Promise((r) => s.once('drain', r));
  }
  const r = await Promise.race([answer, sleep(waitMs).then(() => ({ status: 0, sent }))]);
  s.destroy();
  return r;
}

function isUnauthorized(r, what) {
  assert.equal(r.status, 401, `${what}: status`);
  assert.equal(r.headers['www-authenticate'], 'Bearer realm="mcp"', `${what}: WWW-Authenticate`);
  assert.match(r.headers['content-type'] || '', /^application\/json/, `${what}: Content-Type`);
  assert.deepEqual(JSON.parse(r.body), { jsonrpc: '2.0', id: null, error: { code: -32001,
    message: 'Unauthorized: a valid bearer token is required' } }, `${what}: body`);
}

test('an unknown token with a 9 MiB body gets 401 before the body is sent', { timeout: TEST_TIMEOUT_MS }, async (t) => {
  for (const [what, auth] of [['an unknown token', [`Authorization: Bearer ${'f'.repeat(64)}`]], ['no token', []],
    ['another scheme', [`Authorization: Basic ${MCP_TOKEN}`]]]) {
    const r = await partialBody(auth, 9 * MiB, 1 * MiB, 10_000);
    t.diagnostic(`${what}: status ${r.status} after ${r.sent} of ${9 * MiB} bytes`);
    assert.notEqual(r.status, 0, `${what}: no answer within 10 s while the body was incomplete (nginx waits for it)`);
    isUnauthorized(r, what);
    assert.ok(r.sent < 9 * MiB, `${what}: answered with the body incomplete`);
  }
  // nginx kept nothing of those bodies: its client_body_temp is empty.
  const state = process.env.MCP_STATE_DIR;
  if (state) {
    const { createHash } = await import('node:crypto');
    const rt = `/run/mcp-sandbox/${createHash('sha256').update(state).digest('hex').slice(0, 12)}/nginx-body`;
    if (fs.existsSync(rt)) assert.deepEqual(fs.readdirSync(rt, { recursive: true }).filter((f) => !f.endsWith('/')), [], rt);
  }
});

test('the token is compared exactly: its case flipped gets 401; the scheme may be any case', { timeout: TEST_TIMEOUT_MS }, async () => {
  const flipped = MCP_TOKEN.replace(/[a-zA-Z]/g, (c) => (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase()));
  assert.notEqual(flipped, MCP_TOKEN, 'the token has letters');
  const h = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };
  let r = await rawRequest('POST', MCP_URL, { ...h, Authorization: `Bearer ${flipped}` }, initializeBody(1, 'flipped'));
  isUnauthorized(r, 'the token with its case flipped');
  r = await rawRequest('POST', MCP_URL, { ...h, Authorization: `Bearer ${MCP_TOKEN.toUpperCase()}` }, initializeBody(1, 'upper'));
  assert.equal(r.status, /[a-z]/.test(MCP_TOKEN) ? 401 : 200, 'the token upper-cased');
  r = await rawRequest('DELETE', MCP_URL, { Authorization: `bEaReR ${MCP_TOKEN}` });
  assert.equal(r.status, 400, 'the scheme in any case (RFC 9110): served (DELETE without a session: 400)');
});

test('a tools/call whose code holds \\u0000 gets -32602 with its id, naming the argument', { timeout: TEST_TIMEOUT_MS }, async () => {
  const sid = await initialize();
  try {
    const h = { ...jsonHeaders, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL_VERSION };
    const body = JSON.stringify({ jsonrpc: '2.0', id: 'nul-1', method: 'tools/call',
      params: { name: 'execute_python', arguments: { code: 'print(1)\u0000import os' } } });
    assert.ok(body.includes('\\u0000'), 'the body has the escape');
    const r = await rawRequest('POST', MCP_URL, h, body);
    assert.equal(r.status, 200, r.body);
    const m = JSON.parse(r.body);
    assert.equal(m.id, 'nul-1', 'the answer carries the request id');
    assert.equal(m.error.code, -32602);
    assert.equal(m.error.message,
      'Invalid params: arguments.code contains a NUL character (\\u0000), which cannot be passed to the sandbox');
  } finally {
    await end(sid);
  }
});

// Limits at the edge (nginx.conf.in): requests without a valid token, per
// client address, 10/s with a burst of 20; requests of a token, at most 64
// at once.
test('a flood of requests without a valid token is cut to 429 (per client address), then it is served again', { timeout: TEST_TIMEOUT_MS }, async (t) => {
  const mod = URL_.protocol === 'https:' ? https : http;
  const agent = new mod.Agent({ keepAlive: true, maxSockets: 8, ca: CA_PEM });
  const one = () => new Promise((resolve) => {
    const req = mod.request(URL_, { method: 'POST', agent, headers: { 'Content-Type': 'application/json',
      Accept: 'application/json', Authorization: 'Bearer wrong-token-wrong-token', 'Content-Length': 2 } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString() }));
    });
    req.on('error', () => resolve({ status: 0 }));
    req.end('{}');
  });
  try {
    const answers = await Promise.all(Array.from({ length: 200 }, one));
    const counts = {};
    for (const a of answers) counts[a.status] = (counts[a.status] || 0) + 1;
    t.diagnostic(`200 requests with a wrong token at once: ${JSON.stringify(counts)}`);
    // The burst of 20 (less what earlier requests without a token left).
    assert.ok(counts[401] >= 10 && counts[401] <= 30, 'the burst is answered 401');
    assert.ok(counts[429] >= 100, 'the rest of the flood gets 429');
    assert.deepEqual(Object.keys(counts).sort(), ['401', '429']);
    const limited = answers.find((a) => a.status === 429);
    assert.match(limited.headers['content-type'] || '', /^application\/json/);
    assert.equal(JSON.parse(limited.body).error.code, -32000);
    assert.ok(Number(limited.headers['retry-after']) >= 1, 'Retry-After');
    // A client with the token is not affected meanwhile.
    const r = await rawRequest('DELETE', MCP_URL, auth);
    assert.equal(r.status, 400, 'the token is served during the flood');
  } finally {
    agent.destroy();
  }
  // The bucket refills (10/s): after 3 s the next ones get their 401.
  await sleep(3000);
  for (let i = 0; i < 5; i++) assert.equal((await one()).status, 401, 'served again after the flood');
});

test('one token cannot hold more than 64 requests open at once: the next gets 429', { timeout: TEST_TIMEOUT_MS }, async (t) => {
  const open = [];
  try {
    // 64 requests whose bodies never finish: nginx holds them.
    for (let i = 0; i < 64; i++) {
      const s = await connect();
      s.on('error', () => {});
      s.write([`POST ${URL_.pathname} HTTP/1.1`, `Host: ${URL_.host}`, `Authorization: Bearer ${MCP_TOKEN}`,
        'Content-Type: application/json', 'Accept: application/json', 'Content-Length: 1000'].join('\r\n') +
        '\r\n\r\n{"jsonrpc"');
      open.push(s);
    }
    let r;
    for (let i = 0; i < 20; i++) {
      await sleep(100);
      r = await rawRequest('DELETE', MCP_URL, auth);
      if (r.status === 429) break;
    }
    t.diagnostic(`with 64 requests held open, one more: ${r.status}`);
    assert.equal(r.status, 429, r.body);
    assert.equal(JSON.parse(r.body).error.code, -32000);
  } finally {
    for (const s of open) s.destroy();
  }
  // Once they are gone the token is served again.
  let status = 0;
  for (let i = 0; i < 50 && status !== 400; i++) {
    await sleep(100);
    status = (await rawRequest('DELETE', MCP_URL, auth)).status;
  }
  assert.equal(status, 400, 'served again once the held requests are closed');
});
