#!/usr/bin/env bash
# Installs farmhand as a service on an appliance (Debian 12, run as root):
# the `farmhand` user (in the video, dialout and farmhand-test groups), the
# `farmhand-test` user test scripts run as (runner.run_tests_as), the project under
# /opt/farmhand, the `farmhand` command (/usr/local/bin/farmhand ->
# /opt/farmhand/dist/main.js), /etc/farmhand/farmhand.json (kept if present),
# the systemd unit, then enables and starts it.
#
#   scripts/install-appliance.sh --test-pack <git URL or path> [--root DIR]
#
# --root DIR writes everything below DIR instead and skips useradd/systemctl
# (for packaging, and for the project's own tests).
set -euo pipefail
cd "$(dirname "$0")/.."

ROOT=""
TEST_PACK=""
while [ $# -gt 0 ]; do
  case "$1" in
    --root) ROOT="$2"; shift 2 ;;
    --test-pack) TEST_PACK="$2"; shift 2 ;;
    *) echo "usage: $0 --test-pack <url> [--root DIR]" >&2; exit 64 ;;
  esac
done
[ -n "$TEST_PACK" ] || { echo "install-appliance: --test-pack is required" >&2; exit 64; }

if [ -z "$ROOT" ]; then
  [ "$(id -u)" -eq 0 ] || { echo "install-appliance: run as root" >&2; exit 77; }
  scripts/setup.sh
  id farmhand >/dev/null 2>&1 || useradd --system --home-dir /var/lib/farmhand --no-create-home --shell /usr/sbin/nologin farmhand
  # Test scripts run as farmhand-test (runner.run_tests_as): they cannot read the node's credential
  # or the data directory. farmhand shares each run's folders with it through its group.
  id farmhand-test >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin farmhand-test
  usermod -a -G video,dialout,farmhand-test farmhand
fi

install -d "$ROOT/opt/farmhand" "$ROOT/etc/farmhand" "$ROOT/etc/systemd/system"
# The built daemon, its Python module and its runtime dependencies.
cp -r package.json package-lock.json dist python systemd README.md docs "$ROOT/opt/farmhand/"
[ -d node_modules ] && cp -r node_modules "$ROOT/opt/farmhand/"
install -m 0644 systemd/farmhand.service "$ROOT/etc/systemd/system/farmhand.service"
# `farmhand token create ...` on the appliance: the command, pointing at the installed copy.
chmod +x "$ROOT/opt/farmhand/dist/main.js"
if [ -n "$ROOT" ]; then
  scripts/link-command.sh "$ROOT/usr/local/bin" /opt/farmhand/dist/main.js >/dev/null 2>&1 # not on PATH below --root: no warning
else
  scripts/link-command.sh /usr/local/bin /opt/farmhand/dist/main.js
fi

CONFIG="$ROOT/etc/farmhand/farmhand.json"
if [ ! -f "$CONFIG" ]; then
  cat > "$CONFIG" <<JSON
{
  "listen": "0.0.0.0:8080",
  "data_dir": "/var/lib/farmhand",
  "test_pack": { "url": "$TEST_PACK" },
  "capture": { "uri": "v4l2:/dev/video0", "width": 1280, "height": 720, "fps": 25 },
  "ir": { "uri": "irtoy:/dev/ttyACM0" },
  "runner": { "run_tests_as": "farmhand-test" }
}
JSON
  chmod 0640 "$CONFIG"
fi

if [ -z "$ROOT" ]; then
  chgrp farmhand "$CONFIG"
  systemctl daemon-reload
  systemctl enable --now farmhand.service
  echo "farmhand is running: systemctl status farmhand; journalctl -u farmhand -f"
else
  echo "installed below $ROOT"
fi
