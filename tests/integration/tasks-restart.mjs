// Tasks (io.modelcontextprotocol/tasks) survive a restart of the whole stack
// as the runs under them do: a completed task keeps its result, a working
// one is reported failed (-32603: the run was lost with the service), never
// missing; get_run shows the same runs.
//   node tasks-restart.mjs before STATE_FILE   start two tasks in a new sandbox
//   node tasks-restart.mjs after STATE_FILE    (after the restart) read them back
// Exit status 0 when the phase holds; scripts/test runs both around a restart.
import fs from 'node:fs';
import { randomToken } from './lib/common.mjs';
import { getTask, python, tool, handleOf, untilDone } from './lib/tasks.mjs';

const [phase, stateFile] = process.argv.slice(2);

function fail(msg) {
  console.error(`tasks-restart ${phase}: ${msg}`);
  process.exit(1);
}

async function start(args) {
  const r = await python({ ...args, background: true });
  if (r.result?.resultType !== 'task') fail(`no task: ${r.body}`);
  return r.result.taskId;
}

if (phase === 'before') {
  const secret = randomToken();
  const done = await start({ code: `print('kept ${secret}')` });
  const lost = await start({ code: "import time\nprint('before the restart', flush=True)\ntime.sleep(600)", sandbox: handleOf(done) });
  const { task } = await untilDone(done, 20000);
  if (task.status !== 'completed') fail(`the short task: ${JSON.stringify(task)}`);
  const working = (await getTask(lost)).result;
  if (working?.status !== 'working') fail(`the long task: ${JSON.stringify(working)}`);
  fs.writeFileSync(stateFile, JSON.stringify({ secret, done, lost }));
  console.log(`tasks-restart before: tasks ${done} (completed) and ${lost} (working)`);
} else if (phase === 'after') {
  const { secret, done, lost } = JSON.parse(fs.readFileSync(stateFile, 'utf8'));
  const d = (await getTask(done)).result;
  if (d?.status !== 'completed' || d.result?.structuredContent?.stdout !== `kept ${secret}\n`) fail(`the completed task: ${JSON.stringify(d)}`);
  const l = (await getTask(lost)).result;
  if (l?.status !== 'failed' || l.error?.code !== -32603 || l.result !== undefined) fail(`the task the restart ended: ${JSON.stringify(l)}`);
  const run = (await tool('get_run', { run: lost })).result?.structuredContent;
  if (run?.status !== 'lost' || run.stdout !== 'before the restart\n') fail(`its run: ${JSON.stringify(run)}`);
  await tool('close_sandbox', { sandbox: handleOf(done) });
  console.log(`tasks-restart after: ${done} still completed, ${lost} failed (lost with the service), its output kept`);
} else {
  fail('usage: node tasks-restart.mjs before|after STATE_FILE');
}
