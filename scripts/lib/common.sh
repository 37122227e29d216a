# Shared by scripts/run, scripts/stop, scripts/test and the Dockerfile.
# Source it; it defines functions only (and the variables below).
#
# State folder: MCP_STATE_DIR, default <checkout>/run.  It holds the bearer
# tokens, the TLS files, the rendered nginx configuration, logs, pid files
# and all sessions.  Runtime folder: /run/mcp-sandbox/<hash of the state
# folder>: the FastCGI socket and nginx's temporary files, which nginx's
# unprivileged workers must reach even when the checkout is under /root.

MCP_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
MCP_STATE_DIR="${MCP_STATE_DIR:-$MCP_ROOT/run}"
MCP_HOST="${MCP_HOST:-127.0.0.1}"
MCP_PORT="${MCP_PORT:-8443}"
MCP_TLS="${MCP_TLS:-on}"           # off: plain HTTP (Cloud Run terminates TLS)
MCP_BUILD_DIR="${MCP_BUILD_DIR:-$MCP_ROOT/build}"
# Where the logs go (README.md, "Logs"): files in <state>/logs (a host's
# default), or stdout: the server's, nginx's and Squid's logs and the audit
# and egress lines on this script's standard output, a container's log (the
# image's default: Docker, Kubernetes and Cloud Run collect it, and nothing
# grows in the state folder).
MCP_LOGS="${MCP_LOGS:-files}"
logs_to_stdout() { [ "$MCP_LOGS" = stdout ]; }
check_logs_setting() {
  case "$MCP_LOGS" in
    files | stdout) ;;
    *) die "MCP_LOGS must be files or stdout, not '$MCP_LOGS'" ;;
  esac
  [[ "$MCP_LOG_ROTATE_SIZE" =~ ^([1-9][0-9]*[kMG]?|off)$ ]] ||
    die "MCP_LOG_ROTATE_SIZE must be a size such as 100M, 500k or 1G, or off, not '$MCP_LOG_ROTATE_SIZE'"
  [[ "$MCP_LOG_ROTATE_KEEP" =~ ^[1-9][0-9]*$ ]] ||
    die "MCP_LOG_ROTATE_KEEP must be a whole number of at least 1, not '$MCP_LOG_ROTATE_KEEP'"
  [[ "$MCP_LOG_ROTATE_EVERY" =~ ^[1-9][0-9]*$ ]] ||
    die "MCP_LOG_ROTATE_EVERY must be a whole number of seconds of at least 1, not '$MCP_LOG_ROTATE_EVERY'"
}
# The logs in files grow with every call (README.md, "Logs"): scripts/run
# and scripts/router rotate theirs with logrotate (start_log_rotation) once one has
# grown past MCP_LOG_ROTATE_SIZE (off: never), keeping MCP_LOG_ROTATE_KEEP
# compressed copies, and looks every MCP_LOG_ROTATE_EVERY seconds.
MCP_LOG_ROTATE_SIZE="${MCP_LOG_ROTATE_SIZE:-100M}"
MCP_LOG_ROTATE_KEEP="${MCP_LOG_ROTATE_KEEP:-12}"
MCP_LOG_ROTATE_EVERY="${MCP_LOG_ROTATE_EVERY:-60}"
# A log's destination as a configuration or message names it: the file
# ($1), or with MCP_LOGS=stdout what stands for this script's output ($2).
log_dest() { if logs_to_stdout; then printf '%s' "$2"; else printf '%s' "$1"; fi; }
# Where to look when a process failed: its log file, or this output.
log_hint() { log_dest "$1" 'the output above'; }
# Run a command in the background with its output appended to a log file
# (or on this script's standard output): `logged FILE cmd... &`, so that $!
# is the command's own pid.
logged() {
  local f="$1"
  shift
  if logs_to_stdout; then exec "$@" 2>&1; else exec "$@" >>"$f" 2>&1; fi
}
# The server's audit and egress logs: with MCP_LOGS=stdout, their default
# files become the server's standard error (audit_log = stderr), unless
# MCP_AUDIT_LOG, MCP_EGRESS_LOG or mcp.conf names them.
export_log_settings() {
  logs_to_stdout || return 0
  if [ -z "${MCP_AUDIT_LOG+set}" ] && [ "$(config_text audit_log)" = "$MCP_STATE_DIR/logs/audit.log" ]; then
    export MCP_AUDIT_LOG=stderr
  fi
  if [ -z "${MCP_EGRESS_LOG+set}" ] && [ "$(config_text egress_log)" = "$MCP_STATE_DIR/logs/egress.log" ]; then
    export MCP_EGRESS_LOG=stderr
  fi
}
# MCP_TOKENS (containers pass the bearer tokens in it) stays in this shell:
# ensure_tokens writes it to the tokens file, and no child process (build,
# nginx, the server and everything it starts) inherits it.
export -n MCP_TOKENS 2>/dev/null || true
# MCP_METRICS_PORT: nginx's loopback listener for /metrics, MCP_PORT + 1
# unless set (read when used, so that a script that changes MCP_PORT later
# gets its own).
metrics_port() { printf '%s' "${MCP_METRICS_PORT:-$((MCP_PORT + 1))}"; }
metrics_url() { printf 'http://127.0.0.1:%s/metrics' "$(metrics_port)"; }
# The filtering proxy (Squid) of network by policy listens on loopback at
# MCP_EGRESS_PORT, MCP_PORT + 5 unless set (read when used, as the metrics
# port: scripts/test and scripts/bench set MCP_PORT after sourcing this, and
# a port derived from the default 8443 would be a running service's).
egress_port() { printf '%s' "${MCP_EGRESS_PORT:-$((MCP_PORT + 5))}"; }

