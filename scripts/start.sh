#!/usr/bin/env bash
# npm start: prepares dependencies, services and database, then runs the service:
# API processes on every core and the persistence pipeline beside them (src/server.ts).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/prepare.sh
# tsx/esm: this code is ESM, and tsx's CommonJS hook would run on every require() of the
# packages that are not (measured: Apollo requires crypto for each request it hashes).
exec node --import tsx/esm src/server.ts
