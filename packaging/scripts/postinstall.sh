#!/bin/sh
# After the files are in place, on install and upgrade (deb: configure;
# rpm: 1 on install, 2 and more on upgrade): the user and group the
# service runs as, and its state directory. Idempotent: a reinstall finds
# them there and leaves them as they are.
set -e

case "$1" in
  configure|1|2|[0-9]*) ;;
  *) exit 0 ;;
esac

if ! getent group wophost >/dev/null; then
  groupadd --system wophost
fi
if ! getent passwd wophost >/dev/null; then
  nologin=/usr/sbin/nologin
  [ -x "$nologin" ] || nologin=/sbin/nologin
  useradd --system --gid wophost --home-dir /var/lib/wophost --no-create-home \
    --shell "$nologin" --comment "wophost service" wophost
fi

install -d -m 0750 -o wophost -g wophost /var/lib/wophost

if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
  # An upgrade restarts a running service on the new binaries (deb: the
  # old version in $2; rpm: a count of 2 or more).
  if [ -n "$2" ] || { [ "$1" -ge 2 ] 2>/dev/null; }; then
    systemctl try-restart wophost.service >/dev/null 2>&1 || true
  fi
fi
exit 0