# The Debian packages and their install (packages.sh: also the Dockerfile's
# first layer, which changes only with the package lists).
# shellcheck source=packages.sh
. "$MCP_ROOT/scripts/lib/packages.sh"
# A cluster on one machine (scripts/cluster): Docker's engine, and
# debootstrap for a Debian base image when no registry can be reached.
MCP_APT_CLUSTER="docker.io debootstrap"
# clang, libclang-rt-14-dev (libFuzzer), llvm (llvm-symbolizer), clang-tidy and
# cppcheck: the fuzz harnesses and the static analysis (tests/fuzz/run, tests/lint/run).
# python3-kubernetes and python3-yaml: the offline checks of the Kubernetes
# manifests (tests/k8s/check.py).
MCP_APT_TEST="clang-format clang libclang-rt-14-dev llvm clang-tidy cppcheck systemd python3-kubernetes python3-yaml"


require_root() {
  [ "$(id -u)" = 0 ] || die "run this as root (it installs packages and starts gVisor sandboxes): sudo $0 $*"
}

# Where build() installs the service: <state>/install, or MCP_INSTALL_DIR
# (the container image: the state folder is a volume there).
install_dir() { printf '%s' "${MCP_INSTALL_DIR:-$MCP_STATE_DIR/install}"; }

state_hash() { printf '%s' "$MCP_STATE_DIR" | sha256sum | cut -c1-12; }
runtime_dir() { printf '/run/mcp-sandbox/%s' "$(state_hash)"; }

# Configure (once per prefix and MCP_CONFIGURE_FLAGS, e.g. --enable-sanitizers),
# build, install into the state folder.
build() {
  local prefix
  prefix="$(install_dir)"
  # The image built and installed the service (Dockerfile): nothing to do.
  if [ "${MCP_PREBUILT:-no}" = yes ] && [ -x "$prefix/bin/mcp-server" ]; then
    return 0
  fi
  local options="--prefix=$prefix${MCP_CONFIGURE_FLAGS:+ $MCP_CONFIGURE_FLAGS}"
  (
    cd "$MCP_ROOT"
    if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt configure ] ||
      [ tests/unit/local.am -nt configure ] || [ tests/fuzz/local.am -nt configure ]; then
      log "autoreconf"
      autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
    fi
    mkdir -p "$MCP_BUILD_DIR"
    cd "$MCP_BUILD_DIR"
    if [ ! -f config.status ] || [ "$(./config.status --config)" != "$options" ] ||
      [ "$MCP_ROOT/configure" -nt config.status ]; then
      log "configure --prefix=$prefix ${MCP_CONFIGURE_FLAGS:-}"
      # Paths are compiled in: objects of another configuration must go.
      [ -f Makefile ] && make -s clean >/dev/null 2>&1
      # shellcheck disable=SC2086
      "$MCP_ROOT/configure" -q --prefix="$prefix" ${MCP_CONFIGURE_FLAGS:-} || die "configure failed"
    fi
    make -s -j"$(nproc)" >/dev/null || make -j1 || die "build failed"
    make -s install >/dev/null || die "make install failed"
  )
}

# Bearer tokens: "<name> <token> [option=value ...]" lines, mode 0600; one
# generated when none.
ensure_tokens() {
  local f="$MCP_STATE_DIR/tokens"
  # Containers (Cloud Run) pass them from a secret: MCP_TOKENS="name:token
  # name2:token2" (spaces or newlines between entries).  An entry without a
  # name gets its own, token-<first 8 hex of the token's sha256>, so that no
  # two tokens share a name in logs, metrics and session ownership.
  if [ -n "${MCP_TOKENS:-}" ]; then
    (
      umask 077
      set -f
      local entry
      {
        printf '# name token (from MCP_TOKENS; the name appears in logs, never the token)\n'
        for entry in $MCP_TOKENS; do
          case "$entry" in
            *:*) printf '%s %s\n' "${entry%%:*}" "${entry#*:}" ;;
            *) printf 'token-%s %s\n' "$(printf '%s' "$entry" | sha256sum | cut -c1-8)" "$entry" ;;
          esac
        done
      } >"$f"
    )
  fi
  if [ ! -s "$f" ]; then
    (
      umask 077
      printf '# name token (one per line; the name appears in logs, never the token)\ndefault %s\n' \
        "$(openssl rand -hex 32)" >"$f"
    )
  fi
  chmod 600 "$f"
}

# The first token, for endpoint.env and the printed client configuration.
first_token() { awk '!/^#/ && NF>=2 {print $2; exit}' "$MCP_STATE_DIR/tokens"; }

# tokens -> nginx map and the per-token policy (options, no tokens), by the
# same script the systemd unit runs.
render_token_map() {
  "$(install_dir)/libexec/mcp-sandbox/mcp-sandbox-tokens" "$MCP_STATE_DIR/tokens" \
    "$MCP_STATE_DIR/nginx/tokens.map" "$MCP_STATE_DIR/token-policy" || die "tokens: fix $MCP_STATE_DIR/tokens"
}

