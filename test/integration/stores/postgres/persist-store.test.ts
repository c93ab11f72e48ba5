import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Relation, RelationChange, Target, ViewChange } from "../../../../src/domain/model/index.js";
import { coalesce } from "../../../../src/domain/persistence.js";
import type { Database } from "../../../../src/stores/postgres/database.js";
import { createMemberPageStore } from "../../../../src/stores/postgres/member-page-store.js";
import { createPersistStore } from "../../../../src/stores/postgres/persist-store.js";
import { versionOf } from "../../../../src/stores/versions.js";
import { databaseMembers } from "../../../support/agreement.js";
import { openDatabase } from "../../../support/env.js";

let db: Database;
let nextTarget = BigInt(Date.now()) * 1000n;
let version = 1_000n;
const change = (targetId: bigint, userId: bigint, member: boolean, authorId: bigint | null = 900n, relation: Relation = "like"): RelationChange => ({
  kind: "relation",
  relation,
  target: { type: relation === "follow" ? "user" : "post", id: targetId },
  userId,
  authorId: relation === "follow" ? null : authorId,
  member,
  version: version++,
  at: new Date(),
});

async function state(targetId: bigint, relation: Relation = "like") {
  const target: Target = { type: relation === "follow" ? "user" : "post", id: targetId };
  const name = relation === "follow" ? "followers" : relation;
  const counter = await db.counter.findUnique({ where: { targetType_targetId_name: { targetType: target.type, targetId, name } } });
  const users = (await databaseMembers(db, target, relation)).map(BigInt).sort((a, b) => (a < b ? -1 : 1));
  return { users, count: Number(counter?.value ?? 0n) };
}

const counterOf = async (type: string, id: bigint, name: string) =>
  db.counter.findUnique({ where: { targetType_targetId_name: { targetType: type, targetId: id, name } } });

beforeAll(() => {
  db = openDatabase();
});
afterAll(async () => {
  await db.$disconnect();
});

describe("persisting membership changes", () => {
  it("when the same batch is applied twice (a redelivery), then the second changes nothing but answers the same credits", async () => {
    const store = createPersistStore(db);
    const t = nextTarget++;
    const author = nextTarget++;
    const batch = [change(t, 1n, true, author), change(t, 2n, true, author), change(t, 3n, true, author)];
    const first = await store.apply(batch);
    expect(first).toMatchObject({ inserted: 3, deleted: 0, superseded: 0 });
    const again = await store.apply(batch);
    expect(again).toMatchObject({ inserted: 0, deleted: 0, superseded: 3, passed: [] });
    expect(await state(t)).toEqual({ users: [1n, 2n, 3n], count: 3 });
    // The author's credit as committed, with its sequence number: a redelivery mirrors the same value again.
    expect(first.credits).toEqual([{ target: { type: "user", id: author }, name: "likesReceived", value: 3, seq: 1n }]);
    expect(again.credits).toEqual(first.credits);
    expect(again.current).toHaveLength(3);
  });

  it("when a like and its unlike arrive in one batch, then coalescing keeps the unlike", async () => {
    const store = createPersistStore(db);
    const t = nextTarget++;
    const like = change(t, 7n, true);
    const unlike = change(t, 7n, false);
    await store.apply(coalesce([unlike, like]));
    expect(await state(t)).toEqual({ users: [], count: 0 });
  });

  it("when the unlike arrives in an earlier batch than its like, then the late like is superseded", async () => {
    const store = createPersistStore(db);
    const t = nextTarget++;
    const like = change(t, 8n, true);
    const unlike = change(t, 8n, false);
    await store.apply([unlike]);
    expect(await store.apply([like])).toMatchObject({ inserted: 0, superseded: 1 });
    expect(await state(t)).toEqual({ users: [], count: 0 });
  });

  it("when like and unlike come in separate batches in order, then the row comes and goes and counts follow", async () => {
    const store = createPersistStore(db);
    const t = nextTarget++;
    await store.apply([change(t, 9n, true), change(t, 10n, true)]);
    expect(await state(t)).toEqual({ users: [9n, 10n], count: 2 });
    await store.apply([change(t, 9n, false)]);
    expect(await state(t)).toEqual({ users: [10n], count: 1 });
    expect((await counterOf("user", 900n, "likesReceived"))?.value).toBeGreaterThanOrEqual(1n);
  });

  it("when one user likes and collects the same post in one batch, then each relation keeps its own row, gate and counter", async () => {
    const store = createPersistStore(db);
    const t = nextTarget++;
    const author = nextTarget++;
    const applied = await store.apply([change(t, 4n, true, author), change(t, 4n, true, author, "collect"), change(t, 5n, true, author, "collect")]);
    expect(applied).toMatchObject({ inserted: 3, superseded: 0 });
    expect(await state(t)).toEqual({ users: [4n], count: 1 });
    expect(await state(t, "collect")).toEqual({ users: [4n, 5n], count: 2 });
    expect(applied.credits.map((c) => [c.name, c.value]).sort()).toEqual([
      ["collectsReceived", 2],
      ["likesReceived", 1],
    ]);
    await store.apply([change(t, 4n, false, author, "collect")]);
    expect(await state(t, "collect")).toEqual({ users: [5n], count: 1 });
    expect(Number((await counterOf("user", author, "collectsReceived"))?.value)).toBe(1);
  });

  it("when users follow and unfollow, then follows hold the pairs, the followee counts followers and each follower following", async () => {
    const store = createPersistStore(db);
    const followee = nextTarget++;
    const [a, b] = [nextTarget++, nextTarget++];
    const applied = await store.apply([change(followee, a, true, null, "follow"), change(followee, b, true, null, "follow")]);
    expect(await state(followee, "follow")).toEqual({ users: [a, b], count: 2 });
    expect(applied.credits.map((c) => [c.target.id, c.name, c.value]).sort()).toEqual(
      [
        [a, "following", 1],
        [b, "following", 1],
      ].sort(),
    );
    await store.apply([change(followee, a, false, null, "follow")]);
    expect(await state(followee, "follow")).toEqual({ users: [b], count: 1 });
    expect(Number((await counterOf("user", a, "following"))?.value)).toBe(0);
    expect(Number((await counterOf("user", b, "following"))?.value)).toBe(1);
  });

  it("when batches for the same pairs are applied concurrently in any order, then the newest version wins", async () => {
    const store = createPersistStore(db);
    const t = nextTarget++;
    const history = Array.from({ length: 40 }, (_, i) => change(t, BigInt(1 + (i % 5)), i % 3 !== 0));
    const shuffled = [...history].sort(() => Math.random() - 0.5);
    const batches = [shuffled.slice(0, 13), shuffled.slice(13, 27), shuffled.slice(27)];
    await Promise.all(batches.map((b) => store.apply(coalesce(b))));
    const expected = coalesce(history)
      .flatMap((c) => (c.kind === "relation" && c.member ? [c.userId] : []))
      .sort((a, b) => (a < b ? -1 : 1));
    expect(await state(t)).toEqual({ users: expected, count: expected.length });
  });
});

