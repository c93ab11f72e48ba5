import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../../src/stores/postgres/database.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { codesOf, createUsers, dataOf, openDatabase, uniqueTag, type GraphQLResponse, type TestUser } from "../../support/env.js";

let api: TestApi;
let db: Database;
let alice: TestUser;
let bob: TestUser;

const createPost = async (title: string, user = alice) =>
  dataOf(await api.gql<{ createPost: { id: string } }>(`mutation($t: String!) { createPost(title: $t, body: "body") { id } }`, { t: title }, user.token))
    .createPost.id;

const createComment = async (postId: string, parentId: string | null = null, user = bob) =>
  dataOf(
    await api.gql<{ createComment: { id: string } }>(
      `mutation($p: ID!, $parent: ID) { createComment(postId: $p, body: "c", parentId: $parent) { id } }`,
      { p: postId, parent: parentId },
      user.token,
    ),
  ).createComment.id;

beforeAll(async () => {
  api = await startTestApi();
  db = openDatabase(api.config);
  [alice, bob] = (await createUsers(db, api.config, 2)) as [TestUser, TestUser];
});
afterAll(async () => {
  await api.close();
  await db.$disconnect();
});

describe("accounts", () => {
  it("when a user registers and logs in, then both tokens name them and viewer answers", async () => {
    const name = `reg_${uniqueTag()}`;
    const reg = dataOf(
      await api.gql<{ register: { token: string; user: { id: string; username: string; email: string; counts: { posts: number } } } }>(
        `mutation($u: String!, $e: String!) { register(username: $u, email: $e, password: "secret123") { token user { id username email counts { posts } } } }`,
        { u: name, e: `${name}@Example.com` },
      ),
    ).register;
    expect(reg.user).toMatchObject({ username: name, email: `${name}@example.com`, counts: { posts: 0 } });
    const login = dataOf(
      await api.gql<{ login: { token: string; user: { id: string } } }>(
        `mutation($u: String!) { login(username: $u, password: "secret123") { token user { id } } }`,
        { u: name },
      ),
    ).login;
    expect(login.user.id).toBe(reg.user.id);
    const viewer = dataOf(await api.gql<{ viewer: { id: string } }>(`{ viewer { id } }`, {}, login.token)).viewer;
    expect(viewer.id).toBe(reg.user.id);
    expect(dataOf(await api.gql(`{ viewer { id } }`)).viewer).toBeNull();
    // Stored passwords are salted scrypt hashes, never the password.
    const stored = await db.user.findUniqueOrThrow({ where: { id: BigInt(reg.user.id) } });
    expect(stored.passwordHash).toMatch(/^scrypt\$[0-9a-f]{32}\$[0-9a-f]{64}$/);
  });

  it("when the username or email is taken, or the password is wrong, then a clear error comes back", async () => {
    const name = `dup_${uniqueTag()}`;
    const register = (u: string, e: string) =>
      api.gql(`mutation($u: String!, $e: String!) { register(username: $u, email: $e, password: "secret123") { token } }`, { u, e });
    dataOf(await register(name, `${name}@example.com`));
    expect(codesOf(await register(name, `other_${name}@example.com`))).toEqual(["BAD_USER_INPUT"]);
    expect(codesOf(await register(`x${name}`, `${name}@example.com`))).toEqual(["BAD_USER_INPUT"]);
    const wrong = await api.gql(`mutation($u: String!) { login(username: $u, password: "wrong1234") { token } }`, { u: name });
    expect(codesOf(wrong)).toEqual(["UNAUTHENTICATED"]);
    const nobody = await api.gql(`mutation { login(username: "no_such_user_here", password: "wrong1234") { token } }`);
    expect(nobody.errors?.[0]?.message).toBe(wrong.errors?.[0]?.message);
  });

  it("when someone reads another user's email, then the answer is FORBIDDEN", async () => {
    const res = await api.gql(`query($id: ID!) { user(id: $id) { username email } }`, { id: alice.id.toString() }, bob.token);
    expect(codesOf(res)).toEqual(["FORBIDDEN"]);
    const own = await api.gql<{ user: { email: string } }>(`query($id: ID!) { user(id: $id) { email } }`, { id: alice.id.toString() }, alice.token);
    expect(dataOf(own).user.email).toMatch(/@example\.com$/);
  });
});

