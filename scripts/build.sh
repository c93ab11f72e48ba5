#!/usr/bin/env bash
# npm run build: compiles src/ into dist/ (the JavaScript npm start, the worker, the
# reconcile pass and the image run), with the Lua scripts beside the store that runs
# them. Incremental: a build with nothing changed takes a couple of seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
node_modules/.bin/tsc -p tsconfig.build.json
(cd src && find . -name '*.lua' -exec cp --parents {} ../dist/ \;)
