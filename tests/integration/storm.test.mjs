// A storm of malformed requests through nginx. Every one must get a
// well-formed answer with the right status (a JSON-RPC error, a tool error,
// or an empty 202), no responder may restart, and the responders' memory
// must stay flat over the storm.
//
// The cases: truncated JSON, 100,000-deep nesting, 5 MiB strings, invalid
// UTF-8, NUL bytes, wrong types for every parameter of every method,
// unknown methods, duplicate keys, huge, fractional and null ids, negative
// and huge timeouts, bogus and path-like session ids (../../etc), bogus
// headers and malformed HTTP (sent on a raw TLS socket: NUL in a header,
// folded lines, bad Content-Length, oversized headers, garbage).
//
// Host-side checks (when MCP_STATE_DIR names the stack's state folder and
// /proc shows its processes, as under scripts/test): the master's log
// (<state>/logs/mcp-server.log) gains no "responder N exited" line and the
// responders keep their pids; their RSS and PSS (/proc/<pid>/smaps_rollup)
// are read after two warm-up rounds and again after the measured rounds.
// See MEMORY_TOLERANCE for the tolerance and why. A responder built with
// AddressSanitizer (libasan mapped) keeps freed memory in quarantine: there
// the memory comparison is skipped and LeakSanitizer (scripts/test's
// sanitizer stack) checks leaks instead.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import tls from 'node:tls';
import net from 'node:net';
import { MCP_URL, MCP_TOKEN, CA_PEM, TEST_TIMEOUT_MS, PROTOCOL_VERSION, initializeBody } from './lib/common.mjs';

const URL_ = new URL(MCP_URL);
const STATE = process.env.MCP_STATE_DIR || '';
const WARMUP_ROUNDS = 2;
const ROUNDS = Number(process.env.MCP_STORM_ROUNDS || 8);
const MiB = 1024 * 1024;
const BIG = 'x'.repeat(5 * MiB);
const DEEP = 100_000;
// 3.3 million empty arrays in the params of a ping (built once, in cases()).
const tinyValues = () => JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping', params: { x: [] } })
  .replace('[]', `[${'[],'.repeat(Math.floor((9.5 * MiB) / 3))}[]]`);

// Memory: once warm, the responders' RSS (and PSS), all responders
// together, may end the measured rounds at most MEMORY_TOLERANCE_KB above
// where the warm-up left it. Why 2 MiB: a responder gives blocks of 1 MiB
// and more back to the system at free() (responder.c fixes glibc's mmap
// threshold), so the storm's 5 MiB bodies leave nothing resident; what
// remains after the warm-up is each thread's small-block caches filling up
// as the threads take turns: 70-430 KiB over 6 rounds, measured with 4
// responders of 8 threads. A leak of 1 KiB per request exceeds 2 MiB over
// ROUNDS = 8 rounds (tried on purpose: 1 KiB leaked per POST grew the
// responders by 380 KiB per round); one leaked 5 MiB body does at once.
// Smaller leaks are LeakSanitizer's job (scripts/test runs this suite again
// on a stack built with --enable-sanitizers).
const MEMORY_TOLERANCE_KB = 2 * 1024;

const Agent = (URL_.protocol === 'https:' ? https : http).Agent;
const agent = new Agent({ keepAlive: true, maxSockets: 4, ca: CA_PEM });
// The warm-up's bursts: more requests at once than all responders have
// threads (counted in /proc when the stack is local; else 48), up to 60.
const BURSTS = 4;
let BURST = 48;
const burstAgent = new Agent({ keepAlive: true, maxSockets: 256, ca: CA_PEM });
const auth = { Authorization: `Bearer ${MCP_TOKEN}` };
const base = { ...auth, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };
let sid = '';

// ---- requests ----

