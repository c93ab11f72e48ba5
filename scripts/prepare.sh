#!/usr/bin/env bash
# Everything the service needs before it runs, each step skipped when done:
# dependencies, local services, the generated Prisma client, the migrated database.
set -euo pipefail
cd "$(dirname "$0")/.."

stamp=node_modules/.install-stamp
if [ ! -f "$stamp" ] || ! cmp -s package-lock.json "$stamp"; then
  echo "[prepare] installing dependencies (npm ci)" >&2
  # --include=dev: the build needs TypeScript and the types, and the same checkout runs the
  # tests, even when NODE_ENV=production is set in the environment (npm would omit them).
  npm ci --include=dev --no-audit --no-fund --loglevel=error
  cp package-lock.json "$stamp"
fi

bash scripts/services.sh

if [ ! -f src/generated/prisma/client.ts ] || [ prisma/schema.prisma -nt src/generated/prisma/client.ts ]; then
  echo "[prepare] generating the Prisma client" >&2
  node_modules/.bin/tsx scripts/generate.ts
fi

node_modules/.bin/tsx src/main/migrate.ts