# The FastCGI socket's group (socket_group, default mcp-sandbox) with
# nginx's worker user in it: the server refuses to start without them.
# nginx takes the group when it starts (initgroups).
ensure_socket_group() {
  local g user="${MCP_NGINX_USER:-www-data}"
  g="$(config_value socket_group)" || die "the configuration is not valid (above)"
  getent group "$g" >/dev/null || groupadd --system "$g" || die "cannot create the group $g"
  id -nG "$user" 2>/dev/null | tr ' ' '\n' | grep -qx -- "$g" ||
    usermod -aG "$g" "$user" || die "cannot add $user to the group $g"
}

# Self-signed CA and a server certificate for localhost, 127.0.0.1 and the host name.
ensure_tls() {
  local d="$MCP_STATE_DIR/tls"
  [ -s "$d/server.pem" ] && [ -s "$d/ca.pem" ] && return 0
  mkdir -p "$d"
  chmod 700 "$d"
  (
    cd "$d"
    umask 077
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=mcp-sandbox local CA" \
      -keyout ca.key -out ca.pem >/dev/null 2>&1 || die "openssl: CA"
    openssl req -newkey rsa:2048 -nodes -subj "/CN=${MCP_HOST}" -keyout server.key -out server.csr \
      >/dev/null 2>&1 || die "openssl: key"
    printf 'subjectAltName=DNS:localhost,DNS:%s,IP:127.0.0.1,IP:::1%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
      "$(hostname)" "$( [[ "$MCP_HOST" =~ ^[0-9.]+$ ]] && [ "$MCP_HOST" != 127.0.0.1 ] && printf ',IP:%s' "$MCP_HOST")" >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 825 \
      -extfile server.ext -out server.pem >/dev/null 2>&1 || die "openssl: certificate"
    chmod 644 ca.pem
    rm -f server.csr server.ext
  )
}

# One setting as the server sees it: `mcp-server --print-config`, which reads
# mcp.conf (or MCP_CONFIG) and the MCP_<KEY> environment variables.
config_value() {
  local out
  out="$(MCP_STATE_DIR="$MCP_STATE_DIR" "$(install_dir)/bin/mcp-server" --print-config)" || return 1
  awk -v k="$1" '$1 == k && $2 == "=" { print $3; found = 1 } END { exit !found }' <<<"$out"
}

# The first nameserver of /etc/resolv.conf (nginx's resolver takes
# addresses; Docker's networks and Kubernetes give one there), or
# MCP_RESOLVER.
resolver_address() {
  [ -n "${MCP_RESOLVER:-}" ] && { printf '%s' "$MCP_RESOLVER"; return 0; }
  awk '$1 == "nameserver" { print $2; exit }' /etc/resolv.conf
}

# Cells (README.md, "Cells and the router"): where this cell finds the
# others, for the requests it forwards (fcgi/forward.h), from
# MCP_CELL_ADDRESS: a pattern with {cell} resolved by DNS when used
# ("{cell}.mcp-cells.default.svc.cluster.local:8080", "{cell}:8080"), or a
# list "name=host:port ..." (cells listed in configuration).  Unset: no
# other cell (a request for one gets 503).
render_cells_map() {
  local out="$MCP_STATE_DIR/nginx/cells.conf" spec="${MCP_CELL_ADDRESS:-}" entry
  {
    printf '# written by scripts/lib/common.sh (render_cells_map) from MCP_CELL_ADDRESS\n'
    if [[ "$spec" == *"{cell}"* ]]; then
      [[ "$spec" =~ ^\{cell\}[A-Za-z0-9.-]*:[0-9]+$ ]] ||
        die "MCP_CELL_ADDRESS must look like {cell}.domain:port or {cell}:port, not $spec"
      printf 'resolver %s valid=5s ipv6=off;\nresolver_timeout 3s;\n' "$(resolver_address)"
      printf 'map $mcp_fwd_cell $mcp_fwd_addr {\n    "~^(?<mcp_fwd_name>[a-z0-9-]+)$" "%s";\n}\n' \
        "${spec//\{cell\}/\$\{mcp_fwd_name\}}"
    else
      printf 'map $mcp_fwd_cell $mcp_fwd_addr {\n    default "";\n'
      for entry in $spec; do
        [[ "$entry" =~ ^[a-z0-9-]{1,40}=[A-Za-z0-9.-]+:[0-9]+$ ]] ||
          die "MCP_CELL_ADDRESS: '$entry' is not name=host:port"
        printf '    %s %s;\n' "${entry%%=*}" "${entry#*=}"
      done
      printf '}\n'
    fi
  } >"$out.tmp" && mv "$out.tmp" "$out"
}

