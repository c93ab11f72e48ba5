// What a persist batch asks of Redis after its commit: the targets' rebuild
// marks, the authors' credits and the likers' lists of every change in one
// script call per node each, not one per change.
import { Cluster } from "ioredis";
import { describe, expect, it } from "vitest";
import type { LikeableTarget, RelationChange, Target } from "../../../src/domain/model/index.js";
import { createChangePersistence } from "../../../src/domain/persistence.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import { createPersistStore } from "../../../src/stores/postgres/persist-store.js";
import { createSnapshotStore } from "../../../src/stores/postgres/snapshot-store.js";
import { isRedisUnavailable, type RedisClient } from "../../../src/stores/redis/client.js";
import { createCounterStore } from "../../../src/stores/redis/counter-store.js";
import { createRedisKeys } from "../../../src/stores/redis/keys.js";
import { createListStore } from "../../../src/stores/redis/list-store.js";
import { createRankingStore } from "../../../src/stores/redis/ranking-store.js";
import { createRebuildStore } from "../../../src/stores/redis/rebuild-store.js";
import { createUsers, testConfig } from "../../support/env.js";
import { createPosts, useStores } from "../../support/stores.js";

let db: Database;
let redis: RedisClient;

useStores((s) => ({ db, redis } = s));

/** Script calls Redis ran so far, on every master of a cluster. */
async function scriptCalls(): Promise<number> {
  const servers = redis instanceof Cluster ? redis.nodes("master") : [redis];
  const stats = await Promise.all(servers.map((s) => s.info("commandstats")));
  return stats.reduce(
    (n, text) => n + Number(/^cmdstat_evalsha:calls=(\d+)/m.exec(text)?.[1] ?? 0) + Number(/^cmdstat_eval:calls=(\d+)/m.exec(text)?.[1] ?? 0),
    0,
  );
}

describe("a persist batch", () => {
  it("when 40 users each like a post of a different author, then rebuild marks, credits and lists take one script call per node each, and every one of them moved", async () => {
    const config = testConfig();
    const keys = createRedisKeys(config.redisPartitions);
    const counters = createCounterStore(redis, keys);
    const lists = createListStore(redis, keys);
    const persistence = createChangePersistence({
      persistStore: createPersistStore(db),
      rebuilds: createRebuildStore(redis, keys),
      snapshots: createSnapshotStore(db),
      counters,
      lists,
      rankings: createRankingStore(redis, keys),
      isRedisUnavailable,
    });
    const authors = await createUsers(db, config, 40);
    const likers = await createUsers(db, config, 40);
    const posts: LikeableTarget[] = [];
    for (const author of authors) {
      await counters.init({ type: "user", id: author.id }, { likesReceived: 0 });
      posts.push(...(await createPosts({ db, redis }, config, author.id, 1)));
    }
    // Each like the version its post last stamped in Redis, as if Redis stamped it (a newer one would be one Redis lost).
    const held = await createRebuildStore(redis, keys).rebuilds(posts);
    const likes: RelationChange[] = posts.map((post, i) => ({
      kind: "relation",
      relation: "like",
      target: post,
      userId: (likers[i] as { id: bigint }).id,
      authorId: (authors[i] as { id: bigint }).id,
      member: true,
      version: held[i]?.version ?? 0n,
      at: new Date(),
    }));

    const before = await scriptCalls();
    await persistence.persist(likes);
    const calls = (await scriptCalls()) - before;

    const nodes = redis instanceof Cluster ? redis.nodes("master").length : 1;
    // Marks, credits and lists one call per node each; the ranking one per time bucket and one for all time.
    expect(calls).toBeLessThanOrEqual(3 * nodes + 4);
    const credited = await counters.read(authors.map((a): Target => ({ type: "user", id: a.id })));
    expect(credited.map((c) => c?.likesReceived)).toEqual(authors.map(() => 1));
    const recorded = await Promise.all(likers.map((l) => lists.recent("like", l.id)));
    expect(recorded.map((r, i) => r.get((posts[i] as LikeableTarget).id)?.member)).toEqual(likers.map(() => true));
  });
});
