#!/bin/sh
# Before the files go, on removal only (deb: remove; rpm: 0 packages left),
# not on upgrade: stop and disable the service.
set -e

case "$1" in
  remove|0) ;;
  *) exit 0 ;;
esac

if [ -d /run/systemd/system ]; then
  systemctl stop wophost.service >/dev/null 2>&1 || true
fi
if command -v systemctl >/dev/null 2>&1; then
  systemctl disable wophost.service >/dev/null 2>&1 || true
fi
exit 0