render_nginx() {
  local rt tls listen max_body cell cell_header=""
  rt="$(runtime_dir)"
  mkdir -p "$MCP_STATE_DIR/nginx" "$MCP_STATE_DIR/logs" "$rt"
  chmod 755 /run/mcp-sandbox "$rt"
  if [ "$MCP_TLS" = on ]; then
    listen="$MCP_HOST:$MCP_PORT ssl"
    tls="ssl_certificate $MCP_STATE_DIR/tls/server.pem; ssl_certificate_key $MCP_STATE_DIR/tls/server.key; ssl_protocols TLSv1.2 TLSv1.3;"
  else
    listen="$MCP_HOST:$MCP_PORT"
    tls=""
  fi
  # nginx refuses bodies over the server's own max_body (mcp.conf,
  # MCP_CONFIG or MCP_MAX_BODY, as the server reads them), so the two agree.
  max_body="$(config_value max_body)" || die "the configuration is not valid (above)"
  # A cell names itself in every answer (Mcp-Cell), so that a client or a
  # test sees who answered.
  cell="$(config_text cell)"
  [ -z "$cell" ] || cell_header="add_header Mcp-Cell $cell always;"
  render_token_map
  render_cells_map
  # MCP_LOGS=stdout: nginx logs to its standard error, which start_nginx
  # points at this script's output (a daemon nginx keeps standard error,
  # not standard output).
  sed -e "s|@STATE_DIR@|$MCP_STATE_DIR|g" -e "s|@RUNTIME_DIR@|$rt|g" -e "s|@LISTEN@|$listen|g" \
    -e "s|@TLS_CONFIG@|$tls|g" -e "s|@MAX_BODY@|$max_body|g" -e "s|@FCGI_SOCKET@|$rt/fcgi.sock|g" -e "s|@FCGI_OPS_SOCKET@|$rt/fcgi-ops.sock|g" \
    -e "s|@NGINX_USER@|${MCP_NGINX_USER:-www-data}|g" -e "s|@NGINX_DAEMON@|${MCP_NGINX_DAEMON:-on}|g" \
    -e "s|@METRICS_PORT@|$(metrics_port)|g" -e "s|@METRICS_HOST@|${MCP_METRICS_HOST:-127.0.0.1}|g" \
    -e "s|@CELL_HEADER@|$cell_header|g" -e "s|@CELL@|$cell|g" \
    -e "s|@ERROR_LOG@|$(log_dest "$MCP_STATE_DIR/logs/nginx-error.log" stderr)|g" \
    -e "s|@ACCESS_LOG@|$(log_dest "$MCP_STATE_DIR/logs/nginx-access.log" /dev/stderr)|g" \
    "$MCP_ROOT/nginx/nginx.conf.in" >"$MCP_STATE_DIR/nginx/nginx.conf"
  cp "$MCP_ROOT/nginx/mcp-fastcgi.conf" "$MCP_STATE_DIR/nginx/mcp-fastcgi.conf"
  nginx -t -q -c "$MCP_STATE_DIR/nginx/nginx.conf" || die "nginx rejected the generated configuration"
}

# ---- The filtering proxy of network by policy (README.md) ----
# Squid, from <state>/egress: its configuration (rendered from
# egress/squid.conf.in), its CA (TLS terminated for hosts with a
# credential) and certificate cache, the conns/ folder where the
# supervisors' relays register each connection for its policy helper, its
# pid and its logs (egress/logs: access.log, cache.log; squid.log holds
# what it prints at start).  It runs as Debian's `proxy` user.
SQUID_USER=proxy

# A setting as the server sees it, whole (config_value takes one word).
config_text() {
  MCP_STATE_DIR="$MCP_STATE_DIR" "$(install_dir)/bin/mcp-server" --print-config |
    sed -n "s/^$1 = //p"
}

ensure_egress_ca() {
  local d="$MCP_STATE_DIR/egress"
  install -d -m 750 -o root -g "$SQUID_USER" "$d"
  install -d -m 2770 -o root -g "$SQUID_USER" "$d/conns"
  if [ ! -s "$d/ca.pem" ] || [ ! -s "$d/ca.key" ]; then
    (
      umask 077
      openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=mcp-sandbox egress CA $(hostname)" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -keyout "$d/ca.key" -out "$d/ca.pem" >/dev/null 2>&1
    ) || die "openssl: the egress CA"
  fi
  chown "root:$SQUID_USER" "$d/ca.key" && chmod 640 "$d/ca.key" && chmod 644 "$d/ca.pem"
  # What a call trusts when the proxy terminates TLS for one of its hosts.
  cat /etc/ssl/certs/ca-certificates.crt "$d/ca.pem" >"$d/ca-bundle.pem.tmp" && chmod 644 "$d/ca-bundle.pem.tmp" &&
    mv "$d/ca-bundle.pem.tmp" "$d/ca-bundle.pem"
  if [ ! -d "$d/certs" ]; then
    /usr/lib/squid/security_file_certgen -c -s "$d/certs" -M 16MB >/dev/null || die "squid: certificate cache"
    chown -R "$SQUID_USER:$SQUID_USER" "$d/certs"
  fi
}

# One file per error page: the lines of egress/errors.txt, and a generic
# line for Squid's other pages.
render_squid_errors() {
  local d="$MCP_STATE_DIR/egress/errors" t name line
  rm -rf "$d" && mkdir -p "$d"
  for t in /usr/share/squid/errors/templates/ERR_*; do
    name="${t##*/}"
    printf 'egress failed: the proxy answered %s for %%H (%%E)\n' "$name" >"$d/$name"
  done
  while read -r name line; do
    case "$name" in '' | '#'*) continue ;; esac
    printf '%s\n' "$line" >"$d/$name"
  done <"$MCP_ROOT/egress/errors.txt"
  cp /usr/share/squid/errors/templates/error-details.txt "$d/" 2>/dev/null || true
  chmod -R a+rX "$d"
}

