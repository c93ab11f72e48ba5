#!/usr/bin/env bash
# Makes sure PostgreSQL, Redis and RabbitMQ answer on their local ports,
# installing them from Debian's packages and starting them where needed.
# Idempotent: when all is there and answers it only checks and returns. With --chaos,
# also the tools the fault suite needs (faketime); with --browser, Debian's Chromium
# for the explorer's browser test.
set -euo pipefail

log() { printf '[services] %s\n' "$*" >&2; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_port() {
  local name=$1 port=$2 tries=${3:-60}
  for _ in $(seq "$tries"); do port_open "$port" && return 0; sleep 1; done
  log "$name did not open port $port; see its log"; return 1
}

apt_updated=0
ensure_package() { # ensure_package <command> <debian package>
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" != 0 ]; then log "$1 is missing; install the Debian package $2 (needs root)"; return 1; fi
  if [ $apt_updated = 0 ]; then log "apt-get update"; apt-get update -qq; apt_updated=1; fi
  log "installing $2 from Debian's packages"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}

ensure_postgres() {
  port_open 5432 && return 0
  ensure_package pg_ctlcluster postgresql
  local version; version=$(ls /etc/postgresql | sort -V | tail -n 1)
  log "starting PostgreSQL $version"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  wait_port PostgreSQL 5432
  # Local development uses trust auth on loopback, as on the project's machines.
  local hba="/etc/postgresql/$version/main/pg_hba.conf"
  if ! grep -qE '^host\s+all\s+all\s+127\.0\.0\.1/32\s+trust' "$hba"; then
    sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
    pg_ctlcluster --skip-systemctl-redirect "$version" main reload
  fi
}

ensure_redis() {
  port_open 6379 && return 0
  ensure_package redis-server redis-server
  log "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  # noeviction: Redis holds likes not yet persisted (the outbox), receipts and half-written
  # rebuild records, none of which may be dropped by Redis's own choice. The service keeps
  # Redis under maxmemory itself (src/domain/memory-policy.ts): from 80% it evicts the least
  # recently used targets PostgreSQL holds whole, from 90% it loads no cold target, and the
  # rest is left for changes to the targets Redis holds. REDIS_MAXMEMORY sets the limit.
  # AOF, fsynced every second: a restart keeps the likes the outbox still holds.
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" \
    --appendonly yes --appendfsync everysec \
    --maxmemory "${REDIS_MAXMEMORY:-1gb}" --maxmemory-policy noeviction \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  wait_port Redis 6379
}

ensure_rabbitmq() {
  port_open 5672 && return 0
  ensure_package rabbitmq-server rabbitmq-server
  log "starting RabbitMQ"
  rabbitmq-server -detached 2>/dev/null || true
  wait_port RabbitMQ 5672 120
}

ensure_chromium() {
  # By its path: the test drives this very binary (playwright-core downloads no browser), and
  # another chromium on PATH would not do. The service runs without it, so a miss is only reported.
  ensure_package /usr/bin/chromium chromium || log "without it, test/integration/graphql/explorer.test.ts fails"
}

ensure_postgres
ensure_redis
ensure_rabbitmq
# npm test also drives a browser (test/integration/graphql/explorer.test.ts); the service needs none.
if [ "${1:-}" = "--browser" ]; then ensure_chromium; fi
# npm run chaos also shifts the service's clock (clock-ahead, clock-behind).
if [ "${1:-}" = "--chaos" ]; then ensure_package faketime faketime || log "without faketime, clock-ahead and clock-behind are skipped"; fi