function send(method, headers, body, via = agent) {
  return new Promise((resolve, reject) => {
    const h = {};
    for (const [k, v] of Object.entries(headers)) if (v !== null && v !== undefined) h[k] = v;
    // Node sends an OPTIONS body without Content-Length (and nginx reads it
    // as the next request on the connection): always say how long it is.
    if (body !== undefined) h['Content-Length'] = Buffer.byteLength(body);
    const req = (URL_.protocol === 'https:' ? https : http).request(
      URL_,
      { method, headers: h, agent: via, timeout: 60_000 },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    if (body !== undefined) req.end(body);
    else req.end();
  });
}

// Bytes the HTTP client would refuse to send, on a socket of their own.
function sendRaw(bytes) {
  return new Promise((resolve, reject) => {
    const opts = { host: URL_.hostname, port: Number(URL_.port || 443) };
    const s = URL_.protocol === 'https:' ? tls.connect({ ...opts, ca: CA_PEM }) : net.connect(opts);
    s.once(URL_.protocol === 'https:' ? 'secureConnect' : 'connect', () => s.write(bytes));
    s.setTimeout(30_000, () => s.destroy(new Error('raw request timed out')));
    const chunks = [];
    s.on('data', (c) => chunks.push(c));
    s.on('end', () => {
      const all = Buffer.concat(chunks);
      const cut = all.indexOf('\r\n\r\n');
      const head = all.subarray(0, cut < 0 ? all.length : cut).toString('latin1');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(head);
      const headers = {};
      for (const line of head.split('\r\n').slice(1)) {
        const i = line.indexOf(':');
        if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
      }
      let body = cut < 0 ? Buffer.alloc(0) : all.subarray(cut + 4);
      if (/chunked/i.test(headers['transfer-encoding'] || '')) body = dechunk(body);
      resolve({ status: m ? Number(m[1]) : 0, headers, body });
    });
    s.on('error', reject);
  });
}

function dechunk(b) {
  const out = [];
  let i = 0;
  for (;;) {
    const eol = b.indexOf('\r\n', i);
    if (eol < 0) break;
    const n = parseInt(b.subarray(i, eol).toString('latin1'), 16);
    if (!(n > 0)) break;
    out.push(b.subarray(eol + 2, eol + 2 + n));
    i = eol + 2 + n + 2;
  }
  return Buffer.concat(out);
}

function rawRequest(lines, body = '') {
  const b = Buffer.isBuffer(body) ? body : Buffer.from(body);
  const head = [`POST ${URL_.pathname} HTTP/1.1`, `Host: ${URL_.host}`, ...lines, 'Connection: close'];
  if (!lines.some((l) => /^content-length|^transfer-encoding/i.test(String(l)))) head.push(`Content-Length: ${b.length}`);
  return Buffer.concat([Buffer.from(head.map(String).join('\r\n') + '\r\n\r\n', 'latin1'), b]);
}

// ---- the cases ----

const rpc = (method, params, id = 1) =>
  JSON.stringify(params === undefined ? { jsonrpc: '2.0', id, method } : { jsonrpc: '2.0', id, method, params });
const note = (method, params) => JSON.stringify({ jsonrpc: '2.0', method, ...(params ? { params } : {}) });
const call = (args) => rpc('tools/call', { name: 'execute_python', arguments: args });

// expect: {status, rpc: code} a JSON-RPC error; {status: 200, tool: true} a
// tool error for invalid arguments; {status: 202|204|405, empty: true};
// {status: 200, result: true}.
function cases() {
  const S = () => ({ ...base, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL_VERSION });
  const list = [];
  const post = (name, body, expect, headers = S()) => list.push({ name, method: 'POST', headers, body, expect });
  const parseError = { status: 400, rpc: -32700 };
  const invalid = { status: 400, rpc: -32600 };
  const badParams = { status: 200, rpc: -32602 };
  const toolError = { status: 200, tool: true };
  const ok = { status: 200, result: true };
  const accepted = { status: 202, empty: true };

  // Truncated JSON: every 7th prefix of a tools/call, and a few classics.
  const full = call({ code: 'print(1)', env_variables: { A: 'b' }, timeout_seconds: 5 });
  for (let n = 0; n < full.length; n += 7) post(`truncated at ${n}`, full.slice(0, n), parseError);
  for (const b of ['{', '[', '"abc', '{"jsonrpc":"2.0","id":1,', '{"a":tru', '{"a":1,}', '[1,]', '{"a" 1}', '01', '1e', '-',
    "{'a':1}", '{"a":1}{"b":2}', '{"jsonrpc":"2.0","id":1,"method":"ping"} x'])
    post(`not JSON: ${b}`, b, parseError);

  // 100,000-deep nesting, in every position.
  post('100,000 nested arrays', '['.repeat(DEEP) + ']'.repeat(DEEP), parseError);
  post('100,000 nested objects', '{"a":'.repeat(DEEP) + '1' + '}'.repeat(DEEP), parseError);
  post('100,000 unclosed arrays', '['.repeat(DEEP), parseError);
  post('100,000 nested in params', rpc('ping', {}).replace('{}', '{"x":' + '['.repeat(DEEP) + ']'.repeat(DEEP) + '}'),
    parseError);
  post('100,000 nested in arguments',
    call({ code: '1', files: [] }).replace('[]', '['.repeat(DEEP) + ']'.repeat(DEEP)), parseError);
  post('65 nested arrays (one past the limit)', rpc('ping', {}).replace('{}', '{"x":' + '['.repeat(64) + ']'.repeat(64) + '}'),
    parseError);

  // 5 MiB strings, in every place a string goes.
  post('5 MiB method name', rpc(BIG), { status: 200, rpc: -32601 });
  post('5 MiB string id', rpc('ping', undefined, BIG), invalid);
  post('5 MiB code', call({ code: BIG }), toolError);
  post('5 MiB env value', call({ code: '1', env_variables: { A: BIG } }), toolError);
  post('5 MiB package name', call({ code: '1', packages: [BIG] }), toolError);
  post('5 MiB file path', call({ code: '1', files: [{ path: BIG, text: 'x' }] }), toolError);
  post('5 MiB tool name', rpc('tools/call', { name: BIG, arguments: {} }), badParams);
  post('5 MiB resource uri', rpc('resources/read', { uri: 'file:///work/' + BIG }), { status: 200, rpcAny: [-32002, -32602] });
  post('5 MiB log level', rpc('logging/setLevel', { level: BIG }), badParams);
  post('5 MiB protocolVersion of a bad initialize', rpc('initialize', { protocolVersion: [BIG] }), badParams);
  post('5 MiB key', rpc('ping', { [BIG]: 1 }), ok);
  post('5 MiB notification', note('notifications/x', { pad: BIG }), accepted);
  post('5 MiB of whitespace around a ping', ' '.repeat(5 * MiB) + rpc('ping') + '\n'.repeat(1024), ok);
  // Every JSON value is a cJSON node (~64 bytes and a malloc): 9.5 MiB of
  // "[]," would be a tree of 200 MB; refused before cJSON (100,000 values).
  post('9.5 MiB of empty arrays in params', tinyValues(), { status: 400, rpc: -32600, message: 'more than 100000 JSON values' });
  post('11 MiB body (over max_body, from nginx)', rpc('ping', { pad: 'y'.repeat(11 * MiB) }), { status: 413, rpc: -32600 });

  // Invalid UTF-8 and NUL, in strings, keys and between tokens.
  const bytes = (...parts) => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : Buffer.from(p))));
  const bad = { 'lone continuation': [0x80], 'overlong /': [0xc0, 0xaf], 'surrogate': [0xed, 0xa0, 0x80],
    'beyond U+10FFFF': [0xf4, 0x90, 0x80, 0x80], 'truncated 3-byte': [0xe2, 0x82], 'byte ff': [0xff], 'latin-1 e9': [0xe9] };
  for (const [what, seq] of Object.entries(bad)) {
    post(`${what} in a method`, bytes('{"jsonrpc":"2.0","id":1,"method":"pi', seq, 'ng"}'), parseError);
    post(`${what} in a key`, bytes('{"jsonrpc":"2.0","id":1,"method":"ping","params":{"', seq, '":1}}'), parseError);
    post(`${what} in code`, bytes(call({ code: 'print(1)#' }).slice(0, -4), seq, '"}}}'), parseError);
    post(`${what} outside strings`, bytes('{"jsonrpc":"2.0","id":1,', seq, '"method":"ping"}'), parseError);
  }
  for (const esc of ['\\ud800', '\\udc00', '\\ud800\\u0041', '\\uDFFF'])
    post(`escaped lone surrogate ${esc}`, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":"${esc}"}}`, parseError);
  post('NUL in a method', bytes('{"jsonrpc":"2.0","id":1,"method":"pi', [0], 'ng"}'), parseError);
  post('NUL in code', bytes(call({ code: 'print(1)#' }).slice(0, -4), [0], '"}}}'), parseError);
  post('NUL between tokens', bytes('{"jsonrpc":"2.0",', [0], '"id":1,"method":"ping"}'), parseError);
  post('NUL after the body', bytes(rpc('ping'), [0]), parseError);
  post('only NUL bytes', Buffer.alloc(64), parseError);
  // An escaped NUL is valid JSON that cannot reach the sandbox: an error
  // with the request's id that names the place.
  post('escaped NUL in code', call({ code: 'print(1)\u0000import os' }), { ...badParams, id: '1',
    message: 'Invalid params: arguments.code contains a NUL character (\\u0000), which cannot be passed to the sandbox' });
  post('escaped NUL in a key', rpc('ping', { 'a\u0000b': 1 }), { ...badParams, id: '1', message: 'a key of params' });
  post('empty body', '', parseError);

  // Envelopes: batches, scalars, jsonrpc, duplicate keys.
  for (const b of ['[]', `[${rpc('ping')}]`, `[${rpc('ping')},${rpc('ping', undefined, 2)}]`, '1', '"ping"', 'null', 'true', '{}'])
    post(`not one request object: ${b.slice(0, 40)}`, b, invalid);
  for (const v of [undefined, '1.0', '2', 2, 2.0, null, [], {}])
    post(`jsonrpc ${JSON.stringify(v)}`, JSON.stringify({ ...(v === undefined ? {} : { jsonrpc: v }), id: 1, method: 'ping' }),
      invalid);
  post('duplicate id', '{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}', invalid);
  post('duplicate method', '{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/list"}', invalid);
  post('duplicate jsonrpc', '{"jsonrpc":"2.0","jsonrpc":"1.0","id":1,"method":"ping"}', invalid);
  post('duplicate key in params', '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":1,"a":2}}', invalid);
  post('duplicate argument', call({ code: 'X' }).replace('"code":"X"', '"code":"print(1)","code":"import os"'), invalid);
  post('duplicate key deep down', rpc('ping', { a: [{ b: { c: 1 } }] }).replace('"c":1', '"c":1,"c":2'), invalid);

  // ids: huge, fractional, null, of the wrong type.
  for (const id of ['null', '1.5', '-0.5', '1e308', '-1e308', '1e400', '9007199254740993', '-9007199254740993',
    '18446744073709551616', '{}', '[]', '[1]', 'true', 'false', JSON.stringify('i'.repeat(257))])
    post(`id ${id.slice(0, 30)}`, `{"jsonrpc":"2.0","id":${id},"method":"ping"}`, invalid);
  post('id 2^53-1 is fine', rpc('ping', undefined, 9007199254740991), { status: 200, result: true, id: '9007199254740991' });
  post('id -(2^53-1) is fine', rpc('ping', undefined, -9007199254740991), { status: 200, result: true, id: '-9007199254740991' });
  post('id of 256 bytes is fine', rpc('ping', undefined, 'i'.repeat(256)), ok);

  // method: wrong types, unknown names.
  for (const m of ['1', 'null', '[]', '{}', 'true', '["ping"]'])
    post(`method ${m}`, `{"jsonrpc":"2.0","id":1,"method":${m}}`, invalid);
  for (const m of ['foo', '', 'tools/', 'TOOLS/LIST', 'Ping', 'ping ', ' ping', 'rpc.discover', 'tools/call/x',
    '../tools/list', 'notifications/initialized', 'résumé', '\u2603'.repeat(200)]) {
    post(`unknown method ${JSON.stringify(m).slice(0, 40)}`, rpc(m, {}), { status: 200, rpc: -32601 });
    post(`unknown notification ${JSON.stringify(m).slice(0, 40)}`, note(m), accepted);
  }
  post('a response with no request', JSON.stringify({ jsonrpc: '2.0', id: 99, result: {} }), accepted);
  post('an error response with no request', JSON.stringify({ jsonrpc: '2.0', id: 99, error: { code: 1, message: 'x' } }),
    accepted);
  post('neither request nor response', JSON.stringify({ jsonrpc: '2.0', id: 99 }), invalid);

  // params of the wrong type, for every method.
  const methods = ['initialize', 'ping', 'tools/list', 'tools/call', 'resources/list', 'resources/read',
    'resources/templates/list', 'logging/setLevel', 'no/such/method'];
  for (const m of methods)
    for (const p of [1, -1, 'x', '', [], [1], true, false])
      post(`${m} with params ${JSON.stringify(p)}`, rpc(m, p), badParams);

  // Every parameter of every method, with every wrong type.
  const wrong = [null, true, 0, -1, 1.5, 1e308, '', 'x', [], [1], {}, { a: 1 }];
  const isType = (v, t) => (t === 'string' ? typeof v === 'string' : t === 'object' ? v && typeof v === 'object' && !Array.isArray(v)
    : t === 'array' ? Array.isArray(v) : false);
  for (const v of wrong) {
    if (typeof v !== 'string') {
      post(`initialize protocolVersion ${JSON.stringify(v)}`, rpc('initialize', { protocolVersion: v, capabilities: {} }),
        badParams);
      post(`tools/call name ${JSON.stringify(v)}`, rpc('tools/call', { name: v, arguments: { code: '1' } }), badParams);
      post(`resources/read uri ${JSON.stringify(v)}`, rpc('resources/read', { uri: v }), badParams);
      post(`logging/setLevel level ${JSON.stringify(v)}`, rpc('logging/setLevel', { level: v }), badParams);
      post(`notifications/cancelled requestId ${JSON.stringify(v)}`, note('notifications/cancelled', { requestId: v }),
        accepted);
    }
    if (!isType(v, 'object') && v !== null)
      post(`tools/call arguments ${JSON.stringify(v)}`, rpc('tools/call', { name: 'execute_python', arguments: v }), toolError);
    post(`tools/list cursor ${JSON.stringify(v)} (ignored)`, rpc('tools/list', { cursor: v }), ok);
    // resources/list is paged: only a cursor it gave (or none) is accepted.
    post(`resources/list cursor ${JSON.stringify(v)}`, rpc('resources/list', { cursor: v }), v === null ? ok : badParams);
    post(`ping _meta ${JSON.stringify(v)} (ignored)`, rpc('ping', { _meta: v }), ok);
    // execute_python: none of these may run code.
    if (typeof v !== 'string') post(`code ${JSON.stringify(v)}`, call({ code: v }), toolError);
    if (!isType(v, 'array') || v.length) post(`packages ${JSON.stringify(v)}`, call({ code: '1', packages: v === null ? 7 : v }),
      toolError);
    if (!isType(v, 'object') || Object.keys(v).length) post(`env_variables ${JSON.stringify(v)}`,
      call({ code: '1', env_variables: v === null ? 7 : v }), toolError);
    if (!isType(v, 'array') || v.length) post(`files ${JSON.stringify(v)}`, call({ code: '1', files: v === null ? 7 : v }),
      toolError);
    post(`timeout_seconds ${JSON.stringify(v)}`, call({ code: '1', timeout_seconds: v === null ? 'null' : v }), toolError);
  }
  post('tools/call without a name', rpc('tools/call', { arguments: { code: '1' } }), badParams);
  post('an unknown tool', rpc('tools/call', { name: 'rm_rf', arguments: {} }), badParams);
  post('a tool name that is a path', rpc('tools/call', { name: '../execute_python', arguments: {} }), badParams);
  post('execute_python without arguments', rpc('tools/call', { name: 'execute_python' }), toolError);
  post('execute_python without code', call({ timeout_seconds: 5 }), toolError);
  post('an unknown argument', call({ code: '1', shell: 'rm -rf /' }), toolError);
  post('logging/setLevel loud', rpc('logging/setLevel', { level: 'loud' }), badParams);
  post('initialize without params', rpc('initialize'), badParams);

  // Timeouts: negative, zero, fractional, huge, beyond every integer type.
  for (const t of [-1, 0, -0.5, 0.5, 1.5, 59.999, -1e308, 1e308, 2147483648, 4294967297, 9007199254740993, 1e6, 86401])
    post(`timeout_seconds ${t}`, call({ code: 'print(1)', timeout_seconds: t }), toolError);
  post('timeout_seconds 1e400', call({ code: 'print(1)', timeout_seconds: 7 }).replace(':7}', ':1e400}'), toolError);
  post('timeout_seconds -1e400', call({ code: 'print(1)', timeout_seconds: 7 }).replace(':7}', ':-1e400}'), toolError);
  post('timeout_seconds "60"', call({ code: 'print(1)', timeout_seconds: '60' }), toolError);

  // Arguments with the right type and a wrong value.
  for (const [what, args] of Object.entries({
    'env name with =': { code: '1', env_variables: { 'A=B': 'x' } },
    'env name with a digit first': { code: '1', env_variables: { '1A': 'x' } },
    'env name empty': { code: '1', env_variables: { '': 'x' } },
    'env value not a string': { code: '1', env_variables: { A: 1 } },
    'env value null': { code: '1', env_variables: { A: null } },
    'file path absolute': { code: '1', files: [{ path: '/etc/passwd', text: 'x' }] },
    'file path ../': { code: '1', files: [{ path: '../../etc/passwd', text: 'x' }] },
    'file path a/../..': { code: '1', files: [{ path: 'a/../../b', text: 'x' }] },
    'file path empty': { code: '1', files: [{ path: '', text: 'x' }] },
    'file path with a control character': { code: '1', files: [{ path: 'a\u0001b', text: 'x' }] },
    'file with text and base64': { code: '1', files: [{ path: 'a', text: 'x', base64: 'eA==' }] },
    'file with bad base64': { code: '1', files: [{ path: 'a', base64: '!!!!' }] },
    'file text not a string': { code: '1', files: [{ path: 'a', text: 1 }] },
    'file without content': { code: '1', files: [{ path: 'a' }] },
    'package option': { code: '1', packages: ['--index-url=http://evil.example/'] },
    'package url': { code: '1', packages: ['pkg @ https://evil.example/x.whl'] },
    'package path': { code: '1', packages: ['../../etc/passwd'] },
    'package marker': { code: '1', packages: ["pkg; python_version<'4'"] },
    'package not a string': { code: '1', packages: [1] },
  })) post(what, call(args), toolError);

  // Resources: path-like URIs.
  for (const uri of ['file:///work/../../etc/passwd', 'file:///work/%2e%2e/%2e%2e/etc/passwd', 'file:///etc/passwd',
    'file:///work/output/..', 'file:///work/', 'http://example.com/', 'file:///work/output/x?y', '', 'file:///work/%00'])
    post(`resources/read ${uri || '(empty)'}`, rpc('resources/read', { uri }), { status: 200, rpcAny: [-32002, -32602] });

  // Session ids: missing, bogus, path-like.
  const ping = rpc('ping');
  post('no session id', ping, invalid, { ...base });
  for (const bogus of ['../../etc', '../sessions', '..', '.', '/etc/passwd', '..%2F..%2Fetc', 'sessions/../../etc',
    '00000000-0000-4000-8000-000000000000', 'x'.repeat(4000), '%00', 'null', '*'])
    post(`session id ${bogus.slice(0, 40)}`, ping, { status: 404, rpc: -32001 }, { ...S(), 'Mcp-Session-Id': bogus });
  list.push({ name: 'session id: the real one upper-cased', lazy: () => ({ headers: { ...S(), 'Mcp-Session-Id': sid.toUpperCase() } }),
    method: 'POST', body: ping, expect: { status: 404, rpc: -32001 } });
  list.push({ name: 'session id: the real one and a suffix', lazy: () => ({ headers: { ...S(), 'Mcp-Session-Id': sid + '/..' } }),
    method: 'POST', body: ping, expect: { status: 404, rpc: -32001 } });
  for (const bogus of ['../../etc', '00000000-0000-4000-8000-000000000000'])
    list.push({ name: `DELETE session ${bogus}`, method: 'DELETE', headers: { ...auth, 'Mcp-Session-Id': bogus },
      expect: { status: 404, rpc: -32001 } });
  list.push({ name: 'DELETE without a session', method: 'DELETE', headers: { ...auth }, expect: invalid });

  // Headers.
  for (const ct of [null, 'text/plain', 'application/jsonx', 'application/x-www-form-urlencoded', 'multipart/form-data',
    'json', '*/*', 'application/json-seq'])
    post(`Content-Type ${ct}`, ping, { status: 415, rpc: -32600 }, { ...S(), 'Content-Type': ct });
  post('Content-Type with parameters', ping, ok, { ...S(), 'Content-Type': 'application/json; charset=utf-8; x=y' });
  for (const acc of [null, 'text/html', 'application/xml', 'application/json;q=0, text/event-stream;q=0', 'text/*;q=0'])
    post(`Accept ${acc}`, ping, { status: 406, rpc: -32600 }, { ...S(), Accept: acc });
  for (const v of ['1999-01-01', 'garbage', `${PROTOCOL_VERSION}x`, 'v'.repeat(4000), '2025-11-25, 2025-06-18'])
    post(`MCP-Protocol-Version ${v.slice(0, 30)}`, ping, invalid, { ...S(), 'MCP-Protocol-Version': v });
  for (const o of ['https://evil.example', 'null', 'http://localhost.evil.example', 'http://127.0.0.1.evil.example',
    'file://', 'https://evil.example:443/localhost'])
    post(`Origin ${o}`, ping, { status: 403, rpc: -32600 }, { ...S(), Origin: o });
  for (const a of [null, 'Bearer', 'Bearer ', 'Bearer wrong', `Bearer ${MCP_TOKEN}x`, `Basic ${MCP_TOKEN}`, MCP_TOKEN,
    `Bearer ${MCP_TOKEN.slice(0, -1)}`])
    post(`Authorization ${String(a).replace(MCP_TOKEN.slice(0, -1), '<token>').slice(0, 30)}`, ping,
      { status: 401, rpc: -32001, auth: true }, { ...S(), Authorization: a });
  post('a 7 KiB header', ping, ok, { ...S(), 'X-Junk': 'j'.repeat(7 * 1024) });
  post('100 junk headers', ping, ok, { ...S(), ...Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`X-Junk-${i}`, 'j'])) });
  post('latin-1 bytes in the session id', ping, { status: 404, rpc: -32001 }, { ...S(), 'Mcp-Session-Id': '\u00ff\u00fe../../etc' });
  for (const m of ['PUT', 'PATCH', 'OPTIONS', 'PROPFIND', 'FOO'])
    list.push({ name: `method ${m}`, method: m, headers: S(), body: ping, expect: { status: 405, empty: true } });
  list.push({ name: 'GET without text/event-stream', method: 'GET', headers: { ...S(), Accept: 'application/json' },
    expect: { status: 406, rpc: -32600 } });
  list.push({ name: 'GET for a stream', method: 'GET', headers: { ...S(), Accept: 'text/event-stream' },
    expect: { status: 405, rpc: -32600 } });
  // Resuming a stream (Last-Event-ID): only ids of this server's form, only
  // this session's streams.
  for (const [what, id, status] of [['a path', '../../../etc/passwd-1', 400], ['4 KiB', 'a'.repeat(4096), 400],
    ['upper-case hex', '0123456789AB-1', 400], ['a huge number', '0123456789ab-99999999999', 400],
    ['no such stream', '0123456789ab-0', 404]])
    list.push({ name: `GET resuming a stream: Last-Event-ID ${what}`, method: 'GET',
      headers: { ...S(), Accept: 'text/event-stream', 'Last-Event-ID': id }, expect: { status, rpc: -32600 } });

  // Malformed HTTP that the HTTP client would not send (nginx answers).
  const raw = (name, bytes, expect) => list.push({ name, raw: bytes, expect });
  const nginx400 = { status: 400, rpc: -32600 };
  const h = () => [`Authorization: Bearer ${MCP_TOKEN}`, 'Content-Type: application/json', 'Accept: application/json',
    `Mcp-Session-Id: ${sid}`, `MCP-Protocol-Version: ${PROTOCOL_VERSION}`];
  raw('NUL in a header value', () => rawRequest([...h(), 'X-Junk: a\u0000b'], ping), nginx400);
  raw('NUL in the session id', () => rawRequest([...h(), 'Mcp-Session-Id: ../\u0000/etc'].filter((l, i) => i !== 3), ping),
    nginx400);
  raw('a folded header line', () => rawRequest([...h(), 'X-Junk: a', '  folded'], ping), nginx400);
  raw('a space in a header name', () => rawRequest([...h(), 'X Junk: 1'], ping), nginx400);
  raw('a header line without a colon (ignored)', () => rawRequest([...h(), 'NoColonHere'], ping), { status: 200, result: true });
  raw('Content-Length -1', () => rawRequest([...h(), 'Content-Length: -1'], ''), nginx400);
  raw('two Content-Lengths', () => rawRequest([...h(), 'Content-Length: 5', 'Content-Length: 6'], 'hello'), nginx400);
  raw('Content-Length and chunked', () => rawRequest([...h(), 'Content-Length: 3', 'Transfer-Encoding: chunked'],
    `${ping.length.toString(16)}\r\n${ping}\r\n0\r\n\r\n`), nginx400);
  raw('a chunked body', () => rawRequest([...h(), 'Transfer-Encoding: chunked'], `${ping.length.toString(16)}\r\n${ping}\r\n0\r\n\r\n`),
    { status: 200, result: true });
  raw('a broken chunked body', () => rawRequest([...h(), 'Transfer-Encoding: chunked'], `zz\r\n${ping}\r\n0\r\n\r\n`), nginx400);
  raw('headers of 20 KiB', () => rawRequest([...h(), `X-Junk: ${'a'.repeat(20 * 1024)}`], ping), nginx400);
  raw('a request line of garbage', () => Buffer.from('\u0016\u0003garbage\r\n\r\n', 'latin1'), nginx400);
  raw('HTTP/1.0 without Host', () => Buffer.from(`POST ${URL_.pathname} HTTP/1.0\r\n${h().join('\r\n')}\r\n` +
    `Content-Length: ${ping.length}\r\n\r\n${ping}`), { status: 200, result: true });
  raw('bare LF line ends', () => Buffer.from(`POST ${URL_.pathname} HTTP/1.1\nHost: ${URL_.host}\n${h().join('\n')}\n` +
    `Content-Length: ${ping.length}\nConnection: close\n\n${ping}`), { status: 200, result: true });
  raw('latin-1 in a header name (ignored)', () => rawRequest([...h(), 'X\u00ffJunk: 1'], ping), { status: 200, result: true });
  return list;
}

