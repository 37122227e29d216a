#!/usr/bin/env bash
# The log rotation of scripts/run and scripts/router (scripts/lib/common.sh:
# render_logrotate, render_router_logrotate, start_log_rotation,
# stop_log_rotation; scripts/lib/rotate-logs), as TAP, in a state folder of
# its own whose server, nginx and Squid are stand-ins that count the
# signals they get.  Against a stack's real writers:
# tests/integration/ops.test.mjs.
#
# make check runs it with MCP_TEST_SRCDIR set (tests/unit/local.am).
set -uo pipefail

srcdir="${MCP_TEST_SRCDIR:?run through make check}"
if ! command -v logrotate >/dev/null; then
  echo "1..0 # SKIP logrotate is not installed (scripts/run installs it)"
  exit 0
fi
tmp="$(mktemp -d)"
stand_ins=()
cleanup() {
  stop_log_rotation 2>/dev/null
  [ "${#stand_ins[@]}" = 0 ] || kill "${stand_ins[@]}" 2>/dev/null
  rm -rf "$tmp" "${rt:-/nonexistent}"
}
trap cleanup EXIT

# shellcheck source=tap.sh
. "$(dirname "${BASH_SOURCE[0]}")/tap.sh"
MCP_STATE_DIR="$tmp/state"
MCP_LOGS=files
MCP_LOG_ROTATE_SIZE=1k
MCP_LOG_ROTATE_KEEP=2
MCP_LOG_ROTATE_EVERY=1
# shellcheck source=../../scripts/lib/common.sh
. "$srcdir/scripts/lib/common.sh"
l="$MCP_STATE_DIR/logs"
e="$MCP_STATE_DIR/egress/logs"
rt="$(runtime_dir)"
mkdir -p "$l" "$rt"
proxy=no
if id "$SQUID_USER" >/dev/null 2>&1; then
  proxy=yes
  install -d -m 750 -o "$SQUID_USER" -g "$SQUID_USER" "$e"
fi

# A stand-in that writes a line to FILE for every SIGNAL it gets; its PID
# goes to PIDFILE, with the note scripts/run writes.  SIGNAL's handling is
# reset first: bash cannot trap a signal ignored when it started, and a
# suite started under nohup ignores SIGHUP (the server sets its own
# handler whatever it inherits).
stand_in() { # stand_in PIDFILE SIGNAL FILE
  env --default-signal="$2" bash -c "trap 'echo got >>$3' $2; while :; do sleep 0.1; done" &
  stand_ins+=($!)
  echo $! >"$1"
  note_pid "$1"
}
count() { [ -f "$1" ] && grep -c . "$1" || echo 0; }
# What a failed check saw: the signals counted, the logs, logrotate's state.
marks() {
  echo "# $(count "$tmp/server.marks") SIGHUP to the server, $(count "$tmp/nginx.marks") SIGUSR1 to nginx; the loop $(pid_alive "$MCP_STATE_DIR/logrotate.pid" && echo runs || echo is gone)"
  ls -l --time-style=+%T.%N "$l" | sed 's/^/# /'
  sed 's/^/# loop: /' "$l/logrotate.log" 2>/dev/null
  sed 's/^/# /' "$MCP_STATE_DIR/logrotate.status" 2>/dev/null
}
stand_in "$MCP_STATE_DIR/mcp-server.pid" HUP "$tmp/server.marks"
server=$!
stand_in "$rt/nginx.pid" USR1 "$tmp/nginx.marks"
[ "$proxy" = no ] || stand_in "$MCP_STATE_DIR/egress/squid.run.pid" USR1 "$tmp/squid.marks"

big() { head -c 2048 /dev/zero | tr '\0' x >"$1"; echo >>"$1"; }
for f in audit.log nginx-access.log mcp-server.log; do big "$l/$f"; done
echo small >"$l/nginx-error.log"
if [ "$proxy" = yes ]; then
  big "$e/access.log"
  chown "$SQUID_USER:$SQUID_USER" "$e/access.log"
fi
cp "$l/mcp-server.log" "$tmp/server-log"

# ---- settings ----
for bad in "MCP_LOG_ROTATE_SIZE=10x" "MCP_LOG_ROTATE_SIZE=0" "MCP_LOG_ROTATE_KEEP=0" "MCP_LOG_ROTATE_EVERY=" \
  "MCP_LOG_ROTATE_EVERY=1.5"; do
  (eval "$bad"; check_logs_setting) 2>"$tmp/err"
  [ $? != 0 ] && grep -q "${bad%%=*} must be" "$tmp/err"
  ok $? "$bad is refused, with what it must be"
