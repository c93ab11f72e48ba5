// Counts kept in an API process's memory, seen through GraphQL: how fast another
// process's change reaches them, a viewer's own change through another process,
// and the bound on what is held.
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../../src/stores/postgres/database.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { createUsers, dataOf, openDatabase, type TestUser } from "../../support/env.js";

let a: TestApi;
let b: TestApi;
let db: Database;
let author: TestUser;

const likePost = `mutation($id: ID!) { likePost(postId: $id) { changed } }`;
const counts = `query($id: ID!) { post(id: $id) { counts { likes } } }`;
const viewed = `query($id: ID!) { post(id: $id) { counts { likes } viewerHasLiked } }`;
type Counts = { post: { counts: { likes: number }; viewerHasLiked?: boolean } };

async function createPost(api: TestApi): Promise<string> {
  return dataOf(await api.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "t", body: "b") { id } }`, {}, author.token)).createPost.id;
}

/** Until the API's listeners of counter writes have confirmed what they heard, it reads Redis for every count. */
async function servable(api: TestApi): Promise<void> {
  for (let i = 0; i < 200 && !api.hotCounts?.servable(); i++) await sleep(10);
  expect(api.hotCounts?.servable()).toBe(true);
}

beforeAll(async () => {
  a = await startTestApi();
  b = await startTestApi();
  db = openDatabase(a.config);
  author = (await createUsers(db, a.config, 1))[0] as TestUser;
});
afterAll(async () => {
  await a.close();
  await b.close();
  await db.$disconnect();
});

describe("counts kept in memory", () => {
  it("when a post is liked through another API process, then a count this one holds shows it within 100 ms", async () => {
    const [liker] = (await createUsers(db, a.config, 1)) as [TestUser];
    const id = await createPost(a);
    await servable(b);
    await b.gql(counts, { id });
    const hitsBefore = b.hotCounts?.stats().hits ?? 0;
    expect(dataOf(await b.gql<Counts>(counts, { id })).post.counts.likes).toBe(0);
    // The second read was answered from memory.
    expect(b.hotCounts?.stats().hits).toBeGreaterThan(hitsBefore);

    await a.gql(likePost, { id }, liker.token);
    const answeredAt = performance.now();
    const reads: { startedMs: number; likes: number }[] = [];
    while (performance.now() - answeredAt < 250) {
      const startedMs = performance.now() - answeredAt;
      reads.push({ startedMs, likes: dataOf(await b.gql<Counts>(counts, { id })).post.counts.likes });
    }
    // Every read that started 100 ms or more after the like was answered shows it.
    expect(reads.filter((r) => r.startedMs >= 100).every((r) => r.likes === 1)).toBe(true);
    expect(reads.at(-1)?.likes).toBe(1);
  });

  it("when a viewer likes a post through one API process, then their next read through another shows the like and its count at once", async () => {
    const [viewer] = (await createUsers(db, a.config, 1)) as [TestUser];
    for (let round = 0; round < 20; round++) {
      const id = await createPost(a);
      await servable(b);
      // Held by the second process before the like.
      await b.gql(viewed, { id }, viewer.token);
      expect(b.hotCounts?.peek({ type: "post", id: BigInt(id) })).toBeDefined();
      await a.gql(likePost, { id }, viewer.token);
      expect(dataOf(await b.gql<Counts>(viewed, { id }, viewer.token)).post).toEqual({ counts: { likes: 1 }, viewerHasLiked: true });
    }
  });

  it("when one process reads more posts than it may hold, then it holds no more than its bound and still answers every one", async () => {
    const small = await startTestApi({ HOT_COUNTS_TARGETS: "20" });
    try {
      const ids: string[] = [];
      for (let i = 0; i < 60; i++) ids.push(await createPost(a));
      await servable(small);
      for (let round = 0; round < 2; round++) {
        for (let i = 0; i < ids.length; i += 30) {
          const page = ids.slice(i, i + 30);
          const posts = dataOf(
            await small.gql<{ posts: { id: string; counts: { likes: number } }[] }>(`query($ids: [ID!]!) { posts(ids: $ids) { id counts { likes } } }`, {
              ids: page,
            }),
          ).posts;
          expect(posts.map((p) => p.id)).toEqual(page);
          expect(small.hotCounts?.stats().entries).toBeLessThanOrEqual(20);
        }
      }
      expect(small.hotCounts?.stats().entries).toBe(20);
    } finally {
      await small.close();
    }
  });
});