// ---- checking answers ----

const utf8 = new TextDecoder('utf-8', { fatal: true });

function check(c, r) {
  const e = c.expect;
  const problems = [];
  if (r.status !== e.status) problems.push(`status ${r.status}, expected ${e.status}`);
  let text = '';
  try {
    text = utf8.decode(r.body);
  } catch {
    problems.push('the body is not valid UTF-8');
  }
  if (e.empty) {
    if (r.body.length !== 0) problems.push(`a body of ${r.body.length} bytes where none was expected`);
    return problems;
  }
  if (!/^application\/json/.test(r.headers['content-type'] || '')) {
    problems.push(`Content-Type ${r.headers['content-type']}`);
    return problems;
  }
  let m;
  try {
    m = JSON.parse(text);
  } catch {
    problems.push(`not JSON: ${text.slice(0, 120)}`);
    return problems;
  }
  if (m.jsonrpc !== '2.0' || !('id' in m)) problems.push('not a JSON-RPC response');
  if (e.rpc !== undefined || e.rpcAny) {
    const want = e.rpcAny || [e.rpc];
    if (!m.error || !want.includes(m.error.code)) problems.push(`error ${JSON.stringify(m.error || m.result).slice(0, 160)}, expected code ${want}`);
    else if (typeof m.error.message !== 'string' || !m.error.message) problems.push('an error without a message');
    if ('result' in m) problems.push('an error with a result');
  }
  if (e.auth && !/^Bearer/.test(r.headers['www-authenticate'] || '')) problems.push('401 without WWW-Authenticate: Bearer');
  if (e.result && !(m.result && typeof m.result === 'object')) problems.push(`no result: ${text.slice(0, 160)}`);
  if (e.id && !text.includes(`"id":${e.id}`)) problems.push(`the id did not come back as ${e.id}: ${text.slice(0, 80)}`);
  if (e.message && !(m.error && String(m.error.message).includes(e.message)))
    problems.push(`the message does not say "${e.message}": ${text.slice(0, 200)}`);
  if (e.tool) {
    const res = m.result;
    const t = res?.content?.[0]?.text || '';
    if (!res || res.isError !== true) problems.push(`not a tool error: ${text.slice(0, 160)}`);
    // "Invalid arguments": refused before anything ran.
    else if (!/^Invalid arguments: /.test(t)) problems.push(`a tool error that is not about the arguments: ${t.slice(0, 160)}`);
  }
  return problems;
}

