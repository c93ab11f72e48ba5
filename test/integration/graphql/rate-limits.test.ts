// Rate budgets through the API, against the suite's Redis: per user, per address
// (X-Forwarded-For believed only with TRUST_PROXY), sign-ins per address and per
// username, query cost. Every caller here comes from an address of its own in
// 127.0.0.0/8, so no test spends another's (or another file's) budget.
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setTimeout as sleep } from "node:timers/promises";
import { reportThreshold } from "../../../src/domain/local-budgets.js";
import { createRateLimits } from "../../../src/domain/rate-limits.js";
import { passwordHashCount } from "../../../src/domain/identity.js";
import { createContext } from "../../../src/graphql/context.js";
import { parse, type OperationDefinitionNode } from "graphql";
import { chargeOperation } from "../../../src/graphql/plugins/rate-limit-plugin.js";
import { createRedisClient } from "../../../src/stores/redis/client.js";
import { createRedisKeys } from "../../../src/stores/redis/keys.js";
import { createRateBudgetStore } from "../../../src/stores/redis/rate-budget-store.js";
import { compose } from "../../../src/compose.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import { freePort } from "../../../scripts/lib/ports.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { eventually } from "../../support/pipeline.js";
import { createUsers, openDatabase, openRedis, silentLogger, testConfig, uniqueTag, type TestUser } from "../../support/env.js";

interface Answer {
  readonly status: number;
  readonly retryAfter: string | undefined;
  /** RateLimit-Limit, -Remaining and -Reset, as numbers, when the answer carries them. */
  readonly rateLimit: readonly [number, number, number] | undefined;
  readonly body: { data?: Record<string, unknown> | null; errors?: { message: string; extensions?: { code?: string; retryAfterSeconds?: unknown } }[] };
}
const codes = (answer: Answer) => (answer.body.errors ?? []).map((e) => e.extensions?.code);

let nextHost = 1 + Math.floor(Math.random() * 200);
/** A loopback address no other test calls from: Linux answers all of 127.0.0.0/8. */
const freshAddress = () => `127.${77 + Math.floor(Math.random() * 100)}.${nextHost++ % 250}.${1 + Math.floor(Math.random() * 250)}`;

