-- The router's logic (nginx/router.conf.in; README.md, "Cells and the router").
--
-- Cells: a timer (one worker) polls every cell's /cell on its status port
-- (the cell's metrics listener): its name, live sessions, whether it drains
-- and whether it can start sandboxes.  The cells are the addresses of the
-- entries of MCP_ROUTER_CELLS, each an IP or a DNS name (a Kubernetes
-- headless service or a Docker network alias gives one address per cell),
-- resolved at every poll, so that cells found by DNS come and go by
-- themselves.  What a poll learns is in the shared dictionary:
--
--   addr:<cell>      ip:port of its MCP listener     up:<cell>     1 when its last poll answered
--   ready:<cell>     1 when up, healthy, not draining sessions:<cell> live sessions at the last poll
--   picked:<cell>    new sessions sent there since   name:<ip:port> the cell at that address
--   cells            the cells ever seen, comma-separated
--   c:<metric>       the router's counters (Prometheus lines)
--
-- A request that names a cell (nginx's maps read Mcp-Session-Id,
-- Mcp-Param-Sandbox and a sandbox:// Mcp-Name) goes to that cell and no
-- other: when it is not up, the router answers 503 with Retry-After (never
-- another cell, never 404).  A request that names none goes to the ready
-- cell with the fewest sessions; if that cell refuses it (503: it drains or
-- is full) or cannot be reached, nginx tries the next one
-- (proxy_next_upstream).  The body is never read here: a cell forwards a
-- request whose body names another cell's handle (fcgi/forward.h).
local balancer = require "ngx.balancer"

local M = {}
local dict = ngx.shared.mcp_router
local cfg = { entries = {} }

-- A cell that answers slowly (a busy machine) is not down: its entries
-- expire only after UP_TTL seconds without an answer.  A cell that is gone
-- (its address refuses or is unreachable, or DNS no longer lists it) is
-- down at the next poll.
local UP_TTL = 10
-- How long a GET that resumes a stream waits for its cell to be up.
local RESUME_WAIT_S = 60

function M.configure(c)
  for entry in c.cells:gmatch("[^%s,]+") do
    local host, port = entry:match("^(.-):(%d+)$")
    if not host then
      host, port = entry, "8080"
    end
    cfg.entries[#cfg.entries + 1] = { host = host, port = tonumber(port) }
  end
  cfg.status_port = tonumber(c.status_port) or 8081
  cfg.resolver = c.resolver
  cfg.poll = (tonumber(c.poll_ms) or 1000) / 1000
end

local function incr(key, n)
  dict:incr("c:" .. key, n or 1, 0)
end

local function known_cells()
  local list = {}
  for name in (dict:get("cells") or ""):gmatch("[^,]+") do
    list[#list + 1] = name
  end
  return list
end

local function remember(name)
  local cells = dict:get("cells") or ""
  if not ("," .. cells .. ","):find("," .. name .. ",", 1, true) then
    dict:set("cells", cells == "" and name or cells .. "," .. name)
  end
end

-- The addresses of a host: itself when it is an IPv4 literal, else its A records.
local function resolve(host)
  if host:match("^%d+%.%d+%.%d+%.%d+$") then
    return { host }
  end
  local resolver = require "nginx.dns.resolver"
  local r, err = resolver:new({ nameservers = { cfg.resolver }, retrans = 2, timeout = 1000 })
  if not r then
    return nil, err
  end
  local answers, qerr = r:query(host, { qtype = r.TYPE_A })
  if not answers then
    return nil, qerr
  end
  if answers.errcode then
    return nil, answers.errstr
  end
  local ips = {}
  for _, a in ipairs(answers) do
    if a.address then
      ips[#ips + 1] = a.address
    end
  end
  return ips
end

-- One cell's /cell: {cell, sessions, draining, healthy} or nil, reason.
local function fetch_status(ip)
  local sock = ngx.socket.tcp()
  sock:settimeouts(2000, 5000, 5000)
  local ok, err = sock:connect(ip, cfg.status_port)
  if not ok then
    return nil, err
  end
  sock:send("GET /cell HTTP/1.0\r\nHost: mcp-router\r\n\r\n")
  local reply, rerr = sock:receive("*a")
  sock:close()
  if not reply then
    return nil, rerr
  end
  local status, body = reply:match("^HTTP/%d%.%d (%d+).-\r\n\r\n(.*)$")
  local name = body and body:match('"cell":"([a-z0-9-]+)"')
  if status ~= "200" or not name then
    return nil, "no cell status (HTTP " .. tostring(status) .. ")"
  end
  return {
    name = name,
    sessions = tonumber(body:match('"sessions":(%d+)')) or 0,
    draining = body:match('"draining":true') ~= nil,
    healthy = body:match('"healthy":true') ~= nil,
  }
end

local function note(st, addr)
  local ttl = math.max(UP_TTL, 3 * cfg.poll)
  remember(st.name)
  dict:set("addr:" .. st.name, addr)
  dict:set("name:" .. addr, st.name)
  dict:set("up:" .. st.name, 1, ttl)
  dict:set("ready:" .. st.name, (st.healthy and not st.draining) and 1 or 0, ttl)
  dict:set("draining:" .. st.name, st.draining and 1 or 0, ttl)
  dict:set("sessions:" .. st.name, st.sessions)
  dict:set("picked:" .. st.name, 0)
end

local function gone(err)
  return err and (err:find("refused", 1, true) or err:find("unreachable", 1, true)) ~= nil
end

local function poll()
  -- One poll at a time: on a busy machine a poll may outlast the interval.
  if not dict:add("polling", 1, 30) then
    return
  end
  local threads, listed, resolved_all = {}, {}, true
  for _, e in ipairs(cfg.entries) do
    local ips, err = resolve(e.host)
    if not ips then
      resolved_all = false
      ngx.log(ngx.INFO, "mcp-router: cannot resolve ", e.host, ": ", err)
    end
    for _, ip in ipairs(ips or {}) do
      local addr = ip .. ":" .. e.port
      listed[addr] = true
      threads[#threads + 1] = { addr = addr, t = ngx.thread.spawn(fetch_status, ip) }
    end
  end
  local seen = {}
  for _, th in ipairs(threads) do
    local ok, st, err = ngx.thread.wait(th.t)
    if ok and st then
      note(st, th.addr)
      seen[st.name] = true
    elseif ok and gone(err) then
      local name = dict:get("name:" .. th.addr)
      if name and dict:get("addr:" .. name) == th.addr then
        dict:delete("up:" .. name)
      end
    end
  end
  for _, name in ipairs(known_cells()) do
    if not seen[name] then
      dict:delete("ready:" .. name)
      -- DNS answered and no longer lists it: gone.
      if resolved_all and not listed[dict:get("addr:" .. name) or ""] then
        dict:delete("up:" .. name)
      end
    end
  end
  dict:delete("polling")
end

function M.start()
  if ngx.worker.id() ~= 0 then
    return
  end
  ngx.timer.at(0, function(premature)
    if not premature then
      poll()
    end
  end)
  ngx.timer.every(cfg.poll, function(premature)
    if not premature then
      poll()
    end
  end)
end

local function unavailable(ctx, reason, cell)
  ctx.refused = reason
  incr(string.format('mcp_router_refused_total{reason="%s"}', reason))
  local what = cell and ("the cell that owns this session or sandbox (" .. cell .. ") is not running")
    or "no cell can take new work"
  ngx.status = 503
  ngx.header["Retry-After"] = "5"
  ngx.header["Content-Type"] = "application/json"
  ngx.print('{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Service temporarily unavailable: ' ..
    what .. '; retry in a few seconds"}}\n')
  return ngx.exit(503)
end

-- New work: the ready cells, fewest sessions first (the sessions of the last
-- poll plus those sent since); cells that are up and not draining when none
-- is ready.
local function new_work_peers()
  local list = {}
  for _, want in ipairs({ "ready:", "up:" }) do
    for _, name in ipairs(known_cells()) do
      if dict:get(want .. name) == 1 and dict:get("draining:" .. name) ~= 1 then
        list[#list + 1] = {
          name = name,
          addr = dict:get("addr:" .. name),
          load = (dict:get("sessions:" .. name) or 0) + (dict:get("picked:" .. name) or 0),
        }
      end
    end
    if #list > 0 then
      break
    end
  end
  table.sort(list, function(a, b)
    if a.load ~= b.load then
      return a.load < b.load
    end
    return a.name < b.name
  end)
  return list
end

-- Access phase of /mcp: where the request goes (ngx.ctx.peers).
function M.route()
  if ngx.var.mcp_token_id == "" then
    return -- auth_request answers 401
  end
  local ctx = ngx.ctx
  for _, by in ipairs({ "session", "sandbox", "resource" }) do
    local cell = ngx.var["mcp_cell_by_" .. by]
    if cell ~= "" then
      ctx.route, ctx.cell = by, cell
      local addr = dict:get("up:" .. cell) == 1 and dict:get("addr:" .. cell)
      if not addr and ngx.req.get_method() == "GET" and ngx.var.http_last_event_id then
        -- A client whose stream broke with its cell comes back for the
        -- answer (fcgi/stream.h): SDKs try that only twice, a second or
        -- two apart, so it waits here for a cell that restarts.
        local until_ = ngx.now() + RESUME_WAIT_S
        while not addr and ngx.now() < until_ do
          ngx.sleep(0.25)
          addr = dict:get("up:" .. cell) == 1 and dict:get("addr:" .. cell)
        end
      end
      if not addr then
        return unavailable(ctx, "cell_unavailable", cell)
      end
      ctx.peers = { addr }
      return
    end
  end
  ctx.route = "new"
  local list = new_work_peers()
  if #list == 0 then
    return unavailable(ctx, "no_cell")
  end
  -- What makes a session: initialize (the only 2025 request without a
  -- session) and a 2026 tools/call without a sandbox.
  local method = ngx.var.http_mcp_method
  if method == nil or method == "tools/call" then
    dict:incr("picked:" .. list[1].name, 1, 0)
  end
  ctx.peers = {}
  for i, p in ipairs(list) do
    ctx.peers[i] = p.addr
  end
end

-- The upstream's balancer: the i-th try goes to the i-th peer.
function M.balance()
  local ctx = ngx.ctx
  local peers = ctx.peers
  if not peers or #peers == 0 then
    return ngx.exit(502)
  end
  local i = (ctx.try or 0) + 1
  ctx.try = i
  if i == 1 and #peers > 1 then
    balancer.set_more_tries(#peers - 1)
  end
  local host, port = (peers[i] or peers[#peers]):match("^(.+):(%d+)$")
  local ok, err = balancer.set_current_peer(host, tonumber(port))
  if not ok then
    ngx.log(ngx.ERR, "mcp-router: cannot use peer ", peers[i], ": ", err)
    return ngx.exit(502)
  end
end

-- Log phase: the counters.
function M.log()
  local ctx = ngx.ctx
  local status = ngx.status
  if not ctx.route then
    if status == 401 then
      incr('mcp_router_refused_total{reason="unauthorized"}')
    elseif status == 429 then
      incr('mcp_router_refused_total{reason="rate_limited"}')
    end
    return
  end
  if ctx.refused then
    return
  end
  local tries = ctx.try or 0
  local cell = ctx.cell
  if ctx.route == "new" and tries >= 1 and ctx.peers[tries] then
    cell = dict:get("name:" .. ctx.peers[tries]) or "?"
  end
  incr(string.format('mcp_router_requests_total{route="%s",cell="%s"}', ctx.route, cell or ""))
  if tries > 1 then
    incr(string.format('mcp_router_retries_total{route="%s"}', ctx.route), tries - 1)
  end
  if status == 502 or status == 503 or status == 504 then
    incr(string.format('mcp_router_unavailable_total{cell="%s"}', cell or ""))
  end
  local by = ngx.var.upstream_http_mcp_forwarded_by
  if by and by ~= "" then
    incr(string.format('mcp_router_forwarded_total{from="%s",to="%s"}', by, ngx.var.upstream_http_mcp_cell or ""))
  end
end

local HELP = {
  mcp_router_requests_total = "Requests sent to a cell, by how the cell was chosen (session, sandbox, resource: named by a header; new: fewest sessions) and the cell that answered.",
  mcp_router_retries_total = "Times new work went on to the next cell because one refused it (503) or could not be reached.",
  mcp_router_refused_total = "Requests the router answered itself, by reason (cell_unavailable and no_cell: 503 with Retry-After).",
  mcp_router_unavailable_total = "Requests a cell answered 502, 503 or 504 (it drains, is full, or its owner could not be reached).",
  mcp_router_forwarded_total = "Requests a cell forwarded to the cell that owns them (their body named it, the headers did not).",
}

function M.metrics()
  local out = {}
  local up, ready = 0, 0
  out[#out + 1] = "# HELP mcp_router_cell_up 1 when the cell answered the router's last poll.\n# TYPE mcp_router_cell_up gauge\n"
  local per_cell = {}
  for _, name in ipairs(known_cells()) do
    local u, r = dict:get("up:" .. name) == 1, dict:get("ready:" .. name) == 1
    up, ready = up + (u and 1 or 0), ready + (r and 1 or 0)
    out[#out + 1] = string.format('mcp_router_cell_up{cell="%s"} %d\n', name, u and 1 or 0)
    per_cell[#per_cell + 1] = string.format('mcp_router_cell_ready{cell="%s"} %d\nmcp_router_cell_sessions{cell="%s"} %d\n',
      name, r and 1 or 0, name, dict:get("sessions:" .. name) or 0)
  end
  out[#out + 1] = "# HELP mcp_router_cell_ready 1 when the cell takes new work.\n# TYPE mcp_router_cell_ready gauge\n"
  out[#out + 1] = "# HELP mcp_router_cell_sessions The cell's live sessions at the last poll.\n# TYPE mcp_router_cell_sessions gauge\n"
  out[#out + 1] = table.concat(per_cell)
  out[#out + 1] = string.format("# HELP mcp_router_cells_up Cells that answered the last poll.\n# TYPE mcp_router_cells_up gauge\nmcp_router_cells_up %d\n", up)
  out[#out + 1] = string.format("# HELP mcp_router_cells_ready Cells that take new work.\n# TYPE mcp_router_cells_ready gauge\nmcp_router_cells_ready %d\n", ready)
  local keys = dict:get_keys(0)
  table.sort(keys)
  local typed = {}
  for _, k in ipairs(keys) do
    local line = k:match("^c:(.*)$")
    if line then
      local metric = line:match("^([%w_]+)")
      if not typed[metric] then
        typed[metric] = true
        out[#out + 1] = string.format("# HELP %s %s\n# TYPE %s counter\n", metric, HELP[metric] or metric, metric)
      end
      out[#out + 1] = string.format("%s %d\n", line, dict:get(k) or 0)
    end
  end
  ngx.header["Content-Type"] = "text/plain; version=0.0.4; charset=utf-8"
  ngx.print(table.concat(out))
end

-- 200 while at least one cell takes new work.
function M.healthz()
  local ready = 0
  for _, name in ipairs(known_cells()) do
    if dict:get("ready:" .. name) == 1 then
      ready = ready + 1
    end
  end
  ngx.header["Content-Type"] = "application/json"
  ngx.status = ready > 0 and 200 or 503
  ngx.print(string.format('{"status":"%s","cells_ready":%d}\n', ready > 0 and "ok" or "unavailable", ready))
end

return M