async function round(list) {
  const failures = [];
  let n = 0;
  for (const c of list) {
    let r;
    try {
      if (c.raw) r = await sendRaw(c.raw());
      else {
        const lazy = c.lazy ? c.lazy() : {};
        r = await send(c.method, lazy.headers || c.headers, c.body);
      }
    } catch (err) {
      failures.push(`${c.name}: ${err.message}`);
      continue;
    }
    n++;
    const p = check(c, r);
    if (p.length) failures.push(`${c.name}: ${p.join('; ')}`);
  }
  return { failures, n };
}

// ---- the host side ----

function readText(p) {
  try {
    return fs.readFileSync(p, 'utf8');
  } catch {
    return null;
  }
}

function socketInodes(pid) {
  const out = new Set();
  let fds = [];
  try {
    fds = fs.readdirSync(`/proc/${pid}/fd`);
  } catch {
    return out;
  }
  for (const fd of fds) {
    try {
      const l = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
      if (l.startsWith('socket:')) out.add(l);
    } catch {
      /* gone */
    }
  }
  return out;
}

// The responders: the master's children that share its listening socket
// (the keeper closed it; supervisors close every inherited fd).
function responders() {
  const master = Number((readText(`${STATE}/mcp-server.pid`) || '').trim());
  if (!master) return null;
  const listen = socketInodes(master);
  const kids = [];
  let tasks = [];
  try {
    tasks = fs.readdirSync(`/proc/${master}/task`);
  } catch {
    return null;
  }
  for (const t of tasks)
    for (const k of (readText(`/proc/${master}/task/${t}/children`) || '').trim().split(/\s+/).filter(Boolean)) kids.push(Number(k));
  return kids.filter((pid) => [...socketInodes(pid)].some((s) => listen.has(s))).sort((a, b) => a - b);
}