/** POSTs a GraphQL request from `from` (a local address), optionally claiming `forwardedFor` in X-Forwarded-For. */
function send(api: TestApi, query: string, options: { variables?: object; token?: string | undefined; from: string; forwardedFor?: string }): Promise<Answer> {
  const url = new URL("graphql", api.url);
  const body = JSON.stringify({ query, variables: options.variables ?? {} });
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: "POST",
        localAddress: options.from,
        agent: false,
        headers: {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
          ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
          ...(options.forwardedFor ? { "x-forwarded-for": options.forwardedFor } : {}),
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (text += chunk));
        res.on("end", () => {
          try {
            const { "ratelimit-limit": limit, "ratelimit-remaining": remaining, "ratelimit-reset": reset } = res.headers;
            const rateLimit = limit === undefined ? undefined : ([Number(limit), Number(remaining), Number(reset)] as const);
            resolve({ status: res.statusCode ?? 0, retryAfter: res.headers["retry-after"], rateLimit, body: JSON.parse(text) as Answer["body"] });
          } catch (error) {
            reject(new Error(`not JSON (HTTP ${res.statusCode}): ${text.slice(0, 200)}`, { cause: error }));
          }
        });
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

const createPost = `mutation { createPost(title: "t", body: "b") { id } }`;
const likePost = `mutation($id: ID!) { likePost(postId: $id) { changed } }`;
const likesOf = `query($id: ID!) { post(id: $id) { counts { likes } } }`;
const login = `mutation($u: String!, $p: String!) { login(username: $u, password: $p) { token user { id } } }`;
const register = `mutation($u: String!, $e: String!, $p: String!) { register(username: $u, email: $e, password: $p) { token } }`;

/** Every rate limit, at the edge or in a use case, answers one shape: errors alone, no data and no path. */
function expectRateLimited(answer: Answer): void {
  expect(codes(answer)).toEqual(["RATE_LIMITED"]);
  expect(answer.body).not.toHaveProperty("data");
  expect(answer.body.errors?.[0]).not.toHaveProperty("path");
  const wait = answer.body.errors?.[0]?.extensions?.retryAfterSeconds;
  expect(Number.isInteger(wait) && (wait as number) >= 1).toBe(true);
  expect(answer.status).toBe(429);
  expect(answer.retryAfter).toBe(String(wait));
}

let db: Database;
let apis: TestApi[] = [];
async function api(overrides: Record<string, string>): Promise<TestApi> {
  const started = await startTestApi(overrides);
  apis.push(started);
  return started;
}
async function postBy(target: TestApi, user: TestUser): Promise<string> {
  const answer = await send(target, createPost, { token: user.token, from: freshAddress() });
  return (answer.body.data?.createPost as { id: string }).id;
}

beforeAll(() => {
  db = openDatabase(testConfig());
});
afterAll(async () => {
  await Promise.all(apis.map((a) => a.close()));
  apis = [];
  await db.$disconnect();
});

describe("mutation budgets", () => {
  it("when a user spends their mutation budget, then each like tells what is left in RateLimit headers, the next is RATE_LIMITED with HTTP 429 and does nothing, while another user goes on", async () => {
    const target = await api({ RATE_LIMIT_USER_MUTATIONS: "4", RATE_LIMIT_IP_MUTATIONS: "1000" });
    const [alice, bob, carol] = await createUsers(db, target.config, 3);
    const from = freshAddress();
    // Posts made through an API of default budgets, so making them spends little of carol's.
    const unlimited = await api({});
    const posts = [];
    for (let i = 0; i < 5; i++) posts.push(await postBy(unlimited, carol as TestUser));
    for (let i = 0; i < 4; i++) {
      const liked = await send(target, likePost, { variables: { id: posts[i] }, token: alice?.token, from });
      expect(codes(liked)).toEqual([]);
      // The user's budget of 4 is tighter than the address's 1,000: 3, 2, 1 and 0 left, each full a minute
      // after its units were spent (at most 15 s a unit, less what refilled meanwhile).
      const [limit, remaining, reset] = liked.rateLimit ?? [];
      expect([limit, remaining]).toEqual([4, 3 - i]);
      expect(reset).toBeGreaterThan(i * 15);
      expect(reset).toBeLessThanOrEqual((i + 1) * 15);
    }
    const refused = await send(target, likePost, { variables: { id: posts[4] }, token: alice?.token, from });
    expectRateLimited(refused);
    expect(refused.body.data).toBeUndefined();
    expect(refused.rateLimit?.slice(0, 2)).toEqual([4, 0]);
    expect(refused.rateLimit?.[2]).toBeGreaterThanOrEqual(Number(refused.retryAfter));
    const count = await send(target, likesOf, { variables: { id: posts[4] }, from });
    expect(count.body.data?.post).toEqual({ counts: { likes: 0 } });
    // A cheap query is charged nothing, so it tells nothing.
    expect(count.rateLimit).toBeUndefined();
    // Bob's budget is his own: his like from the same address goes through.
    expect(codes(await send(target, likePost, { variables: { id: posts[4] }, token: bob?.token, from }))).toEqual([]);
  });

  it("when mutations are refused for a bad token or past the limits, then they spend none of the address's budget", async () => {
    const target = await api({ RATE_LIMIT_USER_MUTATIONS: "1000", RATE_LIMIT_IP_MUTATIONS: "2", MAX_ALIASES: "3" });
    const [alice] = await createUsers(db, target.config, 1);
    const post = await postBy(await api({}), alice as TestUser);
    const from = freshAddress();
    for (let i = 0; i < 3; i++) {
      expect(codes(await send(target, likePost, { variables: { id: post }, token: `${alice?.token}x`, from }))).toEqual(["UNAUTHENTICATED"]);
    }
    const aliased = `mutation($id: ID!) { ${["a", "b", "c", "d"].map((k) => `${k}: likePost(postId: $id) { changed }`).join(" ")} }`;
    expect(codes(await send(target, aliased, { variables: { id: post }, token: alice?.token, from }))).toEqual(["TOO_MANY_ALIASES"]);
    expect(codes(await send(target, likePost, { variables: { id: post }, token: alice?.token, from }))).toEqual([]);
    expect(codes(await send(target, likePost, { variables: { id: post }, token: alice?.token, from }))).toEqual([]);
    expectRateLimited(await send(target, likePost, { variables: { id: post }, token: alice?.token, from }));
  });

  it("when one document aliases many mutations, then each root field is charged", async () => {
    const target = await api({ RATE_LIMIT_USER_MUTATIONS: "3", RATE_LIMIT_IP_MUTATIONS: "1000" });
    const [alice] = await createUsers(db, target.config, 1);
    const from = freshAddress();
    expect(codes(await send(target, createPost, { token: alice?.token, from }))).toEqual([]);
    expect(codes(await send(target, createPost, { token: alice?.token, from }))).toEqual([]);
    const two = `mutation { a: createPost(title: "a", body: "b") { id } b: createPost(title: "a", body: "b") { id } }`;
    const before = target.sqlQueries();
    expectRateLimited(await send(target, two, { token: alice?.token, from }));
    expect(target.sqlQueries()).toBe(before);
  });

  it("when TRUST_PROXY is on, then X-Forwarded-For names the address that pays, and another address has its own budget", async () => {
    const target = await api({ TRUST_PROXY: "true", RATE_LIMIT_IP_MUTATIONS: "3", RATE_LIMIT_USER_MUTATIONS: "1000" });
    const users = await createUsers(db, target.config, 5);
    const client = `10.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}.7`;
    const post = await postBy(target, users[4] as TestUser);
    const likeFrom = (user: TestUser, forwardedFor: string) =>
      send(target, likePost, { variables: { id: post }, token: user.token, from: freshAddress(), forwardedFor });
    for (const user of users.slice(0, 3)) expect(codes(await likeFrom(user, client))).toEqual([]);
    expectRateLimited(await likeFrom(users[3] as TestUser, client));
    expect(codes(await likeFrom(users[3] as TestUser, `${client.slice(0, -1)}8`))).toEqual([]);
  });

  it("when TRUST_PROXY is off, then X-Forwarded-For is ignored and the connection's address pays", async () => {
    const target = await api({ TRUST_PROXY: "false", RATE_LIMIT_IP_MUTATIONS: "3", RATE_LIMIT_USER_MUTATIONS: "1000" });
    const users = await createUsers(db, target.config, 5);
    const post = await postBy(target, users[4] as TestUser);
    const from = freshAddress();
    const answers = [];
    for (const [i, user] of users.slice(0, 4).entries()) {
      answers.push(await send(target, likePost, { variables: { id: post }, token: user.token, from, forwardedFor: `10.1.2.${i + 1}` }));
    }
    expect(answers.slice(0, 3).map(codes)).toEqual([[], [], []]);
    expectRateLimited(answers[3] as Answer);
  });
});

describe("mutation budgets decided in process memory", () => {
  /** Lua script calls the suite's Redis ran so far (EVAL, EVALSHA and their read-only forms), once nothing more arrives. */
  async function settledScriptCalls(): Promise<number> {
    const redis = await openRedis();
    try {
      const calls = async () => [...(await redis.info("commandstats")).matchAll(/^cmdstat_eval\w*:calls=(\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
      // A like's list write leaves after its answer: wait until the count stops moving.
      let before = await calls();
      for (;;) {
        await sleep(150);
        const after = await calls();
        if (after === before) return after;
        before = after;
      }
    } finally {
      await redis.quit();
    }
  }

  it("when a user likes through one API process, then the mutation budgets send no script to Redis: the likes run exactly the scripts they run with the budgets off", async () => {
    // Below the default budgets' report thresholds (60 units per user, 300 per address), so no spending is reported either.
    const likes = 20;
    const budgeted = await api({});
    const unbudgeted = await api({ RATE_LIMITS: "off" });
    const [carol, ...likers] = (await createUsers(db, budgeted.config, 7)) as [TestUser, ...TestUser[]];
    const posts: string[] = [];
    for (let i = 0; i < likes; i++) posts.push(await postBy(unbudgeted, carol));
    const likeAll = async (through: TestApi, user: TestUser) => {
      const from = freshAddress();
      const start = await settledScriptCalls();
      for (const id of posts) expect(codes(await send(through, likePost, { variables: { id }, token: user.token, from }))).toEqual([]);
      return (await settledScriptCalls()) - start;
    };
    // Each process also renews its writer's lease with a script every 5 s (index-fence.ts), in
    // whichever window it falls: the fewest scripts of three users' likes, each way.
    const fewest = async (through: TestApi, users: readonly TestUser[]) => {
      const counts: number[] = [];
      for (const user of users) counts.push(await likeAll(through, user));
      return Math.min(...counts);
    };
    const withBudgets = await fewest(budgeted, likers.slice(0, 3));
    const withoutBudgets = await fewest(unbudgeted, likers.slice(3, 6));
    expect(withoutBudgets).toBeGreaterThanOrEqual(likes);
    expect(withBudgets).toBe(withoutBudgets);
  });

  it("when a user spends their budget through one API process, then another process on the same Redis refuses them too, within a threshold of likes and a bounded wait", async () => {
    const budget = { RATE_LIMIT_USER_MUTATIONS: "20", RATE_LIMIT_IP_MUTATIONS: "1000" };
    const [first, second] = [await api(budget), await api(budget)];
    const [alice, carol] = await createUsers(db, first.config, 2);
    const post = await postBy(await api({}), carol as TestUser);
    const like = (through: TestApi, from: string) => send(through, likePost, { variables: { id: post }, token: alice?.token, from });
    const fromFirst = freshAddress();
    for (let i = 0; i < 20; i++) expect(codes(await like(first, fromFirst))).toEqual([]);
    expectRateLimited(await like(first, fromFirst));

    // The second process knows nothing of alice until she spends a threshold there and it reports it.
    const fromSecond = freshAddress();
    const deadline = Date.now() + 5_000;
    let accepted = 0;
    let answer = await like(second, fromSecond);
    while (codes(answer).length === 0 && Date.now() < deadline) {
      accepted++;
      await sleep(50);
      answer = await like(second, fromSecond);
    }
    expectRateLimited(answer);
    expect(accepted).toBeLessThanOrEqual(reportThreshold(20));
  });
});

describe("sign-in budgets", () => {
  it("when an address spends its sign-in budget, then the next login is refused before any password work", async () => {
    const target = await api({ RATE_LIMIT_IP_SIGN_INS: "3", RATE_LIMIT_USERNAME_LOGINS: "100" });
    const from = freshAddress();
    for (let i = 0; i < 3; i++) {
      expect(codes(await send(target, login, { variables: { u: `nobody_${uniqueTag()}`, p: "wrong1234" }, from }))).toEqual(["UNAUTHENTICATED"]);
    }
    const before = passwordHashCount();
    expectRateLimited(await send(target, login, { variables: { u: `nobody_${uniqueTag()}`, p: "wrong1234" }, from }));
    const tag = uniqueTag();
    expectRateLimited(await send(target, register, { variables: { u: `r_${tag}`, e: `r_${tag}@example.com`, p: "secret123" }, from }));
    expect(passwordHashCount()).toBe(before);
  });

  it("when 200 wrong-password logins for one user storm from one address, then most are refused unhashed and another user's login sent meanwhile waits behind at most the storm's five scrypts", async () => {
    const target = await api({ RATE_LIMIT_IP_SIGN_INS: "1000", RATE_LIMIT_USERNAME_LOGINS: "5" });
    const tag = uniqueTag();
    const [victim, other] = [`v_${tag}`, `o_${tag}`];
    for (const name of [victim, other]) {
      expect(codes(await send(target, register, { variables: { u: name, e: `${name}@example.com`, p: "secret123" }, from: freshAddress() }))).toEqual([]);
    }
    const before = passwordHashCount();
    const attacker = freshAddress();
    const storming = Promise.all(Array.from({ length: 200 }, () => send(target, login, { variables: { u: victim, p: "wrong1234" }, from: attacker })));
    // Sent while the storm is in flight: it can wait behind no more than the storm's admitted scrypts.
    const signingIn = send(target, login, { variables: { u: other, p: "secret123" }, from: freshAddress() });
    const [storm, signedIn] = await Promise.all([storming, signingIn]);
    const outcomes = storm.map((a) => codes(a).join());
    expect(outcomes.filter((c) => c === "RATE_LIMITED")).toHaveLength(195);
    for (const refused of storm.filter((a) => codes(a).join() === "RATE_LIMITED")) expectRateLimited(refused);
    expect(outcomes.filter((c) => c === "UNAUTHENTICATED")).toHaveLength(5);
    expect(codes(signedIn)).toEqual([]);
    expect(passwordHashCount() - before).toBe(6);
  });

  it("when a username is known, unknown or impossible, then a wrong login answers the same and costs exactly one scrypt, and an impossible one sends no SQL", async () => {
    const target = await api({});
    const tag = uniqueTag();
    const known = `k_${tag}`;
    expect(codes(await send(target, register, { variables: { u: known, e: `${known}@example.com`, p: "secret123" }, from: freshAddress() }))).toEqual([]);
    for (const [username, sqlExpected] of [
      [known, true],
      [`unknown_${tag}`, true],
      [`has spaces ${tag}`, false],
      ["x".repeat(10_000), false],
    ] as const) {
      const hashes = passwordHashCount();
      const sql = target.sqlQueries();
      const answer = await send(target, login, { variables: { u: username, p: "wrong1234" }, from: freshAddress() });
      expect(answer.body.errors?.map((e) => [e.extensions?.code, e.message])).toEqual([["UNAUTHENTICATED", "Username or password is wrong."]]);
      expect(passwordHashCount() - hashes).toBe(1);
      expect(target.sqlQueries() > sql).toBe(sqlExpected);
    }
  });
});

describe("login without the API in front", () => {
  it("when a username holds a null byte or a control character, then login answers wrong credentials after one scrypt, PostgreSQL never sees it", async () => {
    const config = testConfig();
    const redis = await openRedis();
    try {
      const { services } = compose(config, { db, redis }, silentLogger);
      for (const username of [`nul\u0000${uniqueTag()}`, `bell\u0007${uniqueTag()}`]) {
        const hashes = passwordHashCount();
        await expect(services.users.login(username, "wrong1234")).rejects.toMatchObject({ code: "UNAUTHENTICATED", message: "Username or password is wrong." });
        expect(passwordHashCount() - hashes).toBe(1);
      }
    } finally {
      await redis.quit();
    }
  });
});

describe("query cost budgets and a Redis that does not answer", () => {
  it("when expensive queries spend a viewer's cost budget, then the next is RATE_LIMITED, and cheap ones are not charged", async () => {
    const config = testConfig({ RATE_LIMIT_QUERY_COST_THRESHOLD: "100", RATE_LIMIT_VIEWER_QUERY_COST: "1000", RATE_LIMIT_IP_QUERY_COST: "100000" });
    const redis = await openRedis();
    try {
      const { services } = compose(config, { db, redis }, silentLogger);
      const [viewer] = await createUsers(db, config, 1);
      const context = await createContext(services, `Bearer ${viewer?.token}`, freshAddress());
      const document = parse("{ feed { edges { cursor } } }");
      const operation = document.definitions[0] as OperationDefinitionNode;
      const charge = (cost: number) => chargeOperation(context, cost, operation, document);
      for (let i = 0; i < 100; i++) await charge(99);
      expect(context.charged.standing).toBeNull();
      await charge(600);
      // Charged in Redis: the viewer's 1,000 is tighter than the address's 100,000.
      expect(context.charged.standing?.limit).toBe(1000);
      expect(context.charged.standing?.remaining).toBeGreaterThanOrEqual(400);
      expect(context.charged.standing?.remaining).toBeLessThanOrEqual(401);
      await charge(400);
      await expect(charge(100)).rejects.toMatchObject({ code: "RATE_LIMITED", retryAfterSeconds: expect.any(Number) });
    } finally {
      await redis.quit();
    }
  });

  it("when Redis cannot be reached, then its budgets are decided in the process's memory, mutations pass within the process's own budget, and the failures are reported", async () => {
    const redis = createRedisClient({ url: `redis://127.0.0.1:${await freePort()}`, commandTimeoutMs: 200 });
    redis.on("error", () => {}); // refused connections are the point here
    const failures: ("charge" | "report")[] = [];
    const limits = createRateLimits({
      store: createRateBudgetStore(redis, createRedisKeys(16)),
      settings: {
        enabled: true,
        periodMs: 60_000,
        queryCostThreshold: 1,
        localSubjects: 100,
        limits: { userMutations: 3, ipMutations: 1000, ipSignIns: 1, usernameLogins: 1, viewerQueryCost: 1, ipQueryCost: 1 },
      },
      onStoreFailure: (_error, during) => failures.push(during),
    });
    try {
      await limits.charge([{ budget: "viewerQueryCost", subject: "1", cost: 1 }]);
      expect(failures).toContain("charge");
      // Spent in this process's memory: the budget of 1 refuses the next charge, without waiting for Redis.
      await expect(limits.charge([{ budget: "viewerQueryCost", subject: "1", cost: 1 }])).rejects.toMatchObject({ code: "RATE_LIMITED" });
      // Another subject's budget is whole.
      await limits.charge([{ budget: "viewerQueryCost", subject: "2", cost: 1 }]);
      // Decided in memory: no Redis call waits, every report of the spending fails.
      for (let i = 0; i < 3; i++)
        await limits.charge([
          { budget: "userMutations", subject: "1", cost: 1 },
          { budget: "ipMutations", subject: "10.0.0.1", cost: 1 },
        ]);
      await eventually(
        async () => failures.includes("report"),
        5_000,
        () => `failures told: ${failures.join()}`,
      );
      await expect(limits.charge([{ budget: "userMutations", subject: "1", cost: 1 }])).rejects.toMatchObject({ code: "RATE_LIMITED" });
    } finally {
      redis.disconnect();
    }
  });
});
