#!/usr/bin/env bash
# Puts the `farmhand` command on PATH: a symlink named farmhand, pointing at
# dist/main.js (executable, with a `#!/usr/bin/env node` line), in BIN_DIR.
#
#   scripts/link-command.sh [BIN_DIR] [TARGET]
#
# BIN_DIR: default /usr/local/bin as root, else npm's global bin folder when
# writable (as `npm link` would), else ~/.local/bin. TARGET: default this
# checkout's dist/main.js; the appliance installer passes /opt/farmhand/dist/main.js.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET="${2:-$PWD/dist/main.js}"
BIN_DIR="${1:-}"
if [ -z "$BIN_DIR" ]; then
  if [ "$(id -u)" -eq 0 ]; then
    BIN_DIR=/usr/local/bin
  else
    NPM_BIN="$(npm prefix -g 2>/dev/null)/bin"
    if [ -d "$NPM_BIN" ] && [ -w "$NPM_BIN" ]; then BIN_DIR="$NPM_BIN"; else BIN_DIR="$HOME/.local/bin"; fi
  fi
fi
mkdir -p "$BIN_DIR"
ln -sfn "$TARGET" "$BIN_DIR/farmhand"
echo "setup: farmhand -> $TARGET in $BIN_DIR"
case ":$PATH:" in
  *":$BIN_DIR:"*) ;;
  *) echo "setup: $BIN_DIR is not on your PATH; add it, or run $BIN_DIR/farmhand" >&2 ;;
esac
