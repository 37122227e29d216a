// Sessions survive a restart of the whole stack (scripts/stop, scripts/run).
//   node restart.mjs before STATE_FILE   create a session, write a file in it
//   node restart.mjs after STATE_FILE    (after the restart) read it back
// Exit status 0 when the phase holds; scripts/test runs both around a restart.
import fs from 'node:fs';
import { MCP_URL, MCP_TOKEN, rawRequest, initializeBody, randomToken } from './lib/common.mjs';

const [phase, stateFile] = process.argv.slice(2);
const headers = {
  Authorization: `Bearer ${MCP_TOKEN}`,
  'Content-Type': 'application/json',
  Accept: 'application/json, text/event-stream',
  'MCP-Protocol-Version': '2025-11-25',
};

async function call(sid, code) {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call',
    params: { name: 'execute_python', arguments: { code } } });
  // JSON only: with text/event-stream too, tools/call answers as a stream.
  const r = await rawRequest('POST', MCP_URL, { ...headers, Accept: 'application/json', 'Mcp-Session-Id': sid }, body);
  if (r.status !== 200) throw new Error(`tools/call: HTTP ${r.status}: ${r.body}`);
  return JSON.parse(r.body).result;
}

function fail(msg) {
  console.error(`restart ${phase}: ${msg}`);
  process.exit(1);
}

if (phase === 'before') {
  const r = await rawRequest('POST', MCP_URL, headers, initializeBody(1, 'restart-test'));
  if (r.status !== 200) fail(`initialize: HTTP ${r.status}`);
  const sid = r.headers['mcp-session-id'];
  const secret = randomToken();
  const res = await call(sid, `open('kept.txt', 'w').write('${secret}'); print('written')`);
  if (res.isError || res.structuredContent.stdout !== 'written\n') fail(`write: ${JSON.stringify(res)}`);
  fs.writeFileSync(stateFile, JSON.stringify({ sid, secret }));
  console.log(`restart before: session ${sid} wrote kept.txt`);
} else if (phase === 'after') {
  const { sid, secret } = JSON.parse(fs.readFileSync(stateFile, 'utf8'));
  const res = await call(sid, `print(open('kept.txt').read())`);
  if (res.isError || res.structuredContent.stdout !== `${secret}\n`) fail(`read back: ${JSON.stringify(res)}`);
  const del = await rawRequest('DELETE', MCP_URL, { ...headers, 'Mcp-Session-Id': sid });
  if (del.status !== 204 && del.status !== 200) fail(`DELETE: HTTP ${del.status}`);
  console.log(`restart after: session ${sid} still has kept.txt`);
} else {
  fail('usage: node restart.mjs before|after STATE_FILE');
}
