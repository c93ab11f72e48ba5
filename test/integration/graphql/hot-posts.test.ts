// hotPosts through GraphQL with the pipeline running: likes and unlikes of real
// users move the ranking within the pipeline's lag, and bad arguments are the
// caller's errors.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../../src/stores/postgres/database.js";
import type { RedisClient } from "../../../src/stores/redis/client.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { codesOf, createUsers, dataOf, itOnSingle, type TestUser } from "../../support/env.js";
import { eventually, startTestPipeline, type TestPipeline } from "../../support/pipeline.js";
import { createPosts, useStores } from "../../support/stores.js";

let db: Database;
let redis: RedisClient;
let author: TestUser;
let api: TestApi;
let pipeline: TestPipeline;

// The ranking spans every post: the file starts from empty tables and an empty Redis.
useStores((s) => ({ db, redis, author } = s), { fresh: true });
beforeAll(async () => {
  api = await startTestApi({ PERSIST_LINGER_MS: "200" });
  pipeline = await startTestPipeline(api.config);
});
afterAll(async () => {
  await pipeline?.stop();
  await api?.close();
});

type Hot = { hotPosts: { id: string; title: string; counts: { likes: number } }[] };
const hotPosts = `query($window: HotWindow, $first: Int) { hotPosts(window: $window, first: $first) { id title counts { likes } } }`;
const ranked = async (window: string) => dataOf(await api.gql<Hot>(hotPosts, { window, first: 10 })).hotPosts.map((p) => `${p.id}:${p.counts.likes}`);

describe("hotPosts", () => {
  it("when users like and unlike posts, then DAY and ALL follow within a few seconds, with live counts", async () => {
    const posts = await createPosts({ db, redis }, api.config, author.id, 3);
    const [p0, p1, p2] = posts.map((p) => p.id.toString()) as [string, string, string];
    const users = await createUsers(db, api.config, 3);
    const like = (postId: string, user: TestUser, unlike = false) =>
      api.gql(`mutation($id: ID!) { ${unlike ? "unlikePost" : "likePost"}(postId: $id) { changed } }`, { id: postId }, user.token).then(dataOf);
    await Promise.all([...users.map((u) => like(p0, u)), ...users.slice(0, 2).map((u) => like(p1, u)), like(p2, users[0] as TestUser)]);
    const expected = [`${p0}:3`, `${p1}:2`, `${p2}:1`];
    await eventually(
      async () => (await ranked("DAY")).join() === expected.join() && (await ranked("ALL")).join() === expected.join(),
      15_000,
      async () => `DAY ${(await ranked("DAY")).join()}, ALL ${(await ranked("ALL")).join()}`,
    );
    expect(await ranked("HOUR")).toEqual(expected);

    await Promise.all(users.map((u) => like(p0, u, true)));
    await like(p2, users[1] as TestUser);
    // p0 has no likes left and leaves; p1 and p2 tie at 2, the newer post first.
    const after = [`${p2}:2`, `${p1}:2`];
    await eventually(
      async () => (await ranked("DAY")).join() === after.join() && (await ranked("ALL")).join() === after.join(),
      15_000,
      async () => `DAY ${(await ranked("DAY")).join()}, ALL ${(await ranked("ALL")).join()}`,
    );
    const page = dataOf(await api.gql<Hot>(`{ hotPosts(first: 1) { id title } }`));
    expect(page.hotPosts).toEqual([{ id: p2, title: "post 2" }]);
  });

  itOnSingle("when first is outside 1..100 or the window is unknown, then the caller's error answers, never an internal one", async () => {
    for (const first of [0, -1, 101]) {
      const response = await api.gql(hotPosts, { window: "DAY", first });
      expect(codesOf(response)).toEqual(["BAD_USER_INPUT"]);
      expect(response.errors?.[0]?.message).toMatch(/first must be an integer from 1 to 100/);
    }
    // A page past 100 is the argument's error whatever its size: it is priced as a page at most.
    expect(codesOf(await api.gql(hotPosts, { window: "DAY", first: 1_000_000 }))).toEqual(["BAD_USER_INPUT"]);
    expect(codesOf(await api.gql(hotPosts, { window: "YEAR", first: 5 }))).toEqual(["BAD_USER_INPUT"]);
    expect(codesOf(await api.gql(`{ hotPosts(window: YEAR) { id } }`))).toEqual(["GRAPHQL_VALIDATION_FAILED"]);
    expect(codesOf(await api.gql(`{ hotPosts(window: null) { id } }`))).toEqual(["BAD_USER_INPUT"]);
    expect(codesOf(await api.gql(`{ hotPosts(first: null) { id } }`))).toEqual(["BAD_USER_INPUT"]);
    expect(codesOf(await api.gql(`{ hotPosts(first: 5000000000) { id } }`))).not.toContain("INTERNAL_SERVER_ERROR");
  });
});
