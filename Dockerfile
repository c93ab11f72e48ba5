# One image for every process of the service: the API (the default command), the worker,
# the reconcile pass and migrations, each chosen by the script given to `node`
# (deploy/kubernetes/ shows each). The service runs compiled JavaScript (dist/, built by
# `npm run build`), migrations included: the image holds no TypeScript, tsx or esbuild.

# Production dependencies, shared by the stages below. Dependencies' install scripts are
# skipped: none is needed, and @prisma/engines' would download engine binaries the service
# does not use (generation and migrations need none; see scripts/generate.ts, src/stores/postgres/schema-engine.ts).
FROM node:20-bookworm-slim AS dependencies
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

# The Prisma client, generated into src/generated/, and the build into dist/: TypeScript and
# the types are development dependencies, installed in this stage only.
FROM dependencies AS build
RUN npm ci --include=dev --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json prisma.config.ts ./
COPY prisma ./prisma
COPY scripts/generate.ts scripts/build.sh ./scripts/
COPY src ./src
RUN node_modules/.bin/tsx scripts/generate.ts && bash scripts/build.sh

FROM dependencies AS runtime
# Production mode requires JWT_SECRET, refuses a Redis that keeps nothing on a restart
# (REDIS_DURABILITY), answers no CORS origin unless CORS_ORIGINS names some, and turns
# GraphQL introspection off. HOST: reachable from outside the container.
# PIPELINE and WEB_CONCURRENCY matter only to src/main/start.ts (npm start's supervisor), were
# someone to run it here: the worker runs in its own containers, and availableParallelism()
# counts the machine's cores, not the container's CPU limit.
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=4000 \
    METRICS_PORT=9464 \
    PIPELINE=off \
    WEB_CONCURRENCY=1
# The contract, the migrations the schema engine applies, and the compiled service.
COPY schema.graphql ./
COPY prisma ./prisma
COPY --from=build /app/dist ./dist
# Files stay root's: the process can read them, not change them.
USER node
EXPOSE 4000 9464
# One API process per container: Kubernetes restarts it, scales it by replicas and probes
# the very process that serves. The semi-space size is the one npm start's supervisor gives
# its API processes (docs/operations.md, Processes and exit codes). Other processes: give their script as the command's
# arguments, e.g. `dist/main/worker.js`, `--max-old-space-size=160 dist/main/reconcile.js`, and
# for migrations `dist/main/migrate.js`.
ENTRYPOINT ["node"]
CMD ["--max-semi-space-size=32", "dist/main/api.js"]
