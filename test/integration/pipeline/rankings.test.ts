// The hot ranking follows what PostgreSQL committed: likes and unlikes per time
// bucket and in all, mirrored after each batch, summed per window, safe to resend
// and rebuilt from PostgreSQL when Redis lost it.
import { beforeEach, describe, expect, it } from "vitest";
import type { HotWindow, LikeableTarget, RelationChange } from "../../../src/domain/model/index.js";
import { createChangePersistence, RedisFollowUpError } from "../../../src/domain/persistence.js";
import type { RankingStore } from "../../../src/domain/ports/index.js";
import { createRankingRefresher, createRankingService } from "../../../src/domain/rankings.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import { createRankingSource } from "../../../src/stores/postgres/ranking-source.js";
import { createPersistStore } from "../../../src/stores/postgres/persist-store.js";
import { createSnapshotStore } from "../../../src/stores/postgres/snapshot-store.js";
import { isRedisUnavailable, type RedisClient } from "../../../src/stores/redis/client.js";
import { createCounterStore } from "../../../src/stores/redis/counter-store.js";
import { createRedisKeys } from "../../../src/stores/redis/keys.js";
import { createLease } from "../../../src/stores/redis/lease-store.js";
import { createListStore } from "../../../src/stores/redis/list-store.js";
import { createRankingStore } from "../../../src/stores/redis/ranking-store.js";
import { createRebuildStore } from "../../../src/stores/redis/rebuild-store.js";
import { emptyRedis, itOnSingle, testConfig, type TestUser } from "../../support/env.js";
import { createPosts, useStores } from "../../support/stores.js";

let db: Database;
let redis: RedisClient;
let author: TestUser;

// The ranking spans every post: each test starts with no likes and an empty Redis.
useStores((s) => ({ db, redis, author } = s), { fresh: true });
beforeEach(async () => {
  await db.$executeRaw`TRUNCATE likes, relation_versions, counters, like_buckets`;
  await emptyRedis(redis);
});

const minute = 60_000;
const hour = 60 * minute;
const day = 24 * hour;

/** The ranking's parts on the test stores, as compose() wires them for the pipeline. */
function ranking() {
  const config = testConfig();
  const keys = createRedisKeys(config.redisPartitions);
  const store = createRankingStore(redis, keys);
  let failures = 0;
  // A Redis that stops answering for the ranking's writes, as a stalled one would.
  const flaky: Pick<RankingStore, "mirror"> = {
    mirror: (ranked, nowMs) => (failures-- > 0 ? Promise.reject(new Error("Command timed out")) : store.mirror(ranked, nowMs)),
  };
  const persistence = createChangePersistence({
    persistStore: createPersistStore(db),
    rebuilds: createRebuildStore(redis, keys),
    snapshots: createSnapshotStore(db),
    counters: createCounterStore(redis, keys),
    lists: createListStore(redis, keys),
    rankings: flaky,
    isRedisUnavailable: (error) => isRedisUnavailable(error) || (error as Error).message === "Command timed out",
  });
  const refresher = createRankingRefresher({ store, source: createRankingSource(db), lease: createLease(redis, keys.ranking.lock) });
  const service = createRankingService({ store, cacheMs: 0 });
  const top = async (window: HotWindow, first = 100) => service.hotPosts(window, first);
  const all = async (): Promise<Record<HotWindow, bigint[]>> => {
    const [HOUR, DAY, WEEK, ALL] = await Promise.all((["HOUR", "DAY", "WEEK", "ALL"] as const).map((w) => top(w)));
    return { HOUR: HOUR ?? [], DAY: DAY ?? [], WEEK: WEEK ?? [], ALL: ALL ?? [] };
  };
  /** The next `n` ranking writes after a commit fail as if Redis stalled. */
  const failNextMirrors = (n: number) => void (failures = n);
  return { store, persistence, refresher, service, top, all, failNextMirrors };
}

