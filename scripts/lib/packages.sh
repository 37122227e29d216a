# The Debian packages of the service and their install, shared by
# scripts/lib/common.sh and the Dockerfile's first layer (which copies this
# file alone, so that the image's package layer changes only with it).
# Source it; it defines variables and functions only.  Only what the image
# installs is here (the test and cluster packages are in common.sh), so
# that the image's first layer is rebuilt only when those change.

# Debian packages: building, running, testing.
MCP_APT_BUILD="build-essential autoconf automake libtool pkg-config libfcgi-dev libcjson-dev libseccomp-dev libcgroup-dev libssl-dev"
# Node.js runs execute_javascript in the sandbox; npm installs its packages;
# node-acorn (Debian's acorn and acorn-walk, /usr/share/nodejs) parses the
# cells of the persistent JavaScript interpreter (executor/mcp_executor/repl.mjs).
MCP_APT_RUN="nginx runsc logrotate python3 python3-pip nodejs npm node-acorn openssl curl ca-certificates libfcgi-bin cgroup-tools procps e2fsprogs squid-openssl"
# The template environment (env_requirements.txt) from Debian's packages;
# MCP_TEMPLATE_FROM=pip installs it with pip instead, and auto (the
# Dockerfile's default) with pip when PyPI answers, else from Debian
# (install_template).
MCP_APT_TEMPLATE_PACKAGES="python3-numpy python3-pandas python3-matplotlib python3-pil"
MCP_APT_TEMPLATE="$MCP_APT_TEMPLATE_PACKAGES"
[ "${MCP_TEMPLATE_FROM:-apt}" = apt ] || MCP_APT_TEMPLATE=""
# The router (scripts/router, nginx/router.conf.in): nginx's Lua module
# (OpenResty's lua-nginx-module, with lua-resty-core) and its DNS resolver.
MCP_APT_ROUTER="libnginx-mod-http-lua lua-nginx-dns"
log() { printf '%s\n' "$*" >&2; }
die() {
  printf 'error: %s\n' "$*" >&2
  exit 1
}

# Install the Debian packages that are missing (one apt-get call).  One
# dpkg-query for all of them: a cell runs this at every start, and a
# process per package cost it a second (more on a busy machine).
apt_install() {
  local missing=() p installed
  # (dpkg-query fails when one of them is unknown, and lists the others)
  installed=" $(dpkg-query -W -f='${Package} ${Status}\n' "$@" 2>/dev/null |
    awk '$NF == "installed" && $(NF-1) == "ok" { sub(/:.*/, "", $1); printf "%s ", $1 }' || true)"
  for p in "$@"; do
    # node and npm may come from elsewhere (NodeSource): accept the commands.
    case "$p" in
      nodejs) command -v node >/dev/null && continue ;;
      npm) command -v npm >/dev/null && continue ;;
    esac
    [[ "$installed" == *" $p "* ]] || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || apt-get update
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed"
  # The nginx and squid packages start their default services; we run our own.
  if [[ " ${missing[*]} " == *" nginx "* ]] && command -v systemctl >/dev/null; then
    systemctl disable --now nginx >/dev/null 2>&1 || true
  fi
  if [[ " ${missing[*]} " == *" squid-openssl "* ]] && command -v systemctl >/dev/null; then
    systemctl disable --now squid >/dev/null 2>&1 || true
  fi
}

install_deps() {
  # shellcheck disable=SC2086
  apt_install $MCP_APT_BUILD $MCP_APT_RUN $MCP_APT_TEMPLATE "$@"
}

# The template environment with pip (MCP_TEMPLATE_FROM=pip or auto):
# env_requirements.txt beside scripts/. With auto, an index that cannot be
# reached (no PyPI on this network) means Debian's packages instead.
install_template() {
  local req="$1"
  case "${MCP_TEMPLATE_FROM:-apt}" in
    apt) return 0 ;;
    pip) python3 -m pip install --break-system-packages --no-cache-dir -r "$req" || die "pip install failed" ;;
    auto)
      if python3 -m pip install --break-system-packages --no-cache-dir --timeout 15 --retries 1 -r "$req"; then
        return 0
      fi
      log "PyPI cannot be reached: the template environment comes from Debian's packages"
      # shellcheck disable=SC2086
      apt_install $MCP_APT_TEMPLATE_PACKAGES
      ;;
    *) die "MCP_TEMPLATE_FROM must be apt, pip or auto" ;;
  esac
}
