# TAP for the unit tests written in bash (test-tokens.sh, test-guard.sh):
# source it, call ok STATUS DESCRIPTION or check DESCRIPTION COMMAND...,
# end with [ "$failed" = 0 ].
n=0
failed=0
ok() { # ok STATUS DESCRIPTION: STATUS 0 passes
  n=$((n + 1))
  if [ "$1" = 0 ]; then
    echo "ok $n - $2"
  else
    echo "not ok $n - $2"
    failed=$((failed + 1))
  fi
}
check() { # check DESCRIPTION COMMAND...: passes when COMMAND succeeds
  local d="$1"
  shift
  "$@" >/dev/null 2>&1
  ok $? "$d"
}
# logrotate_reads CONF OUT DESCRIPTION: passes when logrotate's debug run
# (-d, which rotates nothing) reads CONF without an error; its output stays
# in OUT (and is shown when it fails).  test-logrotate.sh, test-rotate-logs.sh.
logrotate_reads() {
  logrotate -d -s "$2.state" "$1" >"$2" 2>&1 && ! grep -qi '^error' "$2"
  local st=$?
  ok "$st" "$3"
  [ "$st" = 0 ] || sed 's/^/# /' "$2"
}