function memory(pids) {
  let rss = 0;
  let pss = 0;
  let asan = false;
  for (const pid of pids) {
    const s = readText(`/proc/${pid}/smaps_rollup`) || '';
    rss += Number(/^Rss:\s+(\d+)/m.exec(s)?.[1] || 0);
    pss += Number(/^Pss:\s+(\d+)/m.exec(s)?.[1] || 0);
    asan ||= /libasan|libclang_rt\.asan/.test(readText(`/proc/${pid}/maps`) || '');
  }
  return { rss, pss, asan };
}

function restartLines() {
  const log = readText(`${STATE}/logs/mcp-server.log`) || '';
  return (log.match(/responder \d+ exited/g) || []).length;
}

const host = { ok: false, pids: null, restarts: 0, warm: null };

before(async () => {
  const r = await send('POST', base, initializeBody(1, 'storm'));
  assert.equal(r.status, 200, r.body.toString());
  sid = r.headers['mcp-session-id'];
  assert.ok(sid);
  const n = await send('POST', { ...base, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL_VERSION },
    note('notifications/initialized'));
  assert.equal(n.status, 202);
  const pids = STATE ? responders() : null;
  host.ok = Array.isArray(pids) && pids.length > 0;
  if (host.ok) {
    host.pids = pids;
    host.restarts = restartLines();
    const threads = pids.reduce((n, pid) => n + (fs.readdirSync(`/proc/${pid}/task`).length || 1), 0);
    // At most 60: nginx holds at most 64 requests of one token at once
    // (nginx.conf.in, limit_conn mcp_token_conn) and answers 429 beyond.
    BURST = Math.min(60, Math.max(BURST, threads + 16));
  }
});

