// Only users that exist act: a validly signed token naming no user is refused,
// and telling them apart costs no SQL per request once a user is known.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTokenService } from "../../../src/domain/identity.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { codesOf, createUsers, dataOf, openDatabase, type TestUser } from "../../support/env.js";

let api: TestApi;
let db: Database;
let author: TestUser;
let postId: string;

const likePost = `mutation($id: ID!) { likePost(postId: $id) { changed post { counts { likes } } } }`;
const likesOf = `query($id: ID!) { post(id: $id) { counts { likes } } }`;

beforeAll(async () => {
  api = await startTestApi();
  db = openDatabase(api.config);
  author = (await createUsers(db, api.config, 1))[0] as TestUser;
  const created = await api.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "t", body: "b") { id } }`, {}, author.token);
  postId = dataOf(created).createPost.id;
});
afterAll(async () => {
  await api.close();
  await db.$disconnect();
});

describe("tokens of users that do not exist", () => {
  it("when a signed token names no user, or an id past bigint, then mutations are UNAUTHENTICATED, nothing counts, and viewer is null", async () => {
    const tokens = createTokenService({ secret: api.config.jwtSecret, ttlSeconds: 3600 });
    const nobody = await tokens.issue(999_999_999_999n);
    const tooBig = await tokens.issue(9_999_999_999_999_999_999n);
    for (const token of [nobody, tooBig]) {
      const liked = await api.gql(likePost, { id: postId }, token);
      expect(codesOf(liked)).toEqual(["UNAUTHENTICATED"]);
      const viewer = await api.gql<{ viewer: null }>(`{ viewer { id } }`, {}, token);
      expect(viewer.errors).toBeUndefined();
      expect(viewer.data?.viewer).toBeNull();
    }
    expect(dataOf(await api.gql<{ post: { counts: { likes: number } } }>(likesOf, { id: postId })).post.counts.likes).toBe(0);
  });

  it("when a token's user is known or known missing, then checking it again sends no SQL", async () => {
    const [user] = await createUsers(db, api.config, 1);
    const nobody = await createTokenService({ secret: api.config.jwtSecret, ttlSeconds: 3600 }).issue(999_999_999_998n);
    await api.gql(`{ viewer { id } }`, {}, user?.token);
    await api.gql(`{ viewer { id } }`, {}, nobody);
    const before = api.sqlQueries();
    for (let i = 0; i < 20; i++) {
      const known = await api.gql<{ viewer: { id: string } }>(`{ viewer { id } }`, {}, user?.token);
      expect(dataOf(known).viewer.id).toBe(user?.id.toString());
      expect(codesOf(await api.gql(likePost, { id: postId }, nobody))).toEqual(["UNAUTHENTICATED"]);
    }
    expect(api.sqlQueries() - before).toBe(0);
  });
});
