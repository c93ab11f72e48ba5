// An API process knows which users exist from its own memory: those that existed
// when it started (read in pages at start) and those registered since (announced
// over Redis by whichever process registered them). A signed-in request of a user
// the process never saw sends no SQL; anything it missed costs one lookup.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTokenService } from "../../../src/graphql/tokens.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { codesOf, createUsers, dataOf, openDatabase, type TestUser } from "../../support/env.js";
import { eventually } from "../../support/pipeline.js";

let api: TestApi;
let db: Database;
let postId: string;

const viewer = `{ viewer { id } }`;
const likePost = `mutation($id: ID!) { likePost(postId: $id) { changed post { counts { likes } } } }`;
const servePost = `query($id: ID!) { post(id: $id) { id title counts { likes } } }`;
type LikeData = { likePost: { changed: boolean; post: { counts: { likes: number } } } };

beforeAll(async () => {
  api = await startTestApi();
  db = openDatabase(api.config);
  const [author] = await createUsers(db, api.config, 1);
  postId = dataOf(await api.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "t", body: "b") { id } }`, {}, author?.token)).createPost.id;
  dataOf(await api.gql(servePost, { id: postId }));
});
afterAll(async () => {
  await api.close();
  await db.$disconnect();
});

/** Starts another API process on the same database and Redis, runs `body`, and closes it. */
async function withSecondApi(body: (second: TestApi) => Promise<void>): Promise<void> {
  const second = await startTestApi();
  try {
    await body(second);
  } finally {
    await second.close();
  }
}

/** A raw POST, for the HTTP status as well as the body. */
async function post(target: TestApi, query: string, token: string) {
  const response = await fetch(new URL("graphql", target.url), {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ query }),
  });
  return { status: response.status, body: (await response.json()) as { errors?: { extensions?: { code?: string } }[] } };
}

describe("users known without SQL", () => {
  it("when users existed in PostgreSQL before the API started, then once it has loaded, their first viewer query and like send no SQL", async () => {
    const users = await createUsers(db, api.config, 30);
    await withSecondApi(async (second) => {
      expect(second.usersLoaded.ids).toBeGreaterThanOrEqual(users.length);
      // The post's row is read once, as any request of anyone would; the users are not.
      const likes = dataOf(await second.gql<{ post: { counts: { likes: number } } }>(servePost, { id: postId })).post.counts.likes;
      const before = second.sqlQueries();
      for (const user of users) {
        expect(dataOf(await second.gql<{ viewer: { id: string } }>(viewer, {}, user.token)).viewer.id).toBe(user.id.toString());
        expect(dataOf(await second.gql<LikeData>(likePost, { id: postId }, user.token)).likePost.changed).toBe(true);
      }
      expect(second.sqlQueries() - before).toBe(0);
      expect(dataOf(await second.gql<{ post: { counts: { likes: number } } }>(servePost, { id: postId })).post.counts.likes).toBe(likes + users.length);
    });
  });

  it("when a user registers through one API process, then a second process on the same Redis knows them and their requests there send no SQL", async () => {
    await withSecondApi(async (second) => {
      dataOf(await second.gql(servePost, { id: postId }));
      const name = `k_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
      const registered = dataOf(
        await api.gql<{ register: { token: string; user: { id: string } } }>(
          `mutation($u: String!, $e: String!) { register(username: $u, email: $e, password: "secret123") { token user { id } } }`,
          { u: name, e: `${name}@example.com` },
        ),
      ).register;
      const id = BigInt(registered.user.id);
      await eventually(
        async () => second.knowsUser(id),
        5_000,
        () => `the second API process never heard of user ${id}`,
      );
      const before = second.sqlQueries();
      expect(dataOf(await second.gql<{ viewer: { id: string } }>(viewer, {}, registered.token)).viewer.id).toBe(registered.user.id);
      expect(dataOf(await second.gql<LikeData>(likePost, { id: postId }, registered.token)).likePost.changed).toBe(true);
      expect(second.sqlQueries() - before).toBe(0);
    });
  });

  it("when a token names a user that does not exist, then it is refused with UNAUTHENTICATED and HTTP 401, and the second time sends no SQL", async () => {
    const nobody = await createTokenService({ secret: api.config.jwtSecret, ttlSeconds: 3600 }).issue(999_999_999_997n);
    const first = await post(api, viewer, nobody);
    expect(first.status).toBe(401);
    expect(first.body.errors?.map((e) => e.extensions?.code)).toEqual(["UNAUTHENTICATED"]);
    const before = api.sqlQueries();
    const again = await post(api, `mutation { likePost(postId: "${postId}") { changed } }`, nobody);
    expect(again.status).toBe(401);
    expect(again.body.errors?.map((e) => e.extensions?.code)).toEqual(["UNAUTHENTICATED"]);
    expect(api.sqlQueries() - before).toBe(0);
    expect(api.knowsUser(999_999_999_997n)).toBe(false);
  });

  it("when a user is inserted straight into PostgreSQL after the API loaded, then their token is accepted after one lookup, and later ones send no SQL", async () => {
    const [user] = (await createUsers(db, api.config, 1)) as [TestUser];
    expect(api.knowsUser(user.id)).toBe(false);
    const before = api.sqlQueries();
    expect(dataOf(await api.gql<{ viewer: { id: string } }>(viewer, {}, user.token)).viewer.id).toBe(user.id.toString());
    expect(api.sqlQueries() - before).toBe(1);
    expect(api.knowsUser(user.id)).toBe(true);
    expect(codesOf(await api.gql(likePost, { id: postId }, user.token))).toEqual([]);
    expect(api.sqlQueries() - before).toBe(1);
  });
});
