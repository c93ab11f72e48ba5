import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LikeChange } from "../../../../src/domain/model.js";
import { coalesce } from "../../../../src/domain/persistence.js";
import type { Database } from "../../../../src/stores/postgres/database.js";
import { createLikeHistoryStore } from "../../../../src/stores/postgres/like-history-store.js";
import { openDatabase } from "../../../support/env.js";

let db: Database;
let nextTarget = BigInt(Date.now()) * 1000n;
let version = 1_000n;
const change = (targetId: bigint, userId: bigint, liked: boolean, authorId: bigint | null = 900n): LikeChange => ({
  target: { type: "post", id: targetId },
  userId,
  authorId,
  liked,
  version: version++,
  at: new Date(),
});

async function state(targetId: bigint) {
  const rows = await db.like.findMany({ where: { targetType: "post", targetId }, orderBy: { userId: "asc" } });
  const counter = await db.counter.findUnique({ where: { targetType_targetId_name: { targetType: "post", targetId, name: "like" } } });
  return { users: rows.map((r) => r.userId), count: Number(counter?.value ?? 0n) };
}

beforeAll(() => {
  db = openDatabase();
});
afterAll(async () => {
  await db.$disconnect();
});

describe("persisting like changes", () => {
  it("when the same batch is applied twice (a redelivery), then the second changes nothing", async () => {
    const store = createLikeHistoryStore(db);
    const t = nextTarget++;
    const batch = [change(t, 1n, true), change(t, 2n, true), change(t, 3n, true)];
    expect(await store.apply(batch)).toMatchObject({ inserted: 3, deleted: 0, superseded: 0 });
    expect(await store.apply(batch)).toMatchObject({ inserted: 0, deleted: 0, superseded: 3, passed: [] });
    expect(await state(t)).toEqual({ users: [1n, 2n, 3n], count: 3 });
  });

  it("when a like and its unlike arrive in one batch, then coalescing keeps the unlike", async () => {
    const store = createLikeHistoryStore(db);
    const t = nextTarget++;
    const like = change(t, 7n, true);
    const unlike = change(t, 7n, false);
    await store.apply(coalesce([unlike, like]));
    expect(await state(t)).toEqual({ users: [], count: 0 });
  });

  it("when the unlike arrives in an earlier batch than its like, then the late like is superseded", async () => {
    const store = createLikeHistoryStore(db);
    const t = nextTarget++;
    const like = change(t, 8n, true);
    const unlike = change(t, 8n, false);
    await store.apply([unlike]);
    expect(await store.apply([like])).toMatchObject({ inserted: 0, superseded: 1 });
    expect(await state(t)).toEqual({ users: [], count: 0 });
  });

  it("when like and unlike come in separate batches in order, then the row comes and goes and counts follow", async () => {
    const store = createLikeHistoryStore(db);
    const t = nextTarget++;
    await store.apply([change(t, 9n, true), change(t, 10n, true)]);
    expect(await state(t)).toEqual({ users: [9n, 10n], count: 2 });
    await store.apply([change(t, 9n, false)]);
    expect(await state(t)).toEqual({ users: [10n], count: 1 });
    const author = await db.counter.findUnique({ where: { targetType_targetId_name: { targetType: "user", targetId: 900n, name: "likesReceived" } } });
    expect(author?.value).toBeGreaterThanOrEqual(1n);
  });

  it("when batches for the same pairs are applied concurrently in any order, then the newest version wins", async () => {
    const store = createLikeHistoryStore(db);
    const t = nextTarget++;
    const history = Array.from({ length: 40 }, (_, i) => change(t, BigInt(1 + (i % 5)), i % 3 !== 0));
    const shuffled = [...history].sort(() => Math.random() - 0.5);
    const batches = [shuffled.slice(0, 13), shuffled.slice(13, 27), shuffled.slice(27)];
    await Promise.all(batches.map((b) => store.apply(coalesce(b))));
    const expected = coalesce(history).filter((c) => c.liked).map((c) => c.userId).sort((a, b) => (a < b ? -1 : 1));
    expect(await state(t)).toEqual({ users: expected, count: expected.length });
  });
});