describe("persisting views", () => {
  const views = (targetId: bigint, epoch: bigint, count: number, total: number): ViewChange => ({
    kind: "views",
    target: { type: "post", id: targetId },
    count,
    total,
    version: versionOf(epoch, version++),
    at: new Date(),
  });
  const read = async (t: bigint) => Number((await counterOf("post", t, "read"))?.value ?? 0);

  it("when flushes arrive repeated, reordered and spread over batches, then each view counts once", async () => {
    const store = createPersistStore(db);
    const t = nextTarget++;
    const flushes = [views(t, 0n, 5, 5), views(t, 0n, 3, 8), views(t, 0n, 4, 12)];
    await store.apply([flushes[1] as ViewChange]);
    expect(await read(t)).toBe(8);
    await store.apply([flushes[0] as ViewChange, flushes[2] as ViewChange]);
    await store.apply(flushes);
    expect(await read(t)).toBe(12);
  });

  it("when views of two epochs arrive (the post was rebuilt between), then each epoch adds its own", async () => {
    const store = createPersistStore(db);
    const t = nextTarget++;
    const applied = await store.apply([views(t, 1n, 10, 10), views(t, 2n, 2, 2), views(t, 1n, 1, 11)]);
    expect(await read(t)).toBe(13);
    expect(applied.views.map((v) => [v.epoch, v.total]).sort()).toEqual([
      [1n, 11],
      [2n, 2],
    ]);
    expect(applied.deltas).toEqual([{ target: { type: "post", id: t }, name: "read", delta: 13 }]);
  });

  it("when concurrent batches bring one post's views, then none is added twice", async () => {
    const store = createPersistStore(db);
    const t = nextTarget++;
    const flushes = Array.from({ length: 30 }, (_, i) => views(t, 0n, 1, i + 1));
    const shuffled = [...flushes].sort(() => Math.random() - 0.5);
    await Promise.all([shuffled.slice(0, 10), shuffled.slice(10, 20), shuffled.slice(20)].map((b) => store.apply(b)));
    expect(await read(t)).toBe(30);
  });
});

describe("pages of members and memberships", () => {
  it("when a user likes posts over time, then their memberships page newest first, skipping what is asked, with cursors", async () => {
    const store = createPersistStore(db);
    const pages = createMemberPageStore(db);
    const user = nextTarget++;
    const posts = [nextTarget++, nextTarget++, nextTarget++];
    for (const [i, post] of posts.entries()) {
      await store.apply([{ ...change(post, user, true), at: new Date(Date.UTC(2026, 0, 1, 0, 0, i)) }]);
    }
    const page = (after: { at: Date; targetId: bigint } | null, skip: bigint[] = []) =>
      pages.memberships([{ relation: "like", targetType: "post", userId: user, limit: 2, after, skip: new Set(skip) }]).then(([p]) => p ?? []);
    const first = await page(null);
    expect(first.map((p) => p.targetId)).toEqual([posts[2], posts[1]]);
    expect((await page(first[1] ?? null)).map((p) => p.targetId)).toEqual([posts[0]]);
    expect((await page(null, [posts[2] as bigint])).map((p) => p.targetId)).toEqual([posts[1], posts[0]]);
    const [followers] = await pages.members([{ relation: "like", target: { type: "post", id: posts[0] as bigint }, limit: 5, after: null }]);
    expect(followers?.map((m) => m.userId)).toEqual([user]);
  });
});
