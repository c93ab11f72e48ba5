// Both stores side by side, for tests that drive likes and watch them persist.
import type { Config } from "../../src/config.js";
import type { Target } from "../../src/domain/targets.js";
import type { Database } from "../../src/stores/postgres/database.js";
import type { RedisClient } from "../../src/stores/redis/client.js";
import { createServices } from "../../src/wiring.js";
import { disagreement } from "./agreement.js";
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
