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
