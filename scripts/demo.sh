#!/usr/bin/env bash
# Try farmhand on this machine: install what is missing, make the example test
# pack a git repository, and start the daemon on loopback driving farmhand's
# virtual set-top box (its picture through the capture pipeline, its remote
# through the IR path). Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

DEMO=.farmhand-demo
PORT=${PORT:-8080}
if [ ! -d "$DEMO/test-pack/.git" ]; then
  mkdir -p "$DEMO"
  cp -r examples/test-pack "$DEMO/test-pack"
  git -C "$DEMO/test-pack" init -q -b main
  git -C "$DEMO/test-pack" add -A
  git -C "$DEMO/test-pack" -c user.name=farmhand -c user.email=farmhand@localhost commit -qm "Example test pack"
fi

# Tests must not read what the daemon keeps (docs/security.md): as root, farmhand runs them as farmhand-test
# (made when missing). That user must reach this checkout (farmhand's Python package); when it cannot (a
# checkout under /root), the tests run as root, on purpose ("run_tests_as": false), and the daemon warns.
CONFIG=()
if [ "$(id -u)" -eq 0 ]; then
  id farmhand-test >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin farmhand-test
  if ! runuser -u farmhand-test -- test -r "$PWD/python/farmhand/__init__.py"; then
    echo "demo: WARNING: farmhand-test cannot read $PWD (farmhand's Python package), so the tests run as root and can read the data directory; move the checkout somewhere others can read (e.g. /opt or /srv) to run them as farmhand-test" >&2
    echo '{ "runner": { "run_tests_as": false } }' >"$DEMO/run-as-root.json"
    CONFIG=(--config "$DEMO/run-as-root.json")
  fi
fi

URL="http://127.0.0.1:$PORT"
export BANNER="
farmhand listens on $URL.

Open the portal in a browser: $URL/
  (results, the live picture and the web remote; to press keys or reserve, sign in with a token:
   farmhand token create --user <your name> --data-dir $DEMO/data)

Or drive it as CI does, in another terminal:

  curl $URL/api/v1/test_pack/main/test_case_names
  curl -d '{\"test_pack_revision\": \"main\", \"test_cases\": [\"tests/menus.py::test_open_settings\", \"tests/menus.py::test_menu_wraps_around\"]}' $URL/api/v1/run_tests
  curl $URL/api/v1/results
  curl -o screenshot.png $URL/api/v1/device/screenshot.png

The second test fails on purpose: see its failure_reason, screenshot and video.
tests/stbt_menus.py::test_open_guide_with_stbt is the same kind of test written against stb-tester's
stbt API (import stbt): test packs written for stb-tester run as they are.

For operators: curl $URL/readyz (is it ready, and if not why), curl $URL/metrics (Prometheus),
the API contract at $URL/api/openapi.json and, readable, $URL/app/api.
"
# The banner only once the daemon listens (its "listening on" line): a daemon that cannot
# start (port in use, ...) prints its one-line error and the script exits with its status.
# The filter ignores Ctrl-C, so the daemon's last log lines still get through while it stops.
exec node dist/main.js serve "${CONFIG[@]}" --listen "127.0.0.1:$PORT" --data-dir "$DEMO/data" \
  --test-pack "$DEMO/test-pack" --capture virtual: --ir virtual: --node-id farmhand-demo \
  > >(trap '' INT TERM
      shown=""
      while IFS= read -r line; do
        printf '%s\n' "$line"
        if [ -z "$shown" ] && [[ $line == *"listening on http"* ]]; then printf '%s\n' "$BANNER"; shown=1; fi
      done)
