#!/usr/bin/env bash
# The bearer tokens outside the C code, as TAP: the renderer
# (systemd/mcp-sandbox-tokens, which scripts/run and the systemd unit run)
# turns "name token [option=value ...]" lines into nginx's map, whose
# entries must compare the token exactly, and a policy file without tokens;
# scripts/lib/common.sh names the unnamed tokens of MCP_TOKENS and prints
# the client configuration without a token.
#
# make check runs it with MCP_TEST_BUILDDIR and MCP_TEST_SRCDIR set
# (tests/unit/local.am).
set -uo pipefail

builddir="${MCP_TEST_BUILDDIR:?run through make check}"
srcdir="${MCP_TEST_SRCDIR:?run through make check}"
render="$builddir/systemd/mcp-sandbox-tokens"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# The renderer reloads nginx only with --reload-nginx and a pid file; the
# tests must never signal a system nginx.
export MCP_NGINX_PID="$tmp/no-nginx.pid"

# shellcheck source=tap.sh
. "$(dirname "${BASH_SOURCE[0]}")/tap.sh"
refuses() { # refuses DESCRIPTION PATTERN: the last render failed with PATTERN in its message
  local d="$1" pat="$2"
  [ "$status" != 0 ] && grep -q -- "$pat" "$tmp/err"
  ok $? "$d"
  [ "$status" != 0 ] && grep -q -- "$pat" "$tmp/err" || sed 's/^/# /' "$tmp/err"
}
run_render() { # tokens text -> $tmp/map, $tmp/policy; $status, $tmp/err
  printf '%s' "$1" >"$tmp/tokens"
  rm -f "$tmp/map" "$tmp/policy"
  "$render" "$tmp/tokens" "$tmp/map" "$tmp/policy" "${@:2}" 2>"$tmp/err"
  status=$?
}

tok_a="$(printf 'a%.0s' {1..8})0123456789abcdef0123456789abcdef"
tok_b="Zy09_-Zy09_-Zy09_-Zy09_-"
tok_c="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"

# ---- the map ----
run_render "# name token [option=value ...]
alice $tok_a
bob   $tok_b max_sessions=4 max_concurrent=2

"
ok "$status" "a tokens file with options renders"
[ -f "$tmp/map" ] && [ "$(stat -c %a "$tmp/map")" = 600 ]
ok $? "the map is mode 0600 (it holds the tokens)"
! grep -q '~\*' "$tmp/map"
ok $? "no case-insensitive entry (~*) in the map"
[ "$(grep -c . "$tmp/map")" = 2 ] && grep -q '"alice";$' "$tmp/map" && grep -q '"bob";$' "$tmp/map"
ok $? "one entry per token, with its name"

# The entries are regexes (nginx's string keys would ignore case): try
# them as bash's EREs, which read this subset the same way as PCRE.
matches() { # matches HEADER: the name the map gives HEADER, or nothing
  local line re name
  while IFS= read -r line; do
    re="$(sed -E 's/^ *"~(.*)" "[^"]*";$/\1/' <<<"$line")"
    name="$(sed -E 's/^.*" "([^"]*)";$/\1/' <<<"$line")"
    if [[ "$1" =~ $re ]]; then
      printf '%s' "$name"
      return
    fi
  done <"$tmp/map"
}
flip() { tr 'a-zA-Z' 'A-Za-z' <<<"$1"; }
[ "$(matches "Bearer $tok_a")" = alice ] && [ "$(matches "Bearer $tok_b")" = bob ]
ok $? "Bearer <token> gives the token's name"
[ "$(matches "bearer $tok_a")" = alice ] && [ "$(matches "BEARER  $tok_b")" = bob ]
ok $? "the scheme is case-insensitive (RFC 9110), more than one space is fine"
[ -z "$(matches "Bearer $(flip "$tok_a")")" ] && [ -z "$(matches "Bearer $(flip "$tok_b")")" ]
ok $? "a token with its case flipped matches nothing"
[ -z "$(matches "Bearer ${tok_a}x")" ] && [ -z "$(matches "Bearer x$tok_a")" ] &&
  [ -z "$(matches "Bearer ${tok_a:0:39}")" ] && [ -z "$(matches "Basic $tok_a")" ] && [ -z "$(matches "$tok_a")" ]
ok $? "a longer, shorter or prefixed token, another scheme or no scheme match nothing"