done
(check_logs_setting) && (MCP_LOG_ROTATE_SIZE=off; check_logs_setting) && (MCP_LOG_ROTATE_SIZE=1G; check_logs_setting)
ok $? "1k, off and 1G are sizes"

# ---- the configuration ----
render_logrotate
conf="$MCP_STATE_DIR/logrotate.conf"
logrotate_reads "$conf" "$tmp/debug" "logrotate reads the rendered configuration without an error"
[ "$(stat -c %a "$conf")" = 644 ]
ok $? "it is mode 0644 (logrotate ignores one others may write)"
missing=""
for f in "$l"/{audit,egress,nginx-access,nginx-error,mcp-server}.log "$e"/{access,cache,squid}.log; do
  grep -qxF "considering log $f" "$tmp/debug" || missing="$missing $f"
done
[ -z "$missing" ]
ok $? "it covers every log of the stack${missing:+ (not:$missing)}"

# ---- the loop ----
start_log_rotation render_logrotate "$MCP_STATE_DIR/mcp-server.pid"
loop="$(cat "$MCP_STATE_DIR/logrotate.pid")"
pid_alive "$MCP_STATE_DIR/logrotate.pid" && pgrep -f "rotate-logs $conf" | grep -qx "$loop"
ok $? "start_log_rotation starts the loop, its pid noted, the state folder in its command line"
for i in $(seq 1 50); do
  [ -f "$l/mcp-server.log.1" ] && [ "$(count "$tmp/server.marks")" -ge 1 ] && break
  sleep 0.1
done
[ -f "$l/audit.log.1" ] && [ -f "$l/nginx-access.log.1" ] && [ -f "$l/mcp-server.log.1" ]
ok $? "within a few seconds the logs past MCP_LOG_ROTATE_SIZE are rotated"
[ "$(count "$tmp/server.marks")" = 1 ] && [ "$(count "$tmp/nginx.marks")" = 0 ]
st=$?
ok "$st" "the server got one SIGHUP, nginx nothing (its workers could not open files in this folder)"
[ "$st" = 0 ] || marks
[ ! -e "$l/nginx-error.log.1" ] && [ "$(cat "$l/nginx-error.log")" = small ]
ok $? "a small log stays as it is"
cmp -s "$l/mcp-server.log.1" "$tmp/server-log" && [ -f "$l/mcp-server.log" ] && [ ! -s "$l/mcp-server.log" ] &&
  [ -f "$l/nginx-access.log" ] && [ ! -s "$l/nginx-access.log" ]
ok $? "the server's standard error and nginx's access log are copied to .1 and truncated in place"
if [ "$proxy" = yes ]; then
  # (Squid's block comes last in the run whose first block's SIGHUP ended
  # the wait above, and a stand-in counts a signal after its sleep.)
  for i in $(seq 1 50); do
    [ -f "$e/access.log.1" ] && [ "$(count "$tmp/squid.marks")" -ge 1 ] && break
    sleep 0.1
  done
  [ -f "$e/access.log.1" ] && [ "$(count "$tmp/squid.marks")" = 1 ]
  ok $? "Squid's access log (in its user's folder) is rotated, and Squid gets one SIGUSR1"
else
  ok 0 "# SKIP no $SQUID_USER user"
fi

# The next looks: only what grew again, and at most MCP_LOG_ROTATE_KEEP copies.
for round in 1 2 3; do
  big "$l/audit.log"
  for i in $(seq 1 40); do [ "$(count "$tmp/server.marks")" -gt "$round" ] && break; sleep 0.1; done
done
[ "$(count "$tmp/server.marks")" = 4 ] && [ ! -e "$l/nginx-access.log.2.gz" ]
st=$?
ok "$st" "each time the audit log grows past the size, one more rotation and SIGHUP; nginx's logs were not touched"
[ "$st" = 0 ] || marks
[ -f "$l/audit.log.1" ] && [ -f "$l/audit.log.2.gz" ] && [ ! -e "$l/audit.log.3.gz" ]
ok $? "two copies kept (MCP_LOG_ROTATE_KEEP), the older compressed"

