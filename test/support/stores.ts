// Both stores side by side, for tests that drive likes and watch them persist.
import { afterAll, beforeAll } from "vitest";
import { compose } from "../../src/compose.js";
import type { Config } from "../../src/config.js";
import type { LikeableTarget, Relation, Target } from "../../src/domain/model/index.js";
import type { Services } from "../../src/domain/services.js";
import type { ReconcileSummary } from "../../src/pipeline/reconcile-pass.js";
import type { Database } from "../../src/stores/postgres/database.js";
import { createRabbitConnection } from "../../src/stores/rabbitmq/connection.js";
import type { RedisClient } from "../../src/stores/redis/client.js";
import { noDifferences as noDifferencesFound } from "../../src/pipeline/reconcile-tally.js";
import { disagreement } from "./agreement.js";
import { createUsers, emptyRedis, openDatabase, openRedis, silentLogger, testConfig, type TestUser } from "./env.js";
import { eventually } from "./pipeline.js";

export interface Stores {
  readonly db: Database;
  readonly redis: RedisClient;
}

/** The use cases on these stores, as compose() builds them for the API. */
export function servicesOn(stores: Stores, config: Config): Services {
  return compose(config, stores, silentLogger).services;
}

/** One full reconcile pass on these stores, as `npm run reconcile` runs it (its repairs go out on the config's RabbitMQ). */
export async function reconcileOn(stores: Stores, config: Config): Promise<ReconcileSummary> {
  const rabbit = createRabbitConnection(config.amqpUrl, silentLogger);
  try {
    return await compose(config, { ...stores, rabbit }, silentLogger).reconcileOnce();
  } finally {
    await rabbit.close();
  }
}

/** Loads targets into Redis as a write would (a read answers from PostgreSQL and loads nothing itself). */
export async function loadIntoRedis(services: Services, targets: readonly Target[]): Promise<void> {
  const found = await Promise.all(targets.map((target) => services.counters.rebuild(target)));
  const missing = targets.filter((_, i) => !found[i]);
  if (missing.length > 0) throw new Error(`not in PostgreSQL, so not loaded: ${missing.map((t) => `${t.type} ${t.id}`).join(", ")}`);
}

/** A reconcile summary's differences when a pass found none. */
export const noDifferences = noDifferencesFound();

/** `count` new posts by `authorId`, created through the service as the API would. */
export async function createPosts(stores: Stores, config: Config, authorId: bigint, count: number): Promise<LikeableTarget[]> {
  const services = servicesOn(stores, config);
  const posts: LikeableTarget[] = [];
  for (let i = 0; i < count; i++) posts.push({ type: "post", id: (await services.content.createPost(authorId, `post ${i}`, "b")).id });
  return posts;
}

/** Waits until Redis and PostgreSQL agree on every target's relation (likes unless named); fails with the first difference. */
export function agreeWithin({ db, redis }: Stores, config: Config, targets: readonly Target[], timeoutMs = 30_000, relation: Relation = "like"): Promise<void> {
  const differs = () => disagreement(redis, db, config.redisPartitions, targets, relation);
  return eventually(
    async () => (await differs()) === null,
    timeoutMs,
    async () => String(await differs()),
  );
}

export interface StoresWithAuthor extends Stores {
  /** A user to write posts as. */
  readonly author: TestUser;
}

/**
 * Opens the worker's database and private Redis before a file's tests, with an
 * author to write posts as, and closes them after. `fresh` empties every table
 * and Redis first, for files whose checks cover all data (no other file uses the
 * worker's stores meanwhile: test/setup/global.ts); `emptyRedis` empties Redis
 * alone, for files that count what Redis holds, such as whatever the outbox was
 * left holding.
 */
export function useStores(assign: (stores: StoresWithAuthor) => void, options: { fresh?: boolean; emptyRedis?: boolean } = {}): void {
  let opened: StoresWithAuthor | undefined;
  beforeAll(async () => {
    const config = testConfig();
    const db = openDatabase(config);
    const redis = await openRedis();
    if (options.fresh) {
      await db.$executeRaw`TRUNCATE users, posts, comments, likes, collects, follows, relation_versions, view_totals, target_epochs, counters, like_buckets`;
    }
    if (options.fresh || options.emptyRedis) await emptyRedis(redis);
    const [author] = await createUsers(db, config, 1);
    opened = { db, redis, author: author as TestUser };
    assign(opened);
  });
  afterAll(async () => {
    await opened?.redis.quit();
    await opened?.db.$disconnect();
  });
}