after(async () => {
  if (sid) await send('DELETE', { ...auth, 'Mcp-Session-Id': sid }).catch(() => {});
  agent.destroy();
  burstAgent.destroy();
});

let list = [];

test(`warm-up: ${WARMUP_ROUNDS} rounds of the malformed requests, each answered well-formed`,
  { timeout: TEST_TIMEOUT_MS * 5 }, async (t) => {
    list = cases(); // now that the session exists
    t.diagnostic(`${list.length} requests per round`);
    for (let i = 0; i < WARMUP_ROUNDS; i++) {
      const started = Date.now();
      const { failures, n } = await round(list);
      t.diagnostic(`round ${i + 1}: ${n} requests in ${Date.now() - started} ms`);
      assert.deepEqual(failures, [], failures.join('\n'));
    }
    // Every responder thread keeps its own malloc arena and caches: give
    // each one the big requests now, many at once, so that they have grown
    // to what they keep before the measurement starts (MEMORY_TOLERANCE_KB).
    const big = list.filter((c) => !c.raw && c.body !== undefined && c.body.length >= 5 * MiB && c.expect.status !== 413);
    const started = Date.now();
    for (let b = 0; b < BURSTS; b++) {
      const results = await Promise.all(Array.from({ length: BURST }, (_, i) => big[i % big.length])
        .map((c) => send(c.method, c.headers, c.body, burstAgent).then((r) => check(c, r).map((p) => `${c.name}: ${p}`))));
      const failures = results.flat();
      assert.deepEqual(failures, [], failures.join('\n'));
    }
    t.diagnostic(`${BURSTS} bursts of ${BURST} concurrent 5 MiB requests in ${Date.now() - started} ms`);
    if (host.ok) host.warm = memory(host.pids);
  });

