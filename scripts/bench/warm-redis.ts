// Warming a bench Redis from the bench's database, as the service fills a new Redis.
import { compose } from "../../src/compose.js";
import { loadConfig } from "../../src/config.js";
import type { Target } from "../../src/domain/model/index.js";
import { createLogger } from "../../src/process/logger.js";
import { createDatabase } from "../../src/stores/postgres/database.js";
import type { Dataset } from "./dataset.js";
import type { BenchRedis } from "./private-redis.js";
import { progressBar } from "./progress-bar.js";

/** Fills an empty private Redis (or Redis Cluster) from PostgreSQL through the service's own rebuild, as a new Redis fills in production. */
export async function warmRedis(redis: BenchRedis, data: Dataset, databaseUrl: string): Promise<number> {
  const db = createDatabase({ url: databaseUrl, poolSize: 8 });
  const app = compose(loadConfig({ ...process.env, DATABASE_URL: databaseUrl, ...redis.env }), { db, redis: redis.client }, createLogger("warn", "bench"));
  const services = app.services;
  const targets: Target[] = [...data.postIds.map((id): Target => ({ type: "post", id })), ...data.likerIds.map((id): Target => ({ type: "user", id }))];
  const bar = progressBar(`warming the ${redis.label} Redis through the rebuild`);
  const started = Date.now();
  for (let i = 0; i < targets.length; i += 16) {
    await Promise.all(targets.slice(i, i + 16).map((t) => services.counters.rebuild(t)));
    if (i % 512 === 0) bar.update(i, targets.length);
  }
  bar.update(targets.length, targets.length);
  bar.stop();
  // Each liker's member index of likes, loaded from PostgreSQL as their first feed loads it
  // (a standalone Redis keeps them, with AOF, across restarts; a cluster keeps none).
  const indexes = app.memberIndexes;
  if (indexes) {
    const indexBar = progressBar(`loading the likers' member indexes`);
    for (let i = 0; i < data.likerIds.length; i += 500) {
      for (const id of data.likerIds.slice(i, i + 500)) indexes.missing("like", "post", id);
      await indexes.idle();
      indexBar.update(i, data.likerIds.length);
    }
    indexBar.update(data.likerIds.length, data.likerIds.length);
    indexBar.stop();
  }
  // The hot ranking, rebuilt from PostgreSQL as a worker does when Redis lacks it.
  await app.rankings.refresh();
  await db.$disconnect();
  return (Date.now() - started) / 1000;
}