# egress_credentials (`host Header value` lines, root's only) -> the
# proxy's rules: terminate TLS for the host, add the header (HTTPS only).
render_squid_credentials() {
  local src="$1" out="$MCP_STATE_DIR/egress/credentials.conf" n=0 host header value dom
  (
    umask 027
    : >"$out.tmp"
    if [ -n "$src" ]; then
      [ -r "$src" ] || die "egress_credentials: cannot read $src"
      while read -r host header value; do
        case "$host" in '' | '#'*) continue ;; esac
        [[ "$host" =~ ^(\*\.)?[A-Za-z0-9._-]+$ ]] || die "egress_credentials: bad host '$host'"
        [[ "$header" =~ ^[A-Za-z0-9-]+:?$ ]] || die "egress_credentials: bad header name for $host"
        [ -n "$value" ] || die "egress_credentials: no value for $host"
        header="${header%:}"
        n=$((n + 1))
        dom="${host#\*}"
        value="${value//\\/\\\\}"
        value="${value//\"/\\\"}"
        value="${value//%/%%}"
        {
          printf 'acl egress_cred_%d dstdomain %s\nacl egress_cred_sni_%d ssl::server_name %s\n' "$n" "$dom" "$n" "$dom"
          printf 'request_header_access %s deny egress_cred_%d egress_https\n' "$header" "$n"
          printf 'request_header_add %s "%s" egress_cred_%d egress_https\n' "$header" "$value" "$n"
          printf 'ssl_bump bump step2 egress_cred_sni_%d egress_policy\n' "$n"
        } >>"$out.tmp"
      done <"$src"
    fi
  ) || exit 1
  chown "root:$SQUID_USER" "$out.tmp" && mv "$out.tmp" "$out"
}

render_squid() {
  local d="$MCP_STATE_DIR/egress" networks hosts upstream helper
  ensure_egress_ca
  networks="$(config_text egress_networks | tr ',' ' ')"
  hosts="$(config_text egress_hosts_file)"
  upstream="$(config_text egress_upstream_ca)"
  helper="$(install_dir)/libexec/mcp-sandbox/mcp-egress-helper"
  render_squid_errors
  render_squid_credentials "$(config_text egress_credentials)"
  [ -n "$networks" ] || networks='"/dev/null"'
  [ -z "$upstream" ] || upstream="tls_outgoing_options cafile=$upstream"
  # MCP_LOGS=stdout: the cache log on Squid's standard error (start_squid
  # points it at this script's output) and no access log: Squid opens that
  # as its own user, who may not open root's pipe (it exits then); the
  # supervisors' egress log has a line per connection.
  sed -e "s|@LISTEN@|127.0.0.1:$(egress_port)|g" -e "s|@EGRESS_DIR@|$d|g" -e "s|@STATE_DIR@|$MCP_STATE_DIR|g" \
    -e "s|@SQUID_USER@|$SQUID_USER|g" -e "s|@HOSTS_FILE@|${hosts:-/etc/hosts}|g" -e "s|@HELPER@|$helper|g" \
    -e "s|@NETWORKS@|$networks|g" -e "s|@UPSTREAM_CA@|$upstream|g" \
    -e "s|@ACCESS_LOG@|$(log_dest "stdio:$d/logs/access.log" none)|g" \
    -e "s|@CACHE_LOG@|$(log_dest "$d/logs/cache.log" /dev/stderr)|g" \
    "$MCP_ROOT/egress/squid.conf.in" >"$d/squid.conf.tmp"
  chown "root:$SQUID_USER" "$d/squid.conf.tmp" && chmod 640 "$d/squid.conf.tmp" && mv "$d/squid.conf.tmp" "$d/squid.conf"
  install -d -m 750 -o "$SQUID_USER" -g "$SQUID_USER" "$d/logs"
  squid -k parse -f "$d/squid.conf" >"$d/logs/parse.log" 2>&1 ||
    { tail -n 20 "$d/logs/parse.log" >&2; die "squid rejected the generated configuration"; }
}

start_squid() {
  local d="$MCP_STATE_DIR/egress" i
  pid_alive "$d/squid.run.pid" && die "squid for this state folder already runs; scripts/stop first"
  rm -f "$d/conns/"* "$d/squid.pid"
  # The guard (egress/guard.c) refuses connections to private addresses
  # that egress_networks does not list, whatever the name resolved to.
  # No token reaches it either (as start_server).
  logged "$d/logs/squid.log" env -u MCP_TOKENS LD_PRELOAD="$(install_dir)/libexec/mcp-sandbox/libmcpegressguard.so" \
    MCP_EGRESS_NETWORKS="$(config_text egress_networks)" setsid squid -N -f "$d/squid.conf" </dev/null &
  echo $! >"$d/squid.run.pid"
  note_pid "$d/squid.run.pid"
  for i in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$(egress_port)") 2>/dev/null && return 0
    pid_alive "$d/squid.run.pid" || die "squid exited; see $(log_hint "$d/logs/squid.log and cache.log")"
    sleep 0.1
  done
  die "squid did not listen on 127.0.0.1:$(egress_port); see $(log_hint "$d/logs/cache.log")"
}

stop_squid() {
  local d="$MCP_STATE_DIR/egress" f i helpers
  f="$d/squid.run.pid"
  stop_pid "$f" TERM 5
  # Squid's helpers (mcp-egress-helper, security_file_certgen, each given
  # a path below $d) read their end of a pipe and exit after Squid does,
  # not with it: wait for them too, so that the proxy is gone when this
  # returns (a leftover check that ran at once found them exiting).
  helpers="(mcp-egress-helper|security_file_certgen)\)? .*$d/"
  for i in $(seq 1 50); do pgrep -f "$helpers" >/dev/null || return 0; sleep 0.1; done
  pkill -KILL -f "$helpers" 2>/dev/null || true
}

