#!/usr/bin/env bash
# The scripts' PID files (scripts/lib/common.sh: note_pid, pid_alive,
# stop_pid, forget_pid), as TAP.  scripts/run, scripts/router and
# scripts/stop ask pid_alive whether the server, nginx and Squid run; a "no"
# ends a running stack (scripts/run stops everything and exits, and with it
# a cell's container).  A PID file that outlived its process (an earlier
# container, an earlier boot) must not be believed, and a live process must
# not be taken for gone when the wall clock steps: a step moves the kernel's
# boot time (/proc/stat btime) against the files' times, as a PID file's
# time moved into the past does here.
#
# make check runs it with MCP_TEST_SRCDIR set (tests/unit/local.am).
set -uo pipefail

srcdir="${MCP_TEST_SRCDIR:?run through make check}"
tmp="$(mktemp -d)"
sleep 60 &
live=$!
trap 'kill "$live" 2>/dev/null; rm -rf "$tmp"' EXIT

# shellcheck source=tap.sh
. "$(dirname "${BASH_SOURCE[0]}")/tap.sh"
# shellcheck source=../../scripts/lib/common.sh
. "$srcdir/scripts/lib/common.sh"

f="$tmp/server.pid"
echo "$live" >"$f"
note_pid "$f"
read -r npid nboot nstart <"$f.start"
[ "$npid" = "$live" ] && [ "$nboot" = "$(cat /proc/sys/kernel/random/boot_id)" ] && [[ "$nstart" =~ ^[0-9]+$ ]]
ok $? "note_pid notes the process: its pid, the boot id, its start in clock ticks"
check "a live process with its note runs" pid_alive "$f"

# The clock stepped forward by an hour since the file was written: the
# file now seems older than the process.
touch -d '-1 hour' "$f"
check "its note holds when the file's time says it was written before the process started (a clock step)" \
  pid_alive "$f"
mv "$f.start" "$tmp/note"
! pid_alive "$f"
ok $? "without the note the times decide, and such a file is not believed"
mv "$tmp/note" "$f.start"

# The same PID, another process: a container started again, a new boot.
printf '%s %s %s\n' "$live" "$nboot" "$((nstart + 1))" >"$f.start"
! pid_alive "$f"
ok $? "a note of another start of that PID (an earlier container's process): not this one"
printf '%s %s %s\n' "$live" "00000000-0000-0000-0000-000000000000" "$nstart" >"$f.start"
! pid_alive "$f"
ok $? "a note of another boot: not this one"

# Something else wrote the PID file again (a test restarting Squid): the
# note names another PID and the times decide.
echo 1 >"$f.start"
touch "$f"
check "a note of another PID: the times decide, and a file written after the process started holds" pid_alive "$f"

# scripts/run and scripts/router stop in a trap's handler (Ctrl-C, SIGTERM).
# A signal sent to their process group ends the command they wait in, and
# inside the handler a bare `return` gives that command's status: pid_alive
# took the live server and nginx for gone, and the stop left them running.
note_pid "$f"
alive_in_trap="$(bash -c '. "$1/scripts/lib/common.sh"
  trap '\''pid_alive "$2" && echo alive || echo gone; exit 0'\'' USR1
  (kill -USR1 $$; exit 143)
  echo "no trap"' _ "$srcdir" "$f")"
[ "$alive_in_trap" = alive ]
ok $? "in a trap's handler, after the signal ended a command, a live process still runs (got: $alive_in_trap)"

sleep 0.2 &
gone=$!
wait "$gone"
echo "$gone" >"$tmp/gone.pid"
note_pid "$tmp/gone.pid"
! pid_alive "$tmp/gone.pid" && [ ! -e "$tmp/gone.pid.start" ]
ok $? "a process that has ended: not running, and no note"

: >"$tmp/empty.pid"
t0=$SECONDS
note_pid "$tmp/empty.pid" && [ ! -e "$tmp/empty.pid.start" ] && [ $((SECONDS - t0)) -le 7 ]
ok $? "a PID file that names no process within 5 s: note_pid gives up without a note or an error"
! pid_alive "$tmp/empty.pid" && ! pid_alive "$tmp/none.pid"
ok $? "an empty or missing PID file: not running"

# A zombie (ended, its parent has not reaped it) holds nothing: not running.
# shellcheck disable=SC2016 # perl's code
perl -e 'my $c = fork(); if ($c == 0) { exit 0 } print "$c\n"; close STDOUT; sleep 60' >"$tmp/zombie.pid" &
zparent=$!
for i in $(seq 1 50); do
  [ -s "$tmp/zombie.pid" ] && grep -q 'State:.*Z' "/proc/$(cat "$tmp/zombie.pid")/status" 2>/dev/null && break
  sleep 0.1
done
grep -q 'State:.*Z' "/proc/$(cat "$tmp/zombie.pid")/status" && ! pid_alive "$tmp/zombie.pid"
ok $? "an ended process that its parent has not reaped (a zombie): not running"
kill "$zparent"

# stop_pid: SIGNAL, then SIGKILL for a process that ignores it; the file
# and its note are forgotten once it has gone.
perl -e '$SIG{TERM} = "IGNORE"; sleep 60' &
deaf=$!
echo "$deaf" >"$tmp/deaf.pid"
note_pid "$tmp/deaf.pid"
stop_pid "$tmp/deaf.pid" TERM 1 2>"$tmp/stop.err"
forget_pid "$tmp/deaf.pid"
wait "$deaf" # (reaped: the test is its parent)
! kill -0 "$deaf" 2>/dev/null && [ ! -e "$tmp/deaf.pid" ] && [ ! -e "$tmp/deaf.pid.start" ] && ! grep -q "still runs" "$tmp/stop.err"
ok $? "stop_pid kills a process that ignores its signal, and forget_pid then removes its file and note"

# One that outlives SIGKILL too (in the kernel's uninterruptible sleep: here
# a kill that delivers nothing) is named, and its file stays.
sleep 60 &
stuck=$!
echo "$stuck" >"$tmp/stuck.pid"
note_pid "$tmp/stuck.pid"
(
  kill() { [ "$1" = -0 ] && builtin kill "$@"; }
  stop_pid "$tmp/stuck.pid" TERM 1 2>"$tmp/stop.err"
  forget_pid "$tmp/stuck.pid"
)
[ -e "$tmp/stuck.pid" ] && [ -e "$tmp/stuck.pid.start" ] && grep -q "pid $stuck .*still runs after SIGKILL" "$tmp/stop.err"
ok $? "a process that outlives SIGKILL is named, and its PID file and note stay (got: $(cat "$tmp/stop.err"))"
builtin kill "$stuck"

[ "$failed" = 0 ] || echo "# $failed of $n failed"
echo "1..$n"
[ "$failed" = 0 ]