describe("posts, comments and the feed", () => {
  it("when posts are created, then the feed pages through them newest first", async () => {
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push(await createPost(`feed ${i}`));
    const seen: string[] = [];
    let after: string | null = null;
    while (seen.length < 5) {
      type FeedPage = { feed: { edges: { node: { id: string } }[]; pageInfo: { hasNextPage: boolean; endCursor: string } } };
      const res: GraphQLResponse<FeedPage> = await api.gql<FeedPage>(
        `query($after: String) { feed(first: 2, after: $after) { edges { node { id } } pageInfo { hasNextPage endCursor } } }`,
        { after },
      );
      const feed = dataOf(res).feed;
      seen.push(...feed.edges.map((e) => e.node.id));
      // Older posts of other tests may follow ours; ours alone guarantee a next page until all five are seen.
      if (seen.length < 5) expect(feed.pageInfo.hasNextPage).toBe(true);
      after = feed.pageInfo.endCursor;
    }
    expect(seen.slice(0, 5)).toEqual([...ids].reverse());
  });

  it("when posts are asked by id, then they come in the order asked with null for unknown ids", async () => {
    const a = await createPost("a");
    const b = await createPost("b");
    const res = await api.gql<{ posts: ({ id: string; title: string; author: { id: string } } | null)[] }>(
      `query($ids: [ID!]!) { posts(ids: $ids) { id title author { id } } }`,
      { ids: [b, "9100000000000000003", a] },
    );
    expect(dataOf(res).posts).toEqual([
      { id: b, title: "b", author: { id: alice.id.toString() } },
      null,
      { id: a, title: "a", author: { id: alice.id.toString() } },
    ]);
  });

  it("when comments and replies are written, then counts and connections follow", async () => {
    const postId = await createPost("discussed");
    const top1 = await createComment(postId);
    const top2 = await createComment(postId);
    const reply1 = await createComment(postId, top1);
    const reply2 = await createComment(postId, top1, alice);
    const res = await api.gql<{
      post: {
        counts: { comments: number };
        comments: { edges: { node: { id: string; counts: { replies: number }; replies: { edges: { node: { id: string; parent: { id: string } } }[] } } }[] };
      };
    }>(
      `query($id: ID!) { post(id: $id) { counts { comments } comments(first: 10) { edges { node { id counts { replies } replies { edges { node { id parent { id } } } } } } } } }`,
      { id: postId },
    );
    const post = dataOf(res).post;
    expect(post.counts.comments).toBe(4);
    expect(post.comments.edges.map((e) => e.node.id)).toEqual([top2, top1]);
    const first = post.comments.edges[1]?.node;
    expect(first?.counts.replies).toBe(2);
    expect(first?.replies.edges.map((e) => e.node.id)).toEqual([reply2, reply1]);
    expect(first?.replies.edges[0]?.node.parent.id).toBe(top1);
    const comment = await api.gql<{ comment: { post: { id: string }; author: { id: string }; parent: null } }>(
      `query($id: ID!) { comment(id: $id) { post { id } author { id } parent { id } } }`,
      { id: top2 },
    );
    expect(dataOf(comment).comment).toEqual({ post: { id: postId }, author: { id: bob.id.toString() }, parent: null });
    const author = await api.gql<{ user: { counts: { posts: number } } }>(`query($id: ID!) { user(id: $id) { counts { posts } } }`, {
      id: alice.id.toString(),
    });
    expect(dataOf(author).user.counts.posts).toBe(await db.post.count({ where: { authorId: alice.id } }));
  });

  it("when a reply names a parent under another post, then it is refused", async () => {
    const p1 = await createPost("one");
    const p2 = await createPost("two");
    const parent = await createComment(p1);
    const res = await api.gql(`mutation($p: ID!, $c: ID!) { createComment(postId: $p, parentId: $c, body: "x") { id } }`, { p: p2, c: parent }, bob.token);
    expect(codesOf(res)).toEqual(["BAD_USER_INPUT"]);
  });
});