# logrotate's configuration for this stack's logs (MCP_LOGS=files), written
# at each start.  Each writer goes on in a new file: told to open it again
# after the rename where it can, else the file is copied and truncated in
# place (the systemd unit's logs are rotated by the system's logrotate with
# systemd/mcp-sandbox.logrotate.in).
render_logrotate() {
  local l="$MCP_STATE_DIR/logs" e="$MCP_STATE_DIR/egress/logs"
  write_logrotate scripts/run <<CONF
# The responders reopen the audit log on the master's SIGHUP; the
# supervisors open the egress log for each line.
$l/audit.log $l/egress.log {
	sharedscripts
	postrotate
		kill -HUP "\$(cat '$MCP_STATE_DIR/mcp-server.pid')" 2>/dev/null || true
	endscript
}
# Files opened once in append mode: nginx's (on SIGUSR1 its workers,
# which run as another user, would open them again in this root-only
# folder, and cannot), and the standard error of the server and of Squid.
$l/nginx-access.log $l/nginx-error.log $l/mcp-server.log $e/squid.log {
	copytruncate
}
# Squid reopens its own on SIGUSR1 (logfile_rotate 0: it renames nothing).
$e/access.log $e/cache.log {
	sharedscripts
	postrotate
		kill -USR1 "\$(cat '$MCP_STATE_DIR/egress/squid.run.pid')" 2>/dev/null || true
	endscript
}
CONF
}

# The router's (scripts/router): its nginx's two logs, opened once in
# append mode by workers of another user (see above).
render_router_logrotate() {
  local l="$MCP_STATE_DIR/logs"
  write_logrotate scripts/router <<CONF
$l/router-access.log $l/router-error.log {
	copytruncate
}
CONF
}

# <state>/logrotate.conf: what is common to every log (MCP_LOG_ROTATE_SIZE,
# MCP_LOG_ROTATE_KEEP), then standard input; mode 0644 (logrotate ignores a
# configuration that others may write).  WHO: the script that writes it.
write_logrotate() { # write_logrotate WHO
  local f="$MCP_STATE_DIR/logrotate.conf"
  {
    cat <<CONF
# Written by $1 at each start (MCP_LOG_ROTATE_SIZE, MCP_LOG_ROTATE_KEEP):
# its logs, rotated by scripts/lib/rotate-logs while it runs.
# delaycompress: a writer may still append to the file just renamed until
# it has opened its new one.
size $MCP_LOG_ROTATE_SIZE
rotate $MCP_LOG_ROTATE_KEEP
compress
delaycompress
missingok
notifempty

CONF
    cat
  } >"$f.tmp"
  chmod 644 "$f.tmp" && mv -f "$f.tmp" "$f"
}

# The loop that rotates the logs while a process runs (scripts/lib/
# rotate-logs): `start_log_rotation RENDER PIDFILE`, RENDER writing
# <state>/logrotate.conf (render_logrotate, the server's PID file, for
# scripts/run; render_router_logrotate, nginx's, for scripts/router).  It
# runs beside them whether the script stays or detaches; stop_all and
# stop_log_rotation end it, and it ends itself once that process has.
# Nothing with MCP_LOGS=stdout (the container's log is rotated by whoever
# collects it) or MCP_LOG_ROTATE_SIZE=off.
start_log_rotation() {
  local pidf="$MCP_STATE_DIR/logrotate.pid"
  stop_log_rotation
  if logs_to_stdout || [ "$MCP_LOG_ROTATE_SIZE" = off ]; then
    rm -f "$MCP_STATE_DIR/logrotate.conf"
    return 0
  fi
  "$1"
  # (A session of its own, as the server's: a terminal that the script
  # leaves does not end it.)
  MCP_LOG_ROTATE_EVERY="$MCP_LOG_ROTATE_EVERY" setsid "$MCP_ROOT/scripts/lib/rotate-logs" \
    "$MCP_STATE_DIR/logrotate.conf" "$2" </dev/null >>"$MCP_STATE_DIR/logs/logrotate.log" 2>&1 &
  echo $! >"$pidf"
  note_pid "$pidf"
}

stop_log_rotation() { stop_pid "$MCP_STATE_DIR/logrotate.pid" TERM 2; }

# The server's side: where the sandboxes' traffic goes (unless set).
export_egress_proxy() { export MCP_EGRESS_PROXY="${MCP_EGRESS_PROXY:-127.0.0.1:$(egress_port)}"; }

endpoint_url() {
  local scheme=https
  [ "$MCP_TLS" = on ] || scheme=http
  printf '%s://%s:%s/mcp' "$scheme" "$MCP_HOST" "$MCP_PORT"
}

# A process's identity, which no step of the clock changes: the boot it runs
# in (the kernel's boot id, the same in every container of a host) and its
# start in clock ticks since that boot.  "PID BOOT_ID START"; fails when
# the process is gone.
proc_identity() {
  local start boot
  start="$(proc_start "$1")" && boot="$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)" || return 1
  printf '%s %s %s\n' "$1" "$boot" "$start"
}

# A process's start in clock ticks since boot (/proc/PID/stat's 22nd field,
# counted after the command's parenthesis, which may hold spaces).  A zombie
# (ended, not yet reaped by its parent: the 3rd field is Z) has none: it is
# not running.
proc_start() {
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  printf '%s' "${stat##*) }" | awk '$1 == "Z" { exit 1 } { print $20 }'
}

