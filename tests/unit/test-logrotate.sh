#!/usr/bin/env bash
# The logs' rotation on bare metal (systemd/mcp-sandbox.logrotate.in, built
# as systemd/logrotate.d/mcp-sandbox and installed in /etc/logrotate.d), as
# TAP: logrotate reads it without complaint; it names the audit and egress
# logs in the state folder the systemd unit gives the service, and signals
# the unit's main process (the master, whose SIGHUP makes the responders
# reopen the audit log: tests/integration/ops.test.mjs); and a copy of it
# whose paths lead to a temporary folder, and whose signal is replaced by a
# mark, rotates: the lines move to audit.log.1, a new private audit.log is
# made, the file before is compressed one rotation later, 12 are kept.
#
# make check runs it with MCP_TEST_BUILDDIR set (tests/unit/local.am).
set -uo pipefail

builddir="${MCP_TEST_BUILDDIR:?run through make check}"
conf="$builddir/systemd/logrotate.d/mcp-sandbox"
unit="$builddir/systemd/mcp-sandbox.service"
if ! command -v logrotate >/dev/null; then
  echo "1..0 # SKIP logrotate is not installed (scripts/test installs it)"
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=tap.sh
. "$(dirname "${BASH_SOURCE[0]}")/tap.sh"

# ---- the installed file as built ----
logrotate_reads "$conf" "$tmp/debug" "logrotate reads the built file without an error"
[ "$(stat -c %a "$conf")" = 644 ]
ok $? "the built file is mode 0644 (logrotate ignores one others may write)"

state="$(sed -n 's/^Environment=MCP_STATE_DIR=//p' "$unit")"
[ -n "$state" ]
ok $? "the unit names the service's state folder ($state)"
grep -qxF "considering log $state/logs/audit.log" "$tmp/debug"
ok $? "it rotates the audit log the service writes there"
grep -qxF "considering log $state/logs/egress.log" "$tmp/debug"
ok $? "and the egress log"
hup="systemctl kill --kill-whom=main --signal=HUP mcp-sandbox.service"
[ "$(sed -n '/postrotate/,/endscript/p' "$conf" | grep -c "$hup")" = 1 ] &&
  grep -q '^ExecReload=/bin/kill -HUP \$MAINPID' "$unit"
ok $? "after a rotation it sends SIGHUP to the unit's main process, as the unit's own reload does"

# ---- a copy in a temporary folder ----
mkdir "$tmp/logs"
sed -e "s|$state/logs/|$tmp/logs/|g" -e "s|$hup.*|echo rotated >>$tmp/marks|" "$conf" >"$tmp/conf"
chmod 644 "$tmp/conf"
! grep -v '^#' "$tmp/conf" | grep -q "$state\|systemctl"
ok $? "the copy leads to the temporary folder only"
rotate() { logrotate -f -s "$tmp/state" "$tmp/conf" 2>"$tmp/err"; }
marks() { [ -f "$tmp/marks" ] && grep -c . "$tmp/marks" || echo 0; }

printf '{"n":1}\n{"n":2}\n{"n":3}\n' >"$tmp/logs/audit.log"
chmod 600 "$tmp/logs/audit.log"
rotate
ok $? "a rotation with no egress log runs (missingok)"
cmp -s "$tmp/logs/audit.log.1" <(printf '{"n":1}\n{"n":2}\n{"n":3}\n')
ok $? "the lines are in audit.log.1"
[ -f "$tmp/logs/audit.log" ] && [ ! -s "$tmp/logs/audit.log" ] && [ "$(stat -c %a "$tmp/logs/audit.log")" = 600 ]
ok $? "a new empty audit.log, mode 0600"
[ "$(marks)" = 1 ]
ok $? "the service is signalled once"

printf '{"n":4}\n' >>"$tmp/logs/audit.log"
printf '{"egress":1}\n' >"$tmp/logs/egress.log"
rotate
ok $? "a second rotation runs"
[ -f "$tmp/logs/audit.log.2.gz" ] && cmp -s <(gzip -dc "$tmp/logs/audit.log.2.gz") <(printf '{"n":1}\n{"n":2}\n{"n":3}\n')
ok $? "the first lines are compressed now, in audit.log.2.gz"
cmp -s "$tmp/logs/audit.log.1" <(printf '{"n":4}\n') && [ -f "$tmp/logs/egress.log.1" ]
ok $? "the newer ones wait uncompressed in audit.log.1 (the responders may write there until the signal), egress.log.1 too"
[ "$(marks)" = 2 ]
ok $? "once a rotation for both logs (sharedscripts)"

rotate
[ "$(marks)" = 2 ] && [ ! -f "$tmp/logs/audit.log.3.gz" ]
ok $? "empty logs are not rotated (notifempty)"

for i in $(seq 1 14); do
  printf '{"n":%d}\n' "$((i + 10))" >>"$tmp/logs/audit.log"
  rotate || break
done
kept="$(find "$tmp/logs" -name 'audit.log.*' | wc -l)"
[ "$kept" = 12 ] && [ -f "$tmp/logs/audit.log.12.gz" ]
ok $? "12 rotated audit logs are kept ($kept)"
[ -s "$tmp/err" ] && sed 's/^/# /' "$tmp/err"

echo "1..$n"
[ "$failed" = 0 ]