test(`storm: ${ROUNDS} more rounds, every answer well-formed`, { timeout: TEST_TIMEOUT_MS * 10 }, async (t) => {
  for (let i = 0; i < ROUNDS; i++) {
    const started = Date.now();
    const { failures, n } = await round(list);
    const m = host.ok ? memory(host.pids) : null;
    t.diagnostic(`round ${i + 1}: ${n} requests in ${Date.now() - started} ms` +
      (m ? `; responders RSS ${m.rss} kB, PSS ${m.pss} kB` : ''));
    assert.deepEqual(failures, [], failures.join('\n'));
  }
});

test('no responder restarted during the storm', { timeout: TEST_TIMEOUT_MS }, (t) => {
  if (!host.ok) return t.skip('MCP_STATE_DIR does not name the stack under test (or /proc does not show it)');
  assert.equal(restartLines(), host.restarts, `${STATE}/logs/mcp-server.log: a responder exited`);
  assert.deepEqual(responders(), host.pids, 'the responders are the same processes');
});

test('responder memory stays flat over the storm', { timeout: TEST_TIMEOUT_MS }, (t) => {
  if (!host.ok || !host.warm) return t.skip('MCP_STATE_DIR does not name the stack under test (or /proc does not show it)');
  const now = memory(host.pids);
  t.diagnostic(`${host.pids.length} responders after the warm-up: RSS ${host.warm.rss} kB, PSS ${host.warm.pss} kB; ` +
    `after ${ROUNDS} rounds: RSS ${now.rss} kB, PSS ${now.pss} kB; tolerance ${MEMORY_TOLERANCE_KB} kB`);
  if (now.asan) return t.skip('the responders run under AddressSanitizer (freed memory stays in quarantine); LeakSanitizer checks leaks');
  assert.ok(now.rss - host.warm.rss <= MEMORY_TOLERANCE_KB, `RSS grew by ${now.rss - host.warm.rss} kB`);
  assert.ok(now.pss - host.warm.pss <= MEMORY_TOLERANCE_KB, `PSS grew by ${now.pss - host.warm.pss} kB`);
});

