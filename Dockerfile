# One image for every process of the service: the API (the default command), the worker,
# the reconcile pass and migrations, each chosen by the script given to `node --import tsx/esm`
# (deploy/kubernetes/ shows each). The service runs its TypeScript through tsx, which is a
# dependency: there is nothing to compile, only the Prisma client to generate.

# Production dependencies, shared by both stages below. Dependencies' install scripts are
# skipped: none is needed, and @prisma/engines' would download engine binaries the service
# does not use (generation and migrations need none; see scripts/generate.ts, scripts/lib/schema-engine.ts).
FROM node:20-bookworm-slim AS dependencies
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

# The Prisma client, generated into src/generated/ (prisma and tsx are dependencies). Its
# caches stay in this stage.
FROM dependencies AS build
COPY prisma.config.ts ./
COPY prisma ./prisma
COPY scripts/generate.ts ./scripts/
RUN node_modules/.bin/tsx scripts/generate.ts

FROM dependencies AS runtime
# Production mode requires JWT_SECRET, refuses a Redis that keeps nothing on a restart
# (REDIS_DURABILITY), answers no CORS origin unless CORS_ORIGINS names some, and turns
# GraphQL introspection off. HOST: reachable from outside the container.
# PIPELINE and WEB_CONCURRENCY matter only to src/server.ts (npm start's supervisor), were
# someone to run it here: the worker runs in its own containers, and availableParallelism()
# counts the machine's cores, not the container's CPU limit.
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=4000 \
    METRICS_PORT=9464 \
    PIPELINE=off \
    WEB_CONCURRENCY=1
COPY tsconfig.json schema.graphql ./
COPY prisma ./prisma
COPY scripts/migrate.ts ./scripts/
COPY scripts/lib ./scripts/lib
COPY src ./src
COPY --from=build /app/src/generated ./src/generated
# Files stay root's: the process can read them, not change them. tsx caches what it
# compiles under the temporary directory.
USER node
EXPOSE 4000 9464
# One API process per container: Kubernetes restarts it, scales it by replicas and probes
# the very process that serves. The semi-space size is the one npm start's supervisor gives
# its API processes (README, Processes). Other processes: give their script as the command's
# arguments, e.g. `src/worker.ts`, `scripts/migrate.ts`, `--max-old-space-size=160 src/reconcile.ts`.
ENTRYPOINT ["node", "--import", "tsx/esm"]
CMD ["--max-semi-space-size=32", "src/api.ts"]