# ---- the policy file ----
[ -f "$tmp/policy" ] && [ "$(stat -c %a "$tmp/policy")" = 644 ]
ok $? "the policy file is written, mode 0644"
[ "$(cat "$tmp/policy")" = "alice
bob max_sessions=4 max_concurrent=2" ]
ok $? "one line per token: the name and its options"
! grep -q -e "$tok_a" -e "$tok_b" "$tmp/policy"
ok $? "no token in the policy file"

long="$(printf 'x%.0s' {1..1024})"
# Run where a file would match the value as a glob pattern.
mkdir -p "$tmp/glob" && touch "$tmp/glob/allowed=a,b:cBAIT.d-e_F9"
printf 'carol %s allowed=a,b:c*.d-e_F9 limit=%s\n' "$tok_c" "$long" >"$tmp/tokens"
(cd "$tmp/glob" && "$render" "$tmp/tokens" "$tmp/map" "$tmp/policy" 2>"$tmp/err")
ok $? "values of [A-Za-z0-9_.,:*-] up to 1024 characters are accepted"
grep -qx "carol allowed=a,b:c\*.d-e_F9 limit=$long" "$tmp/policy"
ok $? "and written as given (no glob expansion)"

# Network by policy's option beside the limits (common/policy.h): a host
# list with wildcards and ports goes through as given.
run_render "dora $tok_a max_sessions=2 egress_allow=*.googleapis.com:443,data.example.org max_concurrent=1
"
[ "$status" = 0 ] && grep -qx 'dora max_sessions=2 egress_allow=\*.googleapis.com:443,data.example.org max_concurrent=1' "$tmp/policy"
ok $? "egress_allow=LIST is rendered beside max_sessions= and max_concurrent="

# ---- what the renderer refuses, naming the line ----
while IFS='|' read -r what opt pat; do
  run_render "# first
alice $tok_a
bob $tok_b $opt
"
  refuses "refuses $what, naming line 3" "line 3"
  [ "$status" != 0 ] && grep -q -- "$pat" "$tmp/err"
  ok $? "  and saying what is wrong ($pat)"
done <<LIST
an option without a value|max_sessions|option=value
an empty value|max_sessions=|option=value
an upper-case option name|Max_sessions=4|option=value
a digit in an option name|max2=4|option=value
a semicolon in a value|max_sessions=4;|option=value
a quote in a value|note="x"|option=value
a value of 1025 characters|limit=${long}x|1024
an option given twice|max_sessions=1 max_sessions=2|twice
LIST
[ ! -e "$tmp/map" ] && [ ! -e "$tmp/policy" ]
ok $? "a refused file leaves no map and no policy file behind"

run_render "alice $tok_a
bob $tok_b
alice $tok_c
"
refuses "refuses a name given twice" "line 3: the name 'alice' is already used"
run_render "alice $tok_a
bob $tok_a
"
refuses "refuses a token given twice" "line 2: this token is already"
run_render "alice short
"
refuses "refuses a short token" "line 1"
run_render "al/ice $tok_a
"
refuses "refuses a bad name" "line 1"
run_render "# nothing
"
refuses "refuses a file without tokens" "no token"

# ---- arguments ----
printf 'alice %s\n' "$tok_a" >"$tmp/tokens"
"$render" "$tmp/tokens" "$tmp/map" "$tmp/policy" --reload-nginx 2>"$tmp/err"
ok $? "--reload-nginx after the three paths is accepted (no nginx pid file: nothing to reload)"
"$render" --reload-nginx "$tmp/tokens" "$tmp/map" "$tmp/policy" 2>"$tmp/err"
ok $? "--reload-nginx before them too"
"$render" "$tmp/tokens" "$tmp/map" --reload-nginx 2>"$tmp/err"
status=$?
refuses "without the policy path: a usage message" "usage"

# ---- MCP_TOKENS (containers): unnamed tokens get distinct names ----
mkdir -p "$tmp/state"
sha8() { printf '%s' "$1" | sha256sum | cut -c1-8; }
(
  export MCP_STATE_DIR="$tmp/state" MCP_TOKENS="alice:$tok_a $tok_b
$tok_c"
  # shellcheck source=../../scripts/lib/common.sh
  . "$srcdir/scripts/lib/common.sh"
  ensure_tokens
) >"$tmp/err" 2>&1
ok $? "ensure_tokens takes MCP_TOKENS"
[ ! -s "$tmp/err" ] && head -n 1 "$tmp/state/tokens" | grep -q '^# name token'
ok $? "it prints nothing; the file starts with a comment"
[ "$(grep -v '^#' "$tmp/state/tokens")" = "alice $tok_a
token-$(sha8 "$tok_b") $tok_b
token-$(sha8 "$tok_c") $tok_c" ]
ok $? "an entry without a name gets token-<first 8 hex of its sha256>, each its own"
[ "$(stat -c %a "$tmp/state/tokens")" = 600 ]
ok $? "the tokens file is mode 0600"
"$render" "$tmp/state/tokens" "$tmp/map" "$tmp/policy" 2>"$tmp/err"
ok $? "and renders"

# ---- the summary scripts/run prints names no token ----
mkdir -p "$tmp/state/install/bin"
ln -sf "$builddir/mcp-server" "$tmp/state/install/bin/mcp-server"
out="$(
  export MCP_STATE_DIR="$tmp/state" MCP_BACKEND=direct
  . "$srcdir/scripts/lib/common.sh"
  print_summary 2>&1
)"
ok $? "print_summary runs"
! grep -q -e "$tok_a" -e "$tok_b" -e "$tok_c" <<<"$out"
ok $? "the summary holds no token"
grep -q '"MCP_TOKEN": "Bearer <token>"' <<<"$out" && grep -qF "$tmp/state/tokens" <<<"$out"
ok $? "it shows a placeholder and says where the token is"
[ "$failed" = 0 ] || echo "# $failed of $n failed"

echo "1..$n"
[ "$failed" = 0 ]
