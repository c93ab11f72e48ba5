// Both stores side by side, for tests that drive likes and watch them persist.
import { afterAll, beforeAll } from "vitest";
import type { Config } from "../../src/config.js";
import type { Target } from "../../src/domain/targets.js";
import type { Database } from "../../src/stores/postgres/database.js";
import type { RedisClient } from "../../src/stores/redis/client.js";
import { createServices } from "../../src/wiring.js";
import { disagreement } from "./agreement.js";
import { createUsers, openDatabase, openRedis, testConfig, type TestUser } from "./env.js";
import { eventually } from "./pipeline.js";

export interface Stores {
  readonly db: Database;
  readonly redis: RedisClient;
}

/** `count` new posts by `authorId`, created through the service as the API would. */
export async function createPosts({ db, redis }: Stores, config: Config, authorId: bigint, count: number): Promise<Target[]> {
  const services = createServices(config, { db, redis });
  const posts: Target[] = [];
  for (let i = 0; i < count; i++) posts.push({ type: "post", id: (await services.content.createPost(authorId, `post ${i}`, "b")).id });
  return posts;
}

/** Waits until Redis and PostgreSQL agree on every target; fails with the first difference. */
export function agreeWithin({ db, redis }: Stores, config: Config, targets: readonly Target[], timeoutMs = 30_000): Promise<void> {
  const differs = () => disagreement(redis, db, config.redisPartitions, targets);
  return eventually(async () => (await differs()) === null, timeoutMs, async () => String(await differs()));
}

export interface StoresWithAuthor extends Stores {
  /** A user to write posts as. */
  readonly author: TestUser;
}

/**
 * Opens the test database and private Redis before a file's tests, with an
 * author to write posts as, and closes them after. `fresh` empties the like
 * tables and Redis first, for files whose checks cover all data.
 */
export function useStores(assign: (stores: StoresWithAuthor) => void, options: { fresh?: boolean } = {}): void {
  let opened: StoresWithAuthor | undefined;
  beforeAll(async () => {
    const config = testConfig();
    const db = openDatabase(config);
    const redis = await openRedis();
    if (options.fresh) {
      await db.$executeRaw`TRUNCATE likes, like_versions, counters`;
      await redis.flushall();
    }
    const [author] = await createUsers(db, config, 1);
    opened = { db, redis, author: author as TestUser };
    assign(opened);
  });
  afterAll(async () => {
    await opened?.redis.quit();
    await opened?.db.$disconnect();
  });
}