# Note beside a PID file (FILE.start) which process it names, by its
# identity, once FILE names one (nginx writes its own after it has forked:
# up to 5 s).  Best effort: without the note pid_alive goes by the times.
note_pid() {
  local f="$1" pid="" i
  for i in $(seq 1 50); do
    pid="$(cat "$f" 2>/dev/null)" && [[ "$pid" =~ ^[0-9]+$ ]] && break
    sleep 0.1
  done
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  if proc_identity "$pid" >"$f.start.tmp"; then mv -f "$f.start.tmp" "$f.start"; else rm -f "$f.start.tmp"; fi
}

# A PID file and its note go together.  A process that still runs (one that
# stop_pid could not stop) keeps them: scripts/stop again finds it.
forget_pid() { pid_alive "$1" || rm -f "$1" "$1.start"; }

# Stop the process a PID file names, if it runs: SIGNAL, then SIGKILL if
# it still runs SECONDS later, then up to 3 s for it to go (a process in
# the kernel's uninterruptible sleep, as in a hung mount, dies only when
# that returns), and forget the file.  One that outlives that is named, and
# its file stays.
stop_pid() { # stop_pid PIDFILE SIGNAL SECONDS
  if pid_alive "$1"; then
    kill "-$2" "$(cat "$1")" 2>/dev/null || true
    if ! pid_gone_within "$1" "$3"; then
      kill -KILL "$(cat "$1")" 2>/dev/null || true
      pid_gone_within "$1" 3 ||
        log "warning: pid $(cat "$1") ($1) still runs after SIGKILL; its PID file stays (scripts/stop again)"
    fi
  fi
  forget_pid "$1"
}

pid_gone_within() { # pid_gone_within PIDFILE SECONDS
  local i
  for i in $(seq 1 $(($2 * 10))); do pid_alive "$1" || return 0; sleep 0.1; done
  return 1
}