# The server gone: the loop ends by itself at its next look.
kill "$server"
for i in $(seq 1 30); do pid_alive "$MCP_STATE_DIR/logrotate.pid" || break; sleep 0.1; done
! pid_alive "$MCP_STATE_DIR/logrotate.pid"
ok $? "the loop ends once the server is gone"

# stop_log_rotation ends it at once, and leaves nothing (its sleep neither).
stand_in "$MCP_STATE_DIR/mcp-server.pid" HUP "$tmp/server.marks"
start_log_rotation render_logrotate "$MCP_STATE_DIR/mcp-server.pid"
loop="$(cat "$MCP_STATE_DIR/logrotate.pid")"
sleep 0.3
sleeper="$(pgrep -P "$loop")"
stop_log_rotation
sleep 0.2
[ -n "$sleeper" ] && ! kill -0 "$loop" 2>/dev/null && ! kill -0 "$sleeper" 2>/dev/null &&
  [ ! -e "$MCP_STATE_DIR/logrotate.pid" ]
ok $? "stop_log_rotation ends the loop and its sleep, and removes its pid file"

# ---- the router's: its nginx's two logs, while that nginx runs ----
stand_in "$tmp/router.pid" USR1 "$tmp/router.marks"
router=$!
big "$l/router-access.log"
echo small >"$l/router-error.log"
cp "$l/router-access.log" "$tmp/router-log"
start_log_rotation render_router_logrotate "$tmp/router.pid"
logrotate_reads "$conf" "$tmp/debug" "logrotate reads the router's configuration without an error"
grep -qxF "considering log $l/router-access.log" "$tmp/debug" && grep -qxF "considering log $l/router-error.log" "$tmp/debug" &&
  [ "$(grep -c '^considering log' "$tmp/debug")" = 2 ]
ok $? "the router's configuration names its two logs, and nothing else"
for i in $(seq 1 30); do [ -f "$l/router-access.log.1" ] && break; sleep 0.1; done
cmp -s "$l/router-access.log.1" "$tmp/router-log" && [ ! -s "$l/router-access.log" ] && [ ! -e "$l/router-error.log.1" ] &&
  [ "$(count "$tmp/router.marks")" = 0 ]
ok $? "its access log is copied to .1 and truncated in place, the small error log stays"
kill "$router"
for i in $(seq 1 30); do pid_alive "$MCP_STATE_DIR/logrotate.pid" || break; sleep 0.1; done
! pid_alive "$MCP_STATE_DIR/logrotate.pid"
ok $? "the loop ends once the router's nginx is gone"

# ---- scripts/stop stops a router of the state folder (stop_all) ----
# (A detached router had no stop: scripts/stop removed its runtime folder,
# and with it its PID file, and left it running.)  Its nginx stops on
# SIGQUIT; perl, since a background job's shell has SIGQUIT ignored.
kill "$(cat "$rt/nginx.pid")"
perl -e '$SIG{QUIT} = sub { exit 0 }; sleep 1 while 1' &
router=$!
stand_ins+=("$router")
echo "$router" >"$(router_pid)"
note_pid "$(router_pid)"
start_log_rotation render_router_logrotate "$(router_pid)"
loop="$(cat "$MCP_STATE_DIR/logrotate.pid")"
stop_all >/dev/null 2>&1
for i in $(seq 1 30); do kill -0 "$router" 2>/dev/null || break; sleep 0.1; done
! kill -0 "$router" 2>/dev/null && ! kill -0 "$loop" 2>/dev/null && [ ! -e "$rt" ]
ok $? "stop_all (scripts/stop) stops the router's nginx and its loop, and removes the runtime folder"

MCP_LOG_ROTATE_SIZE=off
start_log_rotation render_logrotate "$MCP_STATE_DIR/mcp-server.pid"
[ ! -e "$MCP_STATE_DIR/logrotate.pid" ] && [ ! -e "$conf" ]
ok $? "MCP_LOG_ROTATE_SIZE=off: no loop and no configuration"
MCP_LOG_ROTATE_SIZE=1k MCP_LOGS=stdout
start_log_rotation render_logrotate "$MCP_STATE_DIR/mcp-server.pid"
[ ! -e "$MCP_STATE_DIR/logrotate.pid" ]
ok $? "MCP_LOGS=stdout: no loop"

echo "1..$n"
[ "$failed" = 0 ]
