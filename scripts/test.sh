#!/usr/bin/env bash
# The whole test suite, from a fresh machine: install what is missing, type-check, lint, test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
npm run --silent typecheck
npm run --silent lint
npm test
# The project's own v2 tests once more, through a farm portal in front of the node (docs/farm.md,
# "The v2 tests through a portal"): a real PostgreSQL, `farmhand portal` and the node joined to it.
FARMHAND_TEST_THROUGH_PORTAL=1 npx mocha test/http/v2.test.ts
# And through 3 portal replicas ("many") behind a real HAProxy (balance roundrobin: consecutive requests land on
# different replicas), the node joined to one of them (docs/farm.md, "The v2 tests through 3 replicas").
FARMHAND_TEST_THROUGH_REPLICAS=3 npx mocha test/http/v2.test.ts
