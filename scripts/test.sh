#!/usr/bin/env bash
# The whole test suite, from a fresh machine: install what is missing, type-check, lint, test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# Type-check and lint run beside the suite, not before it: the suite mostly waits on the code's own timers and
# child processes (docs/testing.md, "Where the time goes"), so its two workers leave the cores half idle, and
# tsc and ESLint (about 30 and 70 s of CPU) fit in that room instead of adding their time in front of it.
# Their output is printed after the suite's; any of the three failing fails the script.
checks="$(mktemp -d)"
trap 'rm -rf "$checks"' EXIT
npm run --silent typecheck >"$checks/typecheck.log" 2>&1 &
typecheck=$!
npm run --silent lint >"$checks/lint.log" 2>&1 &
lint=$!
failed=()
# The suite includes the project's own v2 tests through a farm portal and through 3 portal replicas behind a real
# HAProxy (test/http/v2-portal.test.ts, v2-replicas.test.ts; docs/farm.md, "The v2 tests through a portal").
npm test || failed+=("npm test")
wait "$typecheck" || failed+=("npm run typecheck")
wait "$lint" || failed+=("npm run lint")
for c in typecheck lint; do
  if [ -s "$checks/$c.log" ]; then
    echo "--- npm run $c:"
    cat "$checks/$c.log"
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "scripts/test.sh: failed: ${failed[*]}" >&2
  exit 1
fi
