#!/usr/bin/env bash
# The whole test suite, from a fresh machine: install what is missing, type-check, lint, test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
npm run --silent typecheck
npm run --silent lint
npm test
