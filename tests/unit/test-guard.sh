#!/usr/bin/env bash
# The connect guard preloaded into Squid (egress/guard.c), as TAP: in a
# Python process that preloads it, connect() to loopback, private and
# metadata addresses fails with EACCES unless MCP_EGRESS_NETWORKS lists
# them; a listed network is reached (here: refused by nobody listening,
# which is not EACCES); the library leaves LD_PRELOAD for the children
# (a helper built with AddressSanitizer will not start behind it) and keeps
# the other entries. No packet leaves the machine: every address tried is
# loopback, or one the guard refuses before the kernel sends anything.
#
# make check runs it with MCP_TEST_BUILDDIR set (tests/unit/local.am).
set -uo pipefail

builddir="${MCP_TEST_BUILDDIR:?run through make check}"
guard="$builddir/libmcpegressguard.so"
py=/usr/bin/python3

# shellcheck source=tap.sh
. "$(dirname "${BASH_SOURCE[0]}")/tap.sh"
# connect_errno NETWORKS ADDRESS PORT: the errno name connect() ended with
# in a process preloading the guard ("OK" when it connected).
connect_errno() {
  MCP_EGRESS_NETWORKS="$1" LD_PRELOAD="$guard" "$py" -S -c '
import errno, socket, sys
fam = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
s = socket.socket(fam, socket.SOCK_STREAM)
s.settimeout(2)
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
' "$2" "$3" 2>/dev/null
}

# A listener on loopback outside the preloaded process, so that a refusal
# is the guard's and not the kernel's.
port_file="$(mktemp)"
"$py" -S -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
open(sys.argv[1], "w").write(str(s.getsockname()[1])); time.sleep(60)
' "$port_file" &
listener=$!
trap 'kill $listener 2>/dev/null; rm -f "$port_file"' EXIT
for _ in $(seq 1 50); do [ -s "$port_file" ] && break; sleep 0.1; done
port="$(cat "$port_file")"

echo "1..9"
[ -n "$port" ] && [ "$(MCP_EGRESS_NETWORKS= "$py" -S -c '
import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 2); print("OK")' "$port")" = OK ]
ok $? "without the guard, the loopback listener is reached"
[ "$(connect_errno "" 127.0.0.1 "$port")" = EACCES ]
ok $? "loopback is refused with EACCES"
[ "$(connect_errno 10.0.0.0/8 127.0.0.1 "$port")" = EACCES ]
ok $? "loopback stays refused when another network is listed"
[ "$(connect_errno 127.0.0.1/32 127.0.0.1 "$port")" = OK ]
ok $? "a listed network is reached"
[ "$(connect_errno "" 169.254.169.254 80)" = EACCES ]
ok $? "the cloud metadata address is refused"
[ "$(connect_errno "" 192.168.1.1 80)" = EACCES ]
ok $? "a private network is refused"
[ "$(connect_errno "" ::ffff:127.0.0.1 "$port")" = EACCES ]
ok $? "loopback as an IPv4-mapped IPv6 address is refused"
[ "$(MCP_EGRESS_NETWORKS= LD_PRELOAD="$guard" "$py" -S -c 'import os; print(os.environ.get("LD_PRELOAD", "unset"))')" = unset ]
ok $? "the guard leaves LD_PRELOAD for the children"
libc="$(ldd /bin/true | awk '/libc\.so/ { print $3 }')"
[ "$(MCP_EGRESS_NETWORKS= LD_PRELOAD="$libc:$guard" "$py" -S -c 'import os; print(os.environ.get("LD_PRELOAD", "unset"))')" = "$libc" ]
ok $? "the other entries of LD_PRELOAD stay"
[ "$failed" = 0 ]