let version = BigInt(Date.now()) * 1000n;
const change = (post: LikeableTarget, userId: bigint, member: boolean, atMs: number): RelationChange => ({
  kind: "relation",
  relation: "like",
  target: post,
  userId,
  authorId: author.id,
  member,
  version: version++,
  at: new Date(atMs),
});

/**
 * Five posts liked in different buckets, then some likes taken back:
 * p1: 3 likes 2 hours ago; p2: 2 likes a minute ago and 1 two hours ago, unliked;
 * p3: 4 likes 3 days ago, one unliked; p4: 1 like 10 days ago; p5: 3 likes a
 * minute ago, one unliked. Each list: post index, likes, and when.
 */
async function burst() {
  const posts = await createPosts({ db, redis }, testConfig(), author.id, 5);
  const [p1, p2, p3, p4, p5] = posts as [LikeableTarget, LikeableTarget, LikeableTarget, LikeableTarget, LikeableTarget];
  const now = Date.now();
  let user = 1n;
  const likes: RelationChange[] = [];
  const like = (post: LikeableTarget, n: number, atMs: number) => Array.from({ length: n }, () => change(post, user++, true, atMs));
  likes.push(...like(p1, 3, now - 2 * hour), ...like(p2, 2, now - minute));
  const oldLikeOfP2 = like(p2, 1, now - 2 * hour);
  const p3Likes = like(p3, 4, now - 3 * day);
  const p5Likes = like(p5, 3, now - minute);
  likes.push(...oldLikeOfP2, ...p3Likes, ...like(p4, 1, now - 10 * day), ...p5Likes);
  const unlikes = [oldLikeOfP2[0], p3Likes[0], p5Likes[0]].map((l) =>
    change((l as RelationChange).target as LikeableTarget, (l as RelationChange).userId, false, now),
  );
  return { posts: { p1, p2, p3, p4, p5 }, likes, unlikes };
}

const ids = (...posts: LikeableTarget[]) => posts.map((p) => p.id);

