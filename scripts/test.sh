#!/usr/bin/env bash
# npm test: prepares dependencies and services, checks types, lint and the
# layering rules, then runs the whole suite. Tests use their own database, Redis
# instances and RabbitMQ vhost (test/setup).
set -euo pipefail
cd "$(dirname "$0")/.."
export DATABASE_URL="${TEST_DATABASE_URL:-postgresql://postgres@127.0.0.1:5432/likes_test}"
bash scripts/prepare.sh
bash scripts/services.sh --browser
echo "[test] types, lint and layers (npm run lint)" >&2
npm run --silent lint
exec node_modules/.bin/vitest run "$@"
