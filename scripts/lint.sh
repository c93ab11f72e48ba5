#!/usr/bin/env bash
# npm run lint: types, ESLint (type-checked rules), the format, the layering rules and the
# deployment example. The type check and ESLint each keep one core busy for most of their
# time, so they run side by side, each followed by the quicker checks; the script fails if
# any check fails, after all have run. Caches live in node_modules/.cache.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=node_modules/.bin

types_format_layers() {
  "$bin/tsc" --noEmit -p . --incremental --tsBuildInfoFile node_modules/.cache/tsc/tsbuildinfo &&
    "$bin/prettier" --check --cache --log-level warn . &&
    "$bin/depcruise" src scripts test --config .dependency-cruiser.mjs
}
eslint_deploy() {
  "$bin/eslint" --cache --cache-location node_modules/.cache/eslint/ . && "$bin/tsx" scripts/lint-deploy.ts
}

types_format_layers &
first=$!
eslint_deploy &
second=$!
status=0
wait "$first" || status=1
wait "$second" || status=1
exit "$status"
