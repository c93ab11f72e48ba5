#!/usr/bin/env bash
# npm test: prepares dependencies and services, checks types, lint and the
# layering rules, then runs the whole suite. Tests use their own databases, Redis
# instances and clusters and RabbitMQ vhost (test/setup).
set -euo pipefail
cd "$(dirname "$0")/.."
export DATABASE_URL="${TEST_DATABASE_URL:-postgresql://postgres@127.0.0.1:5432/likes_test}"
bash scripts/prepare.sh
bash scripts/services.sh --browser
echo "[test] types, lint and layers (npm run lint), and the build the process tests run" >&2
# The suite's global setup builds dist/ too; built here beside the lint, it finds nothing left to do.
bash scripts/build.sh &
build=$!
npm run --silent lint || { wait "$build"; exit 1; }
wait "$build"
exec node_modules/.bin/vitest run "$@"
