# Docker for the container image and the cluster on one machine
# (scripts/cluster, scripts/test).  Source it after common.sh; it defines
# functions only.
#
# The engine: Debian's docker.io, installed when missing; where no init
# system runs dockerd (these machines), it is started by hand and stopped
# again by whoever started it (the pid is in $MCP_DOCKERD_PIDFILE).  The
# base image: debian:12-slim from a registry when one answers, else made
# here with debootstrap from the machine's Debian mirror and docker import.

MCP_IMAGE="${MCP_IMAGE:-mcp-sandbox:local}"
MCP_BASE_IMAGE="debian:12-slim"
DOCKER=/usr/bin/docker

docker_up() { [ -S /var/run/docker.sock ] && "$DOCKER" info >/dev/null 2>&1; }

# Install docker.io when missing and start dockerd when none answers.
ensure_docker() {
  # shellcheck disable=SC2086
  apt_install $MCP_APT_CLUSTER
  docker_up && return 0
  local pidfile="${MCP_DOCKERD_PIDFILE:?}" i
  log "starting dockerd (log: ${pidfile%.pid}.log)"
  mkdir -p "$(dirname "$pidfile")"
  env -u MCP_TOKENS setsid /usr/sbin/dockerd >"${pidfile%.pid}.log" 2>&1 </dev/null &
  echo $! >"$pidfile"
  for i in $(seq 1 120); do
    docker_up && return 0
    kill -0 "$(cat "$pidfile")" 2>/dev/null || die "dockerd exited; see ${pidfile%.pid}.log"
    sleep 0.5
  done
  die "dockerd did not answer on /var/run/docker.sock within 60 s"
}

# Stop dockerd if this pid file says we started it (containers stopped first).
stop_docker_if_ours() {
  local pidfile="${MCP_DOCKERD_PIDFILE:?}" pid i
  [ -s "$pidfile" ] || return 0
  pid="$(cat "$pidfile")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for i in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  fi
  rm -f "$pidfile"
}

# The Debian mirror apt uses here (deb822 or one-line sources).
debian_mirror() {
  local m
  m="$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null)"
  [ -n "$m" ] || m="$(awk '$1 == "deb" && $3 ~ /^bookworm/ {print $2; exit}' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null)"
  printf '%s' "${m:-http://deb.debian.org/debian}"
}

# debian:12-slim: present, pulled, or made (about 2 minutes, 200 MB).
ensure_base_image() {
  "$DOCKER" image inspect "$MCP_BASE_IMAGE" >/dev/null 2>&1 && return 0
  if timeout 60 "$DOCKER" pull -q "$MCP_BASE_IMAGE" >/dev/null 2>&1; then
    return 0
  fi
  local root
  root="$(mktemp -d /var/tmp/mcp-base.XXXXXX)"
  log "no registry answers: making $MCP_BASE_IMAGE with debootstrap from $(debian_mirror)"
  if ! debootstrap --variant=minbase bookworm "$root" "$(debian_mirror)" >"$root.log" 2>&1; then
    tail -n 20 "$root.log" >&2
    rm -rf "$root" "$root.log"
    die "debootstrap failed"
  fi
  local imported=yes
  tar -C "$root" -c . | "$DOCKER" import - "$MCP_BASE_IMAGE" >/dev/null || imported=no
  rm -rf "$root" "$root.log"
  [ "$imported" = yes ] || die "docker import failed"
}

# The service's image from the Dockerfile (its layers cache what did not change).
build_image() {
  local log="$1"
  ensure_base_image
  log "building $MCP_IMAGE (log: $log)"
  if ! env -u MCP_TOKENS "$DOCKER" build --network=host -t "$MCP_IMAGE" "$MCP_ROOT" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    die "docker build failed"
  fi
}

# How a cell's container gets what runsc needs: --privileged where this
# machine's capability bounding set holds every capability, else each
# capability it holds (--privileged fails without CAP_SYS_RESOURCE, for
# one), with seccomp and AppArmor unconfined and the host's cgroups.
# (Docker 20.10 knows the capabilities up to AUDIT_READ, 37; runsc needs
# none of the later ones.)
sandbox_run_args() {
  local names=(CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP LINUX_IMMUTABLE
    NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE SYS_RAWIO SYS_CHROOT SYS_PTRACE
    SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE AUDIT_WRITE AUDIT_CONTROL
    SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ)
  local mask last i all=yes args=()
  mask=$((16#$(awk '/^CapBnd:/ {print $2}' /proc/self/status)))
  last="$(cat /proc/sys/kernel/cap_last_cap)"
  for i in $(seq 0 "$last"); do
    if (((mask >> i) & 1)); then
      [ "$i" -lt ${#names[@]} ] && args+=(--cap-add "${names[$i]}")
    else
      all=no
    fi
  done
  if [ "$all" = yes ]; then
    printf '%s\n' --privileged
  else
    printf '%s\n' "${args[@]}" --security-opt seccomp=unconfined --security-opt apparmor=unconfined
  fi
  printf '%s\n' -v /sys/fs/cgroup:/sys/fs/cgroup
}
