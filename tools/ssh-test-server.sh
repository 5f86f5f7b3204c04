#!/usr/bin/env bash
# An sshd on 127.0.0.1, for testing distbench's ssh launcher for real (cluster.launcher: ssh): the
# "nodes" 127.0.0.1 and localhost (two names of this machine that resolve everywhere, as the
# rendezvous host must) are reached through an ssh client config of the state directory, with a key
# made for the test. Nothing of the machine's own ssh setup is read or changed:
# the daemon runs with its own config, host key and authorized keys, and a wrapper `ssh` in
# STATE/bin adds `-F STATE/ssh_config` (put STATE/bin first on PATH). Started and stopped by
# tests/test_ssh.py; usable by hand (as root: sshd's privilege separation needs it):
#
#   tools/ssh-test-server.sh install     # apt-get install openssh-server openssh-client (Debian/Ubuntu)
#   tools/ssh-test-server.sh start       # keys, configs, the daemon; waits until `ssh 127.0.0.1 true` works
#   PATH=/run/distbench-ssh/bin:$PATH ssh localhost hostname
#   tools/ssh-test-server.sh stop        # stop exactly the daemon `start` started (by PID)
#
# Environment: SSH_TEST_STATE (default /run/distbench-ssh), SSH_TEST_PORT (default 22022).
set -euo pipefail

STATE=${SSH_TEST_STATE:-/run/distbench-ssh}
PORT=${SSH_TEST_PORT:-22022}
SSHD=$(command -v sshd || echo /usr/sbin/sshd)

log() { printf '[ssh-test-server] %s\n' "$*" >&2; }
need_root() { [ "$(id -u)" -eq 0 ] || { log "must run as root (sshd's privilege separation)"; exit 1; }; }
# running = the PID exists and is not a zombie (a container's PID 1 may not reap)
is_running() { [ -r "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat")" != Z ]; }

do_install() {
  need_root
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends openssh-server openssh-client >/dev/null
}

do_start() {
  need_root
  [ -x "$SSHD" ] || { log "no sshd: run '$0 install'"; exit 1; }
  mkdir -p "$STATE/bin" /run/sshd  # /run/sshd: sshd's privilege-separation directory
  chmod 700 "$STATE"
  [ -f "$STATE/host_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$STATE/host_key"
  [ -f "$STATE/client_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$STATE/client_key"
  cp "$STATE/client_key.pub" "$STATE/authorized_keys"
  cat > "$STATE/sshd_config" <<CONF
ListenAddress 127.0.0.1
Port $PORT
HostKey $STATE/host_key
AuthorizedKeysFile $STATE/authorized_keys
PidFile $STATE/sshd.pid
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
LogLevel ERROR
CONF
  cat > "$STATE/ssh_config" <<CONF
Host 127.0.0.1 localhost
  HostName 127.0.0.1
  Port $PORT
  IdentityFile $STATE/client_key
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
CONF
  printf '#!/bin/sh\nexec %s -F %s "$@"\n' "$(command -v ssh)" "$STATE/ssh_config" > "$STATE/bin/ssh"
  chmod +x "$STATE/bin/ssh"
  if [ -f "$STATE/sshd.pid" ] && is_running "$(cat "$STATE/sshd.pid")"; then
    log "already running (pid $(cat "$STATE/sshd.pid"))"
  else
    "$SSHD" -f "$STATE/sshd_config" -E "$STATE/sshd.log"
  fi
  for _ in $(seq 50); do
    if "$STATE/bin/ssh" -o BatchMode=yes 127.0.0.1 true 2>/dev/null; then
      log "up: 127.0.0.1, localhost -> 127.0.0.1:$PORT (PATH=$STATE/bin:\$PATH)"
      return 0
    fi
    sleep 0.2
  done
  log "sshd did not answer within 10 s: $(tail -5 "$STATE/sshd.log" 2>/dev/null)"
  exit 1
}

do_stop() {
  local pid
  [ -f "$STATE/sshd.pid" ] || { log "not running"; return 0; }
  pid=$(cat "$STATE/sshd.pid")
  if is_running "$pid"; then
    kill "$pid"
    for _ in $(seq 50); do is_running "$pid" || break; sleep 0.1; done
  fi
  rm -f "$STATE/sshd.pid"
  log "stopped"
}

case "${1:-}" in
  install) do_install ;;
  start) do_start ;;
  stop) do_stop ;;
  *) echo "usage: $0 install|start|stop" >&2; exit 2 ;;
esac