describe("hot ranking", () => {
  it("when likes and unlikes land in different buckets, then each window ranks by the likes standing in it, ties newest first", async () => {
    const { persistence, refresher, top, all, service } = ranking();
    expect(await refresher.refresh()).toBe("rebuilt");
    const {
      posts: { p1, p2, p3, p4, p5 },
      likes,
      unlikes,
    } = await burst();
    await persistence.persist(likes);
    expect(await refresher.refresh()).toBe("refreshed");
    // p1, p2 and p5 each hold 3 likes of the last day: newest post first.
    expect(await all()).toEqual({
      HOUR: ids(p5, p2),
      DAY: ids(p5, p2, p1),
      WEEK: ids(p3, p5, p2, p1),
      ALL: ids(p3, p5, p2, p1, p4),
    });

    await persistence.persist(unlikes);
    await refresher.refresh();
    // p2's unliked like was 2 hours old: HOUR keeps its 2, DAY and WEEK lose 1; p5's like was given and taken back within the hour.
    expect(await all()).toEqual({
      HOUR: ids(p5, p2),
      DAY: ids(p1, p5, p2),
      WEEK: ids(p3, p1, p5, p2),
      ALL: ids(p3, p1, p5, p2, p4),
    });
    expect(await top("WEEK", 2)).toEqual(ids(p3, p1));
    expect(await top("ALL", 1)).toEqual(ids(p3));
    for (const first of [0, -1, 101, 1.5]) await expect(service.hotPosts("DAY", first)).rejects.toMatchObject({ code: "BAD_USER_INPUT" });
  });

  it("when a batch is persisted twice, or again after its ranking write failed, or an older write comes last, then the ranking stays exact", async () => {
    const flaky = ranking();
    await flaky.refresher.refresh();
    const {
      posts: { p1, p2, p3, p4, p5 },
      likes,
      unlikes,
    } = await burst();
    const first = await flaky.persistence.persist(likes).then((a) => a.ranked);
    const beforeUnlikes = { HOUR: ids(p5, p2), DAY: ids(p5, p2, p1), WEEK: ids(p3, p5, p2, p1), ALL: ids(p3, p5, p2, p1, p4) };
    // The first delivery's ranking write fails after the commit: the batch is retried, and its redelivery mirrors what is committed.
    flaky.failNextMirrors(1);
    await expect(flaky.persistence.persist(unlikes)).rejects.toBeInstanceOf(RedisFollowUpError);
    await flaky.refresher.refresh();
    expect(await flaky.all()).toEqual(beforeUnlikes);
    const again = await flaky.persistence.persist(unlikes);
    expect(again.deleted).toBe(0);
    await flaky.persistence.persist(unlikes);
    await flaky.persistence.persist(likes);
    await flaky.refresher.refresh();
    const after = { HOUR: ids(p5, p2), DAY: ids(p1, p5, p2), WEEK: ids(p3, p1, p5, p2), ALL: ids(p3, p1, p5, p2, p4) };
    expect(await flaky.all()).toEqual(after);

    // The first batch's values arrive again, late: older sequence numbers move nothing.
    await flaky.store.mirror(first, Date.now());
    await flaky.refresher.refresh();
    expect(await flaky.all()).toEqual(after);
    const scores = await redis.zrange(createRedisKeys(testConfig().redisPartitions).ranking.all.ranking, "0", "-1", "WITHSCORES");
    expect(
      scores
        .filter((_, i) => i % 2 === 1)
        .map(Number)
        .sort(),
    ).toEqual([1, 2, 2, 3, 3]);
  });

  it("when Redis is flushed, then the refresher rebuilds the ranking from PostgreSQL in the same order, and a late older write does not move it", async () => {
    const { persistence, refresher, all, store } = ranking();
    await refresher.refresh();
    const { likes, unlikes } = await burst();
    const early = (await persistence.persist(likes)).ranked;
    await persistence.persist(unlikes);
    await refresher.refresh();
    const before = await all();
    expect(before.WEEK).toHaveLength(4);

    await emptyRedis(redis);
    expect(await all()).toEqual({ HOUR: [], DAY: [], WEEK: [], ALL: [] });
    expect(await refresher.refresh()).toBe("rebuilt");
    expect(await all()).toEqual(before);
    await store.mirror(early, Date.now());
    await refresher.refresh();
    expect(await all()).toEqual(before);
  });

  it("when a rebuild reads PostgreSQL before a batch commits and writes after the batch's mirror, then the batch's values stay", async () => {
    const { persistence, refresher, all, store } = ranking();
    const source = createRankingSource(db);
    await refresher.refresh();
    const {
      posts: { p1, p2, p3, p4, p5 },
      likes,
      unlikes,
    } = await burst();
    await persistence.persist(likes);
    await emptyRedis(redis);
    const slowRebuild = await source.best(Date.now(), 1_000);
    await persistence.persist(unlikes);
    await store.mirror(slowRebuild, Date.now());
    await store.markRebuilt();
    await refresher.refresh();
    // The unliked posts keep their lower counts; the rebuild only added what the batch did not write.
    expect(await all()).toEqual({ HOUR: ids(p5, p2), DAY: ids(p1, p5, p2), WEEK: ids(p3, p1, p5, p2), ALL: ids(p3, p1, p5, p2, p4) });
  });

  itOnSingle("when PostgreSQL's bucket rows are compared with the likes, then they count the likes standing per bucket", async () => {
    const { persistence } = ranking();
    const {
      posts: { p2 },
      likes,
      unlikes,
    } = await burst();
    await persistence.persist(likes);
    await persistence.persist(unlikes);
    const rows = await db.$queryRaw<{ span: string; likes: number }[]>`SELECT span, likes FROM like_buckets WHERE target_id = ${p2.id} ORDER BY span, bucket`;
    // p2: the two likes of a minute ago in one bucket of each span; the unliked one's bucket at 0 (or the same bucket for h6).
    expect(rows.reduce((n, r) => n + r.likes, 0)).toBe(3 * 2);
    for (const span of ["m5", "h1", "h6"]) expect(rows.filter((r) => r.span === span && r.likes > 0).reduce((n, r) => n + r.likes, 0)).toBe(2);
  });
});
