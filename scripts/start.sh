#!/usr/bin/env bash
# npm start: prepares dependencies, services and database, then runs the API
# with the persistence pipeline in one process.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/prepare.sh
exec node --import tsx src/server.ts
