// A small MCP client of our own over raw HTTP(S), for tests that need the
// HTTP status of every request (503, 404, 502), timings, several tokens, or
// many sessions at once without the SDK's bookkeeping.  Requests ask for
// `application/json` only, so tools/call answers one JSON body (no SSE).
import http from 'node:http';
import https from 'node:https';
import { MCP_URL, MCP_TOKEN, CA_PEM, PROTOCOL_VERSION, initializeBody } from './common.mjs';

const URL_ = new URL(MCP_URL);
const MOD = URL_.protocol === 'https:' ? https : http;

/** A keep-alive agent for many requests (one per test file is plenty). */
export function keepAliveAgent(maxSockets = 64) {
  return new MOD.Agent({ keepAlive: true, maxSockets, ca: URL_.protocol === 'https:' ? CA_PEM : undefined });
}

/**
 * One HTTP request to MCP_URL: resolves {status, headers, body, json, ms}
 * (json: the parsed body, or undefined); rejects on a transport error or
 * after timeoutMs.
 */
export function request(method, headers, body, { agent, timeoutMs = 120_000 } = {}) {
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    const req = MOD.request(
      URL_,
      { method, headers, agent: agent || undefined, ca: URL_.protocol === 'https:' ? CA_PEM : undefined },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json;
          try {
            json = text ? JSON.parse(text) : undefined;
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode, headers: res.headers, body: text, json, ms: Date.now() - t0 });
        });
        res.on('error', reject);
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`${method} ${MCP_URL}: no answer in ${timeoutMs} ms`)));
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

let nextId = 1;

export class RawSession {
  constructor({ token = MCP_TOKEN, agent = null, name = 'raw-test' } = {}) {
    this.token = token;
    this.agent = agent;
    this.name = name;
    this.sid = null;
  }

  headers(extra = {}) {
    const h = {
      Authorization: `Bearer ${this.token}`,
      'Content-Type': 'application/json',
      Accept: 'application/json',
      'MCP-Protocol-Version': PROTOCOL_VERSION,
      ...extra,
    };
    if (this.sid) h['Mcp-Session-Id'] = this.sid;
    return h;
  }

  /** initialize + notifications/initialized; returns the initialize response (status 200 or not). */
  async init() {
    const h = this.headers();
    delete h['MCP-Protocol-Version'];
    const r = await request('POST', h, initializeBody(nextId++, this.name), { agent: this.agent });
    if (r.status !== 200) return r;
    this.sid = r.headers['mcp-session-id'];
    const n = await this.notify('notifications/initialized');
    if (n.status !== 202) throw new Error(`notifications/initialized: HTTP ${n.status} ${n.body}`);
    return r;
  }

  notify(method, params = undefined) {
    return request('POST', this.headers(), JSON.stringify({ jsonrpc: '2.0', method, ...(params ? { params } : {}) }), {
      agent: this.agent,
    });
  }

  /** A JSON-RPC request; returns the HTTP response (json has result or error). */
  rpc(method, params = {}, opts = {}) {
    const body = JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params });
    return request('POST', this.headers(), body, { agent: this.agent, ...opts });
  }

  /** tools/call execute_python; returns the HTTP response; r.result is the CallToolResult when 200. */
  async run(code, args = {}, opts = {}) {
    const r = await this.rpc('tools/call', { name: 'execute_python', arguments: { code, ...args } }, opts);
    r.result = r.json?.result;
    return r;
  }

  ping(opts = {}) {
    return this.rpc('ping', {}, opts);
  }

  async del() {
    if (!this.sid) return null;
    const r = await request('DELETE', this.headers(), undefined, { agent: this.agent });
    return r;
  }
}

/** The text of a CallToolResult's content blocks, joined. */
export function resultText(result) {
  return (result?.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

export const show = (x) =>
  JSON.stringify(x, (k, v) => (typeof v === 'string' && v.length > 1500 ? `${v.slice(0, 1500)}…(${v.length} chars)` : v));
