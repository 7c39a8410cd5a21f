#!/usr/bin/env bash
# The whole test suite, from a fresh machine: install what is missing, type-check, test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
npm run --silent typecheck
npm test
