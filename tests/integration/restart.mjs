// Sessions survive a restart of the whole stack (scripts/stop, scripts/run),
// and so do background runs: a finished one with its output and result, a
// running one as `lost` with the output it wrote (never missing).
//   node restart.mjs before STATE_FILE   create a session, write a file in it, start two runs
//   node restart.mjs after STATE_FILE    (after the restart) read them back
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

async function call(sid, code, args = {}, name = 'execute_python') {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call',
    params: { name, arguments: name === 'execute_python' ? { code, ...args } : args } });
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
  const done = (await call(sid, `print('kept ${secret}')`, { background: true })).structuredContent.run;
  const lost = (await call(sid, `import time\nprint('before the restart', flush=True)\ntime.sleep(600)`,
    { background: true })).structuredContent.run;
  const ended = await call(sid, '', { run: done, wait_seconds: 20 }, 'get_run');
  if (ended.structuredContent?.status !== 'finished') fail(`the short run: ${JSON.stringify(ended)}`);
  const running = await call(sid, '', { run: lost, wait_seconds: 2 }, 'get_run');
  if (running.structuredContent?.status !== 'running') fail(`the long run: ${JSON.stringify(running)}`);
  fs.writeFileSync(stateFile, JSON.stringify({ sid, secret, done, lost }));
  console.log(`restart before: session ${sid} wrote kept.txt`);
} else if (phase === 'after') {
  const { sid, secret, done, lost } = JSON.parse(fs.readFileSync(stateFile, 'utf8'));
  const res = await call(sid, `print(open('kept.txt').read())`);
  if (res.isError || res.structuredContent.stdout !== `${secret}\n`) fail(`read back: ${JSON.stringify(res)}`);
  const d = (await call(sid, '', { run: done }, 'get_run')).structuredContent;
  if (d?.status !== 'finished' || d.stdout !== `kept ${secret}\n` || d.exit_code !== 0) fail(`the finished run: ${JSON.stringify(d)}`);
  const l = (await call(sid, '', { run: lost }, 'get_run')).structuredContent;
  if (l?.status !== 'lost' || l.stdout !== 'before the restart\n') fail(`the run the restart ended: ${JSON.stringify(l)}`);
  const del = await rawRequest('DELETE', MCP_URL, { ...headers, 'Mcp-Session-Id': sid });
  if (del.status !== 204 && del.status !== 200) fail(`DELETE: HTTP ${del.status}`);
  console.log(`restart after: session ${sid} still has kept.txt, its finished run and its lost run`);
} else {
  fail('usage: node restart.mjs before|after STATE_FILE');
}
