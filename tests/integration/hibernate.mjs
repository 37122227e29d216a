// A hibernated session survives a restart of the whole service and is
// restored after it with what it had in memory (scripts/test runs
// `before`, restarts the stack, then `after`, on the hibernation stack).
//   node hibernate.mjs before STATE_FILE   a session imports numpy and
//                                          pandas, writes a file, sets x = 1
//                                          and counter = 1 in the persistent
//                                          interpreters, hibernates
//   node hibernate.mjs after STATE_FILE    (after the restart) the image is
//                                          still there; the next call has
//                                          numpy and pandas in memory and
//                                          the file, state_lost false, and
//                                          x += 1 and counter += 1 answer 2
// Needs root and MCP_STATE_DIR. Exit status 0 when the phase holds.
import fs from 'node:fs';
import { SLACK_MS, randomToken } from './lib/common.mjs';
import { RawSession, show } from './lib/rpc.mjs';
import { STATE_DIR, effectiveConfig } from './lib/host.mjs';
import { loadCode, LOAD_OUT, PROBE, image, waitHibernated, sessionPids } from './lib/hibernation.mjs';

const [phase, stateFile] = process.argv.slice(2);

function fail(msg) {
  console.error(`hibernate ${phase}: ${msg}`);
  process.exit(1);
}
const say = (msg) => console.log(`hibernate ${phase}: ${msg}`);

if (!STATE_DIR) fail('MCP_STATE_DIR is not set');

async function call(s, code, args = {}, tool = 'execute_python') {
  const r = await s.rpc('tools/call', { name: tool, arguments: { code, ...args } });
  r.result = r.json?.result;
  if (r.status !== 200 || r.result?.isError) fail(`tools/call: HTTP ${r.status} ${show(r.json ?? r.body)}`);
  return r.result.structuredContent;
}

if (phase === 'before') {
  const cfg = effectiveConfig();
  const s = new RawSession({ name: 'hibernate-restart' });
  const r = await s.init();
  if (r.status !== 200) fail(`initialize: HTTP ${r.status} ${r.body}`);
  const secret = randomToken();
  const sc = await call(s, loadCode(secret));
  if (sc.stdout !== LOAD_OUT) fail(`load: ${show(sc)}`);
  // The persistent interpreters of both languages hold a counter.
  const p = await call(s, 'x = 1', { persistent: true });
  const j = await call(s, 'let counter = 1;', { persistent: true }, 'execute_javascript');
  if (p.state_lost || j.state_lost) fail(`persistent: ${show([p, j])}`);
  const img = await waitHibernated(s.sid, cfg, cfg.hibernate_after * 1000 + 30_000 + SLACK_MS);
  if (!img) fail('the session did not hibernate');
  fs.writeFileSync(stateFile, JSON.stringify({ sid: s.sid, secret, bytes: img.bytes }));
  say(`session ${s.sid} hibernated (${img.bytes} bytes)`);
} else if (phase === 'after') {
  const { sid, secret, bytes } = JSON.parse(fs.readFileSync(stateFile, 'utf8'));
  const cfg = effectiveConfig();
  const img = image(sid);
  if (!img || img.bytes !== bytes) fail(`the image is not there as it was: ${show(img)}`);
  if (sessionPids(sid, cfg).length) fail('the new service started the session before a call');
  const s = new RawSession({ name: 'hibernate-restart' });
  s.sid = sid;
  const sc = await call(s, PROBE);
  if (sc.stdout !== `True True ${secret}\n` || sc.state_lost !== false) fail(`after the restart: ${show(sc)}`);
  if (image(sid)) fail('the image is still there after the restore');
  const x = await call(s, 'x += 1\nx', { persistent: true });
  const c = await call(s, 'counter += 1; counter', { persistent: true }, 'execute_javascript');
  if (x.value !== '2' || c.value !== '2' || x.state_lost || c.state_lost)
    fail(`the persistent interpreters after the restart: ${show([x, c])}`);
  const del = await s.del();
  if (del.status !== 204 && del.status !== 200) fail(`DELETE: HTTP ${del.status}`);
  say(`session ${sid} restored after the restart with numpy, pandas, both interpreters' counters and its file`);
} else {
  fail('usage: node hibernate.mjs before|after STATE_FILE');
}
