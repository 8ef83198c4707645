#!/bin/sh
# After the files are gone. deb: remove, then purge; rpm: 0 packages left,
# which removes the config too. Purging removes the state directory only
# when it is empty, and the wophost user and group only then: the host's
# state (run records, prompts, the plugins' stores) is the operator's to
# keep or delete, and stays owned by the user that wrote it.
set -e

case "$1" in
  remove|purge|0) ;;
  *) exit 0 ;;
esac

if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
fi

case "$1" in
  purge|0) ;;
  *) exit 0 ;;
esac

rm -f /etc/wophost/environment
rmdir /etc/wophost 2>/dev/null || true
if [ -d /var/lib/wophost ] && ! rmdir /var/lib/wophost 2>/dev/null; then
  echo "wophost: kept /var/lib/wophost, the host's state, and the user wophost that owns it; remove them with: rm -rf /var/lib/wophost && userdel wophost" >&2
  exit 0
fi
if getent passwd wophost >/dev/null; then
  userdel wophost >/dev/null 2>&1 || true
fi
if getent group wophost >/dev/null; then
  groupdel wophost >/dev/null 2>&1 || true
fi
exit 0
