// Only users that exist act: a validly signed token naming no user is refused,
// and telling them apart costs no SQL per request once a user is known. Tokens
// that standard libraries make work; a token sent but not accepted is refused on
// queries too, except by an operation that only signs in.
import jwt from "jsonwebtoken";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTokenService } from "../../../src/graphql/tokens.js";
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
  it("when a signed token names no user, or an id past bigint, then mutations and queries are UNAUTHENTICATED and nothing counts", async () => {
    const tokens = createTokenService({ secret: api.config.jwtSecret, ttlSeconds: 3600 });
    const nobody = await tokens.issue(999_999_999_999n);
    const tooBig = await tokens.issue(9_999_999_999_999_999_999n);
    for (const token of [nobody, tooBig]) {
      const liked = await api.gql(likePost, { id: postId }, token);
      expect(codesOf(liked)).toEqual(["UNAUTHENTICATED"]);
      const viewer = await api.gql<{ viewer: null }>(`{ viewer { id } }`, {}, token);
      expect(codesOf(viewer)).toEqual(["UNAUTHENTICATED"]);
      expect(viewer.data).toBeUndefined();
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
      expect(codesOf(await api.gql(`{ viewer { id } }`, {}, nobody))).toEqual(["UNAUTHENTICATED"]);
      expect(dataOf(known).viewer.id).toBe(user?.id.toString());
      expect(codesOf(await api.gql(likePost, { id: postId }, nobody))).toEqual(["UNAUTHENTICATED"]);
    }
    expect(api.sqlQueries() - before).toBe(0);
  });
});

/** A raw POST, for the status and headers as well as the body. */
async function post(query: string, headers: Record<string, string> = {}) {
  const response = await fetch(new URL("graphql", api.url), {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ query }),
  });
  return {
    status: response.status,
    headers: response.headers,
    body: (await response.json()) as { data?: unknown; errors?: { extensions?: { code?: string } }[] },
  };
}

describe("tokens on the wire", () => {
  it("when a token made by jsonwebtoken (typ JWT) names a user, then queries and mutations act as that user", async () => {
    const [user] = await createUsers(db, api.config, 1);
    const token = jwt.sign({ sub: user?.id.toString() }, api.config.jwtSecret, { algorithm: "HS256", expiresIn: "5m" });
    expect(dataOf(await api.gql<{ viewer: { id: string } }>(`{ viewer { id } }`, {}, token)).viewer.id).toBe(user?.id.toString());
    expect(dataOf(await api.gql<{ likePost: { changed: boolean } }>(likePost, { id: postId }, token)).likePost.changed).toBe(true);
  });

  it("when a query carries an expired, forged or malformed token, then nothing runs and it answers UNAUTHENTICATED with HTTP 401", async () => {
    const [user] = await createUsers(db, api.config, 1);
    const sub = user?.id.toString();
    const expired = jwt.sign({ sub, exp: Math.floor(Date.now() / 1000) - 3600 }, api.config.jwtSecret, { algorithm: "HS256" });
    const forged = jwt.sign({ sub }, "not-the-service-secret-at-all", { algorithm: "HS256", expiresIn: "5m" });
    const before = api.sqlQueries();
    for (const authorization of [`Bearer ${expired}`, `Bearer ${forged}`, "Bearer not.a.token", "Basic dXNlcjpwdw=="]) {
      const answer = await post(`{ feed(first: 5) { edges { node { id } } } }`, { authorization });
      expect(answer.status).toBe(401);
      expect(answer.headers.get("www-authenticate")).toContain("invalid_token");
      expect(answer.body.data).toBeUndefined();
      expect(answer.body.errors?.map((e) => e.extensions?.code)).toEqual(["UNAUTHENTICATED"]);
    }
    expect(api.sqlQueries() - before).toBe(0);
  });

  it("when a client with a stale token signs in, then login goes through; anything else in the same operation is refused", async () => {
    const stale = jwt.sign({ sub: "1", exp: Math.floor(Date.now() / 1000) - 3600 }, api.config.jwtSecret, { algorithm: "HS256" });
    const login = await post(`mutation { login(username: "nobody_here_at_all", password: "secret123") { token } }`, { authorization: `Bearer ${stale}` });
    expect(login.status).toBe(200);
    expect(login.body.errors?.map((e) => e.extensions?.code)).toEqual(["UNAUTHENTICATED"]);
    expect((login.body.errors?.[0] as { message?: string } | undefined)?.message).toBe("Username or password is wrong.");
    const mixed = await post(`mutation { login(username: "nobody_here_at_all", password: "secret123") { token } likePost(postId: "${postId}") { changed } }`, {
      authorization: `Bearer ${stale}`,
    });
    expect(mixed.status).toBe(401);
  });
});
