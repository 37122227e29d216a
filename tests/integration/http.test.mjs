// The HTTP rules of the endpoint, through nginx, with raw requests: status
// codes, headers and JSON error bodies that no SDK client would provoke.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MCP_URL, MCP_TOKEN, TEST_TIMEOUT_MS, PROTOCOL_VERSION, rawRequest, initializeBody, SESSION_ID } from './lib/common.mjs';

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