# Whether the process a PID file names runs.  A PID file of an earlier boot
# or an earlier container (a cell killed and started again keeps its state
# folder) names a PID that may be another process's now.  The note of
# note_pid says which process it was: only that one is its own.  Without a
# note (a PID file that something else wrote again), only a process that
# started before the file was written (2 s of slack) is: that compares the
# wall clock's times, which a step of the clock moves (a virtual machine
# resumed from a snapshot stepped it 4.5 s forward here, and every stack
# saw its live server as gone and stopped).
pid_alive() {
  local pid start btime mtime note
  [ -s "$1" ] && pid="$(cat "$1" 2>/dev/null)" && [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  if note="$(cat "$1.start" 2>/dev/null)" && [ "${note%% *}" = "$pid" ]; then
    # (return with its status: a bare return in a trap's handler, as
    # scripts/run's Ctrl-C, returns that of the command the signal ended.)
    [ "$(proc_identity "$pid")" = "$note" ]
    return $?
  fi
  start="$(proc_start "$pid")" || return 1
  btime="$(awk '$1 == "btime" {print $2}' /proc/stat)"
  mtime="$(stat -c %Y "$1" 2>/dev/null)" || return 1
  [ $((btime + start / $(getconf CLK_TCK))) -le $((mtime + 2)) ]
}

start_server() {
  local rt pidf="$MCP_STATE_DIR/mcp-server.pid"
  rt="$(runtime_dir)"
  pid_alive "$pidf" && die "mcp-server already runs (pid $(cat "$pidf")); scripts/stop first"
  ensure_socket_group
  # No token reaches the server's processes (nor nginx, below): MCP_TOKENS
  # was written to the tokens file, and children would inherit it.
  local log="$MCP_STATE_DIR/logs/mcp-server.log"
  logged "$log" env -u MCP_TOKENS MCP_STATE_DIR="$MCP_STATE_DIR" MCP_FCGI_SOCKET="$rt/fcgi.sock" \
    setsid "$(install_dir)/bin/mcp-server" </dev/null &
  echo $! >"$pidf"
  note_pid "$pidf"
  local i
  for i in $(seq 1 100); do
    [ -S "$rt/fcgi.sock" ] && return 0
    pid_alive "$pidf" || die "mcp-server exited; see $(log_hint "$log")"
    sleep 0.05
  done
  die "mcp-server did not open its socket; see $(log_hint "$log")"
}

start_nginx() {
  local rt
  rt="$(runtime_dir)"
  pid_alive "$rt/nginx.pid" && die "nginx for this state folder already runs; scripts/stop first"
  launch_nginx "$MCP_STATE_DIR/nginx/nginx.conf" "$rt/nginx.pid" "$MCP_STATE_DIR/logs/nginx-error.log"
}

# nginx with CONF, which writes its PID to PIDFILE (scripts/run's and the
# router's).  A stale file (a container killed before its stop) must not be
# what note_pid reads before nginx has written its own.
launch_nginx() { # launch_nginx CONF PIDFILE ERROR_LOG
  forget_pid "$2"
  env -u MCP_TOKENS nginx -c "$1" 2>&"$(log_dest 2 1)" || die "nginx did not start; see $(log_hint "$3")"
  note_pid "$2"
}

# Wait until an authenticated initialize answers 200.
wait_ready() {
  local url token i code
  url="$(endpoint_url)"
  token="$(first_token)"
  for i in $(seq 1 150); do
    # The header from standard input: a token in curl's arguments would show in ps.
    code="$(printf 'header = "Authorization: Bearer %s"\n' "$token" | env -u MCP_TOKENS curl -s -K - -o /dev/null \
      -w '%{http_code}' --max-time 5 --cacert "$MCP_STATE_DIR/tls/ca.pem" -H 'Content-Type: application/json' \
      -H 'Accept: application/json, text/event-stream' -X DELETE "$url" 2>/dev/null || true)"
    # DELETE without a session: 400 proves nginx, the token and a responder answer.
    [ "$code" = 400 ] && return 0
    sleep 0.1
  done
  die "the endpoint $url did not answer; see $(log_hint "$MCP_STATE_DIR/logs/")"
}

write_endpoint_env() {
  local f="$MCP_STATE_DIR/endpoint.env"
  (
  umask 077
  {
    echo "MCP_URL=$(endpoint_url)"
    echo "MCP_TOKEN=$(first_token)"
    echo "MCP_CA_FILE=$MCP_STATE_DIR/tls/ca.pem"
    echo "MCP_METRICS_URL=$(metrics_url)"
  } >"$f"
  )
}

# What scripts/run prints once the service runs: where everything is, the
# effective configuration and a client configuration, with a placeholder
# for the token (this goes to terminals and container logs; the token is in
# files only root reads).
print_summary() {
  local url
  url="$(endpoint_url)"
  cat <<MSG

mcp-sandbox is running.
  endpoint:     $url
  bearer token: the second field of a line of $MCP_STATE_DIR/tokens ("name token", root only), e.g.
                sudo awk '!/^#/ && NF>=2 {print \$2; exit}' $MCP_STATE_DIR/tokens
  CA file:      $MCP_STATE_DIR/tls/ca.pem (clients must trust it: NODE_EXTRA_CA_CERTS=...)
  metrics:      $(metrics_url) (loopback only)
  settings:     $MCP_STATE_DIR/endpoint.env (root only: it holds the token)
  logs:         $(log_dest "$MCP_STATE_DIR/logs/" 'this output (MCP_LOGS=stdout)')

Effective configuration:
$(env -u MCP_TOKENS MCP_STATE_DIR="$MCP_STATE_DIR" MCP_FCGI_SOCKET="$(runtime_dir)/fcgi.sock" \
    "$(install_dir)/bin/mcp-server" --print-config | sed 's/^/  /')

mcp-remote configuration (Claude Desktop, Claude Code, Gemini CLI, ...); replace <token> with the token:
{
  "mcpServers": {
    "python-sandbox": {
      "command": "npx",
      "args": ["-y", "mcp-remote", "$url", "--transport", "http-only",
               "--header", "Authorization:\${MCP_TOKEN}"],
      "env": {
        "MCP_TOKEN": "Bearer <token>",
        "NODE_EXTRA_CA_CERTS": "$MCP_STATE_DIR/tls/ca.pem"
      }
    }
  }
}
MSG
}

# The server first: on SIGTERM it drains (common/cell.h: new work refused,
# running calls end, for at most drain_timeout) while nginx still carries
# its answers; then nginx, Squid, and a router of the same state folder.
stop_all() {
  local rt pidf="$MCP_STATE_DIR/mcp-server.pid"
  rt="$(runtime_dir)"
  stop_log_rotation
  # The master stops its responders, the keeper and every supervisor,
  # which destroy their sandboxes; sessions stay on disk.  (The wait is
  # read from the configuration only when there is a server to stop.)
  if pid_alive "$pidf"; then
    stop_pid "$pidf" TERM "$(drain_wait_seconds)"
  fi
  forget_pid "$pidf"
  stop_pid "$rt/nginx.pid" QUIT 5
  stop_squid
  stop_pid "$(router_pid)" QUIT 10
  # The runtime folder (the socket, nginx's temporary files and its copy of
  # /healthz) goes with the stack; scripts/run makes it again.  What could
  # not be stopped keeps its PID file there.
  if ! pid_alive "$pidf" && ! pid_alive "$rt/nginx.pid" && ! pid_alive "$(router_pid)"; then
    rm -rf "$rt"
    rmdir /run/mcp-sandbox 2>/dev/null || true
  fi
}

# scripts/router's nginx (its runtime folder is the stack's of the same
# state folder).
router_pid() { printf '%s/router.pid' "$(runtime_dir)"; }

# The start of scripts/run and scripts/router.  refuse_running WHAT
# PIDFILE...: a folder whose stack (or router) runs is refused before
# anything is built or written over.
refuse_running() {
  local what="$1" f
  shift
  for f in "$@"; do
    pid_alive "$f" && die "$what already runs for $MCP_STATE_DIR (pid $(cat "$f")); scripts/stop first"
  done
  return 0
}

# From here until `trap - EXIT INT TERM`, a failure, Ctrl-C or SIGTERM
# stops what has started: no half-started stack is left running.
stop_all_on_failure() {
  trap '[ $? = 0 ] || { log "stopping what was started"; stop_all; }' EXIT
  trap 'echo; echo stopping...; exit 130' INT TERM
}

# How long stop_all waits for the server: its drain (drain_timeout, or
# timeout_max + 10) and the 20 s it gives its children to stop.
drain_wait_seconds() {
  local d t
  d="$(config_value drain_timeout 2>/dev/null)" || d=0
  t="$(config_value timeout_max 2>/dev/null)" || t=300
  [ "${d:-0}" -gt 0 ] 2>/dev/null || d=$((t + 10))
  printf '%s' $((d + 30))
}
