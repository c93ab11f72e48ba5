// A deadline per kind of work: likes and reads keep the short request deadline,
// while an operation that only creates content or signs in gets CONTENT_DEADLINE_MS;
// a read always gives Redis a little time, however short its deadline.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "../../support/api.js";
import { codesOf, createUsers, dataOf, openDatabase, uniqueTag, type TestUser } from "../../support/env.js";
import type { Database } from "../../../src/stores/postgres/database.js";

let api: TestApi;
let db: Database;
let author: TestUser;

beforeAll(async () => {
  // A request deadline no PostgreSQL write can meet: only the content deadline lets one finish.
  api = await startTestApi({ REQUEST_DEADLINE_MS: "1", CONTENT_DEADLINE_MS: "10000" });
  db = openDatabase(api.config);
  [author] = (await createUsers(db, api.config, 1)) as [TestUser];
});
afterAll(async () => {
  await api.close();
  await db.$disconnect();
});

describe("deadlines per kind of work", () => {
  it("when the request deadline is shorter than any write takes, then createPost, createComment, register and login still finish, and a like does not", async () => {
    const post = dataOf(await api.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "t", body: "b") { id } }`, {}, author.token)).createPost.id;
    dataOf(await api.gql(`mutation($id: ID!) { createComment(postId: $id, body: "c") { id } }`, { id: post }, author.token));
    const name = `dl_${uniqueTag()}`;
    dataOf(await api.gql(`mutation($u: String!) { register(username: $u, email: "${name}@example.com", password: "password-123") { token } }`, { u: name }));
    dataOf(await api.gql(`mutation($u: String!) { login(username: $u, password: "password-123") { token } }`, { u: name }));

    const like = await api.gql(`mutation($id: ID!) { likePost(postId: $id) { changed } }`, { id: post }, author.token);
    expect(codesOf(like)).toEqual(["SERVICE_UNAVAILABLE"]);
    // An operation that also likes keeps the short deadline.
    const mixed = await api.gql(
      `mutation($id: ID!) { createPost(title: "t", body: "b") { id } likePost(postId: $id) { changed } }`,
      { id: post },
      author.token,
    );
    expect(codesOf(mixed)).toContain("SERVICE_UNAVAILABLE");
  });

  it("when a read's deadline is shorter than the time kept for PostgreSQL, then it still waits a little for Redis and answers what Redis holds", async () => {
    const post = dataOf(await api.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "t", body: "b") { id } }`, {}, author.token)).createPost.id;
    // Liked through a process with the usual deadline; no pipeline runs, so only Redis has the like.
    const writer = await startTestApi();
    const reader = await startTestApi({ REQUEST_DEADLINE_MS: "250" });
    try {
      dataOf(await writer.gql(`mutation($id: ID!) { likePost(postId: $id) { changed } }`, { id: post }, author.token));
      const read = await reader.gql<{ post: { counts: { likes: number }; viewerHasLiked: boolean } }>(
        `query($id: ID!) { post(id: $id) { counts { likes } viewerHasLiked } }`,
        { id: post },
        author.token,
      );
      expect(dataOf(read).post).toEqual({ counts: { likes: 1 }, viewerHasLiked: true });
    } finally {
      await writer.close();
      await reader.close();
    }
  });
});
