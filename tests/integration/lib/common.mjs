// Shared helpers for the integration tests. The `run` script exports
// MCP_URL, MCP_TOKEN, MCP_CA_FILE (from endpoint.env) and NODE_EXTRA_CA_CERTS.
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  Client as Client2,
  StreamableHTTPClientTransport as StreamableHTTPClientTransport2,
} from '@modelcontextprotocol/client';

function required(name) {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} is not set: run these tests through tests/integration/run ENDPOINT_ENV`);
  }
  return v;
}

export const MCP_URL = required('MCP_URL');
export const MCP_TOKEN = required('MCP_TOKEN');
export const MCP_CA_FILE = required('MCP_CA_FILE');
export const CA_PEM = fs.readFileSync(MCP_CA_FILE);

// Per-test timeout: a sandbox start can take a while, the timeout test needs
// at least 2 s, and the conformance suite runs several sessions.
export const TEST_TIMEOUT_MS = Number(process.env.MCP_TEST_TIMEOUT_MS || 120_000);
// What a busy machine may add to a bound on wall time seen from the client
// (TLS, nginx, a responder and a sandbox all share the CPUs with the other
// tests and whatever else runs): bounds on promptness say "near the limit,
// not long after it", never "this fast" (speed is scripts/bench's business).
export const SLACK_MS = Number(process.env.MCP_TEST_SLACK_MS || 5000);

export const PROTOCOL_VERSION = '2025-11-25';
// nginx lets one token have this many requests at once and answers 429
// beyond (nginx.conf.in, limit_conn mcp_token_conn; MCP_NGINX_TOKEN_REQUESTS).
export const NGINX_TOKEN_REQUESTS = 64;

/** A session id (and a sandbox handle): an optional cell name and a dot, then 128 random bits in hex. */
export const SESSION_ID = /^([a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?\.)?[0-9a-f]{32}$/;

export function randomToken(n = 8) {
  return randomBytes(n).toString('hex');
}

/** Connect a fresh SDK client (one new MCP session) with a bearer token
 * (the stack's first one unless told). */
export async function connectClient(name = 'integration-test', token = MCP_TOKEN) {
  const transport = new StreamableHTTPClientTransport(new URL(MCP_URL), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name, version: '1.0.0' }, { capabilities: {} });
  await client.connect(transport);
  return { client, transport };
}

/**
 * Connect an SDK 2.x client (@modelcontextprotocol/client) with a version
 * negotiation mode: 'legacy', 'auto' or { pin: '2026-07-28' }.
 */
export async function connectClient2(mode, token = MCP_TOKEN, name = 'integration-modern') {
  const transport = new StreamableHTTPClientTransport2(new URL(MCP_URL), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client2({ name, version: '1.0.0' }, { versionNegotiation: { mode } });
  await client.connect(transport);
  return client;
}

/**
 * Close a client, ending its session with DELETE first so the server can free
 * the sandbox. Errors are swallowed: cleanup must not hide the test result.
 */
export async function closeClient(c) {
  if (!c) return;
  try {
    if (c.transport.sessionId) await c.transport.terminateSession();
  } catch {
    /* best effort */
  }
  try {
    await c.client.close();
  } catch {
    /* best effort */
  }
}

/** Call execute_python and return the raw CallToolResult. */
export async function runPython(client, args) {
  return client.callTool({ name: 'execute_python', arguments: args }, undefined, {
    timeout: TEST_TIMEOUT_MS,
  });
}

/**
 * A raw HTTP(S) request that trusts MCP_CA_FILE and returns
 * {status, headers, body}. headers are lower-cased names (node style).
 */
export function rawRequest(method, url, headers = {}, body = undefined) {
  const u = new URL(url);
  const mod = u.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.request(
      u,
      { method, headers, ca: u.protocol === 'https:' ? CA_PEM : undefined, timeout: 60_000 },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode,
            headers: res.headers,
            body: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${url}: timed out`)));
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

export const MCP_METRICS_URL = process.env.MCP_METRICS_URL || '';

/** The stack's /metrics (its loopback listener) as a Map of series -> value. */
export async function scrapeMetrics() {
  if (!MCP_METRICS_URL) throw new Error('endpoint.env names no MCP_METRICS_URL (the loopback metrics listener)');
  const r = await rawRequest('GET', MCP_METRICS_URL);
  if (r.status !== 200 || !/text\/plain/.test(r.headers['content-type'] || ''))
    throw new Error(`GET ${MCP_METRICS_URL}: HTTP ${r.status} ${r.headers['content-type']}: ${r.body.slice(0, 200)}`);
  const values = new Map();
  for (const line of r.body.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    values.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return values;
}

export function initializeBody(id = 1, clientName = 'integration-raw') {
  return JSON.stringify({
    jsonrpc: '2.0',
    id,
    method: 'initialize',
    params: {
      protocolVersion: PROTOCOL_VERSION,
      capabilities: {},
      clientInfo: { name: clientName, version: '1.0.0' },
    },
  });
}