// Peak memory (VmHWM, reset through clear_refs) of the responders while
// they refuse bodies of 3.3 million tiny values: the body itself (9.5 MiB,
// in a buffer that grows by doubling) and little more. Parsed into a cJSON
// tree, one such body costs more than 200 MB.
const PEAK_TOLERANCE_KB = 48 * 1024;

function status(pid) {
  const s = readText(`/proc/${pid}/status`) || '';
  return { rss: Number(/^VmRSS:\s+(\d+)/m.exec(s)?.[1] || 0), hwm: Number(/^VmHWM:\s+(\d+)/m.exec(s)?.[1] || 0) };
}

test(`9.5 MiB of empty arrays raise no responder's peak memory by more than ${PEAK_TOLERANCE_KB / 1024} MiB`,
  { timeout: TEST_TIMEOUT_MS }, async (t) => {
    if (!host.ok) return t.skip('MCP_STATE_DIR does not name the stack under test (or /proc does not show it)');
    const pids = responders();
    if (memory(pids).asan)
      return t.skip('the responders run under AddressSanitizer, whose quarantine keeps every freed body buffer');
    const before = new Map();
    try {
      for (const pid of pids) {
        fs.writeFileSync(`/proc/${pid}/clear_refs`, '5'); // VmHWM := VmRSS
        before.set(pid, status(pid).rss);
      }
    } catch (err) {
      return t.skip(`cannot reset the peak RSS (${err.code}): needs root`);
    }
    const body = tinyValues();
    const answers = [];
    for (let i = 0; i < 2 * pids.length; i++)
      answers.push(await send('POST', { ...base, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL_VERSION }, body));
    const growth = pids.map((pid) => status(pid).hwm - before.get(pid));
    t.diagnostic(`peak RSS above the RSS before, per responder (kB): ${growth.join(', ')}`);
    assert.ok(Math.max(...growth) <= PEAK_TOLERANCE_KB, `a responder's peak grew by ${Math.max(...growth)} kB`);
    for (const r of answers) assert.equal(r.status, 400, r.body.toString().slice(0, 200));
  });

test('the service still works after the storm', { timeout: TEST_TIMEOUT_MS }, async () => {
  const H = { ...base, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL_VERSION };
  const p = await send('POST', H, rpc('ping', undefined, 5));
  assert.equal(p.status, 200);
  const r = await send('POST', { ...H, Accept: 'application/json' }, call({ code: 'print(6 * 7)' }));
  assert.equal(r.status, 200);
  const res = JSON.parse(r.body.toString()).result;
  assert.equal(res.isError, false, JSON.stringify(res));
  assert.equal(res.structuredContent.stdout, '42\n');
});
