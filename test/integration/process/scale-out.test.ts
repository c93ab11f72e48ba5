// The service scaled out as a deployment runs it: two API processes (`npm start` with
// PIPELINE=off) and two workers (`npm run worker`) on one RabbitMQ, one PostgreSQL and
// one Redis (in the project "cluster", the 3-master cluster). Users like, unlike,
// collect and uncollect through both API processes at once; each user's calls go one
// after another, so what each holds at the end is known from the answers alone.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../../scripts/lib/ports.js";
import type { Config } from "../../../src/config.js";
import type { LikeableTarget, Relation } from "../../../src/domain/model/index.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import type { RedisClient } from "../../../src/stores/redis/client.js";
import { databaseMembers, redisState } from "../../support/agreement.js";
import { createUsers, graphqlClient, testConfig, type TestUser } from "../../support/env.js";
import { eventually } from "../../support/pipeline.js";
import { startServiceProcess, startWorkerProcess, type ServiceProcess } from "../../support/service-process.js";
import { agreeWithin, createPosts, useStores } from "../../support/stores.js";

let db: Database;
let redis: RedisClient;
let author: TestUser;
// An empty Redis: the workers relay whatever the outbox holds, and the published events are counted.
useStores((s) => ({ db, redis, author } = s), { emptyRedis: true });

const mutations = {
  like: ["likePost", "unlikePost"],
  collect: ["collectPost", "uncollectPost"],
} as const satisfies Partial<Record<Relation, readonly [string, string]>>;
type Burst = keyof typeof mutations;

/** What each user holds of each post's relation, by the answers: `relation:post` → members. */
type Expected = Map<string, Set<string>>;

interface Worker {
  readonly process: ServiceProcess;
  readonly metricsPort: number;
}

let config: Config;
let apis: ServiceProcess[] = [];
const workers: Worker[] = [];

async function startWorker(env: Record<string, string> = {}): Promise<Worker> {
  const metricsPort = await freePort();
  const worker = { process: await startWorkerProcess(config, { METRICS_PORT: String(metricsPort), REDIS_DURABILITY: "volatile", ...env }), metricsPort };
  workers.push(worker);
  return worker;
}

/** A counter of a worker's /metrics. */
async function metric(worker: Worker, name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${worker.metricsPort}/metrics`)).text();
  return Number(new RegExp(`^${name} (\\d+)`, "m").exec(text)?.[1] ?? Number.NaN);
}

beforeAll(async () => {
  config = testConfig({ PERSIST_LINGER_MS: "200" });
  // Every call comes from 127.0.0.1: the budgets per address are the suite's, not this test's.
  const unlimited = { RATE_LIMIT_IP_MUTATIONS: "0", RATE_LIMIT_IP_SIGN_INS: "0", RATE_LIMIT_IP_QUERY_COST: "0" };
  apis = await Promise.all(
    [0, 1].map(() => startServiceProcess(config, { PIPELINE: "off", WEB_CONCURRENCY: "1", REDIS_DURABILITY: "volatile", ...unlimited })),
  );
}, 60_000);

afterAll(async () => {
  await Promise.all([...apis, ...workers.splice(0).map((w) => w.process)].map((p) => p.stop("SIGTERM")));
});

/**
 * Every user makes `calls` changes one after another, each to a random post and
 * relation, through the API processes in turns; all users at once. `halfway` runs
 * once half the calls are answered. Answers what each holds, and how many calls
 * changed something.
 */
async function burst(
  users: readonly TestUser[],
  posts: readonly LikeableTarget[],
  calls: number,
  halfway?: () => Promise<void>,
): Promise<{ expected: Expected; changed: number }> {
  const gqls = apis.map((api) => graphqlClient(api.url));
  const expected: Expected = new Map();
  for (const relation of Object.keys(mutations)) for (const post of posts) expected.set(`${relation}:${post.id}`, new Set());
  let answered = 0;
  let changed = 0;
  let half: Promise<void> | undefined;
  await Promise.all(
    users.map(async (user, u) => {
      for (let i = 0; i < calls; i++) {
        const relation: Burst = Math.random() < 0.7 ? "like" : "collect";
        const post = posts[Math.floor(Math.random() * posts.length)] as LikeableTarget;
        const join = Math.random() < 0.6;
        const field = mutations[relation][join ? 0 : 1];
        const gql = gqls[(u + i) % gqls.length] as (typeof gqls)[number];
        const response = await gql<Record<string, { changed: boolean }>>(
          `mutation($id: ID!) { ${field}(postId: $id) { changed } }`,
          { id: String(post.id) },
          user.token,
        );
        const answer = response.data?.[field];
        if (!answer) throw new Error(`${field} failed: ${JSON.stringify(response.errors)}`);
        if (answer.changed) changed++;
        const members = expected.get(`${relation}:${post.id}`) as Set<string>;
        if (join) members.add(String(user.id));
        else members.delete(String(user.id));
        if (++answered === Math.floor((users.length * calls) / 2) && halfway) half = halfway();
      }
    }),
  );
  await half;
  return { expected, changed };
}

/** Waits until Redis and PostgreSQL agree on every post, then checks both hold exactly what the answers said. */
async function expectHeld(posts: readonly LikeableTarget[], expected: Expected): Promise<void> {
  for (const relation of Object.keys(mutations) as Burst[]) {
    await agreeWithin({ db, redis }, config, posts, 60_000, relation);
    const inRedis = await redisState(redis, config.redisPartitions, posts, relation);
    for (const [i, post] of posts.entries()) {
      const want = [...(expected.get(`${relation}:${post.id}`) as Set<string>)].sort();
      expect({ post: post.id, relation, members: inRedis[i]?.members }).toEqual({ post: post.id, relation, members: want });
      expect({ post: post.id, relation, count: inRedis[i]?.count }).toEqual({ post: post.id, relation, count: want.length });
      expect(await databaseMembers(db, post, relation)).toEqual(want);
    }
  }
}

describe("two API processes and two workers", () => {
  it("when 40 users like, unlike, collect and uncollect through both API processes at once, then Redis and PostgreSQL hold exactly what was answered, and each change was published once", async () => {
    const [first, second] = [await startWorker(), await startWorker()] as [Worker, Worker];
    const posts = await createPosts({ db, redis }, config, author.id, 6);
    const users = await createUsers(db, config, 40);
    const { expected, changed } = await burst(users, posts, 25);
    await expectHeld(posts, expected);
    // Entries are read through one consumer group, so the two relays share them out, each entry once.
    const published = async () => (await metric(first, "likes_events_published_total")) + (await metric(second, "likes_events_published_total"));
    await eventually(
      async () => (await published()) >= changed,
      10_000,
      async () => `${await published()} published of ${changed} changes`,
    );
    expect(await published()).toBe(changed);
    await Promise.all(workers.splice(0).map((w) => w.process.stop("SIGTERM")));
  });

  it("when a worker is killed during the burst, then the other takes over its entries and messages, and duplicates change nothing", async () => {
    // A relay's entries are taken over 2 s after it stopped keeping them (30 s by default).
    const quickTakeover = { RELAY_CLAIM_IDLE_MS: "2000" };
    const [doomed] = [await startWorker(quickTakeover), await startWorker(quickTakeover)] as [Worker, Worker];
    const posts = await createPosts({ db, redis }, config, author.id, 6);
    const users = await createUsers(db, config, 40);
    const { expected } = await burst(users, posts, 25, async () => {
      expect(await doomed.process.stop("SIGKILL")).toBeNull();
    });
    await expectHeld(posts, expected);
    await Promise.all(workers.splice(0).map((w) => w.process.stop("SIGTERM")));
  });
});