describe("error codes", () => {
  const bad = (query: string, variables: Record<string, unknown> = {}, token = alice.token) => api.gql(query, variables, token).then(codesOf);

  it("when mutations come without a valid token, then they are UNAUTHENTICATED", async () => {
    expect(await bad(`mutation { createPost(title: "t", body: "b") { id } }`, {}, "")).toEqual(["UNAUTHENTICATED"]);
    expect(await bad(`mutation { likePost(postId: "1") { changed } }`, {}, "not.a.token")).toEqual(["UNAUTHENTICATED"]);
    expect(await bad(`mutation { unlikeComment(commentId: "1") { changed } }`, {}, "")).toEqual(["UNAUTHENTICATED"]);
  });

  it("when ids name nothing, then the answer is NOT_FOUND or null", async () => {
    expect(await bad(`mutation { likePost(postId: "9100000000000000004") { changed } }`)).toEqual(["NOT_FOUND"]);
    expect(await bad(`mutation { createComment(postId: "9100000000000000004", body: "x") { id } }`)).toEqual(["NOT_FOUND"]);
    expect(
      dataOf(await api.gql(`{ post(id: "9100000000000000004") { id } user(id: "9100000000000000004") { id } comment(id: "9100000000000000004") { id } }`)),
    ).toEqual({
      post: null,
      user: null,
      comment: null,
    });
  });

  it("when input is malformed, then the answer is BAD_USER_INPUT", async () => {
    const over = Array.from({ length: 101 }, (_, i) => String(i + 1));
    const cases: [string, Record<string, unknown>][] = [
      [`{ post(id: "abc") { id } }`, {}],
      [`{ post(id: "-1") { id } }`, {}],
      [`{ post(id: "99999999999999999999") { id } }`, {}],
      [`mutation { likePost(postId: "1.5") { changed } }`, {}],
      [`query($ids: [ID!]!) { posts(ids: $ids) { id } }`, { ids: over }],
      [`mutation { createPost(title: "   ", body: "b") { id } }`, {}],
      [`mutation($t: String!) { createPost(title: $t, body: "b") { id } }`, { t: "x".repeat(201) }],
      [`mutation { createPost(title: "t", body: "") { id } }`, {}],
      [`mutation { register(username: "ab", email: "a@b.io", password: "secret123") { token } }`, {}],
      [`mutation($u: String!) { register(username: $u, email: "a@b.io", password: "secret123") { token } }`, { u: "u".repeat(33) }],
      [`mutation { register(username: "good_name", email: "not-an-email", password: "secret123") { token } }`, {}],
      [`mutation { register(username: "good_name", email: "a@b.io", password: "short1") { token } }`, {}],
      [`mutation { register(username: "good_name", email: "a@b.io", password: "lettersonly") { token } }`, {}],
      [`{ feed(first: -1) { edges { cursor } } }`, {}],
      [`{ feed(first: 101) { edges { cursor } } }`, {}],
      [`{ feed(after: "garbage") { edges { cursor } } }`, {}],
    ];
    for (const [query, variables] of cases) {
      expect({ query, codes: await bad(query, variables) }).toEqual({ query, codes: ["BAD_USER_INPUT"] });
    }
  });

  it("when the query itself is invalid, then no internal error and no stack trace come back", async () => {
    const res = await api.gql(`{ post(id: 1) { nope } }`);
    expect(codesOf(res)).not.toContain("INTERNAL_SERVER_ERROR");
    expect(JSON.stringify(res)).not.toMatch(/stacktrace|\.ts:\d+/);
  });
});
