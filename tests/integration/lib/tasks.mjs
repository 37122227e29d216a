// Raw 2026-07-28 requests for the tasks extension (io.modelcontextprotocol/tasks):
// the TypeScript SDK 2.4.0 client has no tasks runtime (it reports a
// `resultType: "task"` as UnsupportedResultType and refuses to send
// tasks/get and tasks/cancel in this era), so tasks.test.mjs, tasks-ttl.test.mjs
// and tasks-restart.mjs speak the wire directly: `_meta` with the version and
// the client capabilities (the extension declared unless `declared: false`),
// and the headers a client sends (MCP-Protocol-Version, Mcp-Method, Mcp-Name:
// params.name, or params.taskId for the tasks methods; Mcp-Param-Sandbox).
import assert from 'node:assert/strict';
import { MCP_TOKEN } from './common.mjs';
import { request, show } from './rpc.mjs';

export const EXT = 'io.modelcontextprotocol/tasks';
export const V = '2026-07-28';
const NAMED = { 'tools/call': 'name', 'prompts/get': 'name', 'resources/read': 'uri', 'tasks/get': 'taskId', 'tasks/update': 'taskId', 'tasks/cancel': 'taskId' };
let nextId = 1;

/**
 * One request: {status, json, result, error}. opts: token, declared (the
 * extension in clientCapabilities, default true), headers (added; null
 * removes one the request would carry).
 */
export async function modern(method, params = {}, { token = MCP_TOKEN, declared = true, headers = {}, timeoutMs } = {}) {
  const meta = {
    'io.modelcontextprotocol/protocolVersion': V,
    'io.modelcontextprotocol/clientInfo': { name: 'tasks-test', version: '1.0.0' },
    'io.modelcontextprotocol/clientCapabilities': declared ? { extensions: { [EXT]: {} } } : {},
    ...params._meta,
  };
  const body = { jsonrpc: '2.0', id: nextId++, method, params: { ...params, _meta: meta } };
  const h = {
    Authorization: `Bearer ${token}`,
    'Content-Type': 'application/json',
    Accept: 'application/json',
    'MCP-Protocol-Version': V,
    'Mcp-Method': method,
  };
  const name = NAMED[method] && params[NAMED[method]];
  if (typeof name === 'string') h['Mcp-Name'] = name;
  if (method === 'tools/call' && typeof params.arguments?.sandbox === 'string') h['Mcp-Param-Sandbox'] = params.arguments.sandbox;
  for (const [k, v] of Object.entries(headers)) {
    if (v === null) delete h[k];
    else h[k] = v;
  }
  const r = await request('POST', h, JSON.stringify(body), { timeoutMs });
  return { status: r.status, json: r.json, result: r.json?.result, error: r.json?.error, body: r.body };
}

export const python = (args, opts) => modern('tools/call', { name: 'execute_python', arguments: args }, opts);
export const getTask = (taskId, opts) => modern('tasks/get', { taskId }, opts);
export const cancelTask = (taskId, opts) => modern('tasks/cancel', { taskId }, opts);
export const updateTask = (taskId, inputResponses = {}, opts) => modern('tasks/update', { taskId, inputResponses }, opts);
export const tool = (name, args, opts) => modern('tools/call', { name, arguments: args }, opts);

/** The sandbox handle a task id carries (`<handle>.r<16 hex>`). */
export const handleOf = (taskId) => taskId.slice(0, taskId.lastIndexOf('.'));
export const TASK_ID = /^([a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?\.)?[0-9a-f]{32}\.r[0-9a-f]{16}$/;
export const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

/** A tools/call that must have answered with a CreateTaskResult; returns it. */
export async function startTask(args, opts) {
  const r = await python(args, opts);
  assert.equal(r.status, 200, show(r.json));
  assert.equal(r.result?.resultType, 'task', `a CreateTaskResult: ${show(r.json)}`);
  assert.match(r.result.taskId, TASK_ID, show(r.result));
  return r.result;
}

/** Poll tasks/get at the pollIntervalMs each answer asks for, until the task leaves `working`. */
export async function untilDone(taskId, maxMs, opts) {
  const t0 = Date.now();
  for (let polls = 1; ; polls++) {
    const r = await getTask(taskId, opts);
    assert.equal(r.status, 200, show(r.json));
    if (r.result.status !== 'working') return { task: r.result, polls };
    assert.ok(Date.now() - t0 < maxMs, `the task ended within ${maxMs} ms: ${show(r.result)}`);
    assert.ok(Number.isInteger(r.result.pollIntervalMs) && r.result.pollIntervalMs >= 100, show(r.result));
    await new Promise((res) => setTimeout(res, r.result.pollIntervalMs));
  }
}

/** The task fields no task of this extension carries (2025 names, MRTR's requestState, a wrapper). */
export const NOT_ON_A_TASK = ['ttl', 'pollInterval', 'requestState', 'task', 'inputRequests'];
