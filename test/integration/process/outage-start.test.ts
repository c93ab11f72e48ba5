// npm start through a Redis outage: a process that starts while Redis is down waits
// for it (liveness fine, readiness 503) instead of dying, the supervisor never stops
// the healthy processes for it, and the service serves again soon after Redis returns.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../../scripts/lib/ports.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import { createUsers, graphqlClient, openDatabase, privateRedisPort, testConfig, type TestUser } from "../../support/env.js";
import { eventually } from "../../support/pipeline.js";
import { startServiceProcess, type ServiceProcess } from "../../support/service-process.js";
import { startTcpProxy, type TcpProxy } from "../../support/tcp-proxy.js";

let redisProxy: TcpProxy;
let db: Database;

beforeAll(async () => {
  redisProxy = await startTcpProxy({ host: "127.0.0.1", port: privateRedisPort() });
  db = openDatabase();
});
afterAll(async () => {
  redisProxy.resume();
  await redisProxy.close();
  await db.$disconnect();
});

function pidsOf(service: ServiceProcess, msg: string): number[] {
  return service
    .output()
    .split("\n")
    .filter((line) => line.includes(`"msg":"${msg}"`))
    .map((line) => Number(/"pid":(\d+)/.exec(line)?.[1]));
}

/** How many attempts to reach the stores each process (by pid) logged as failed. */
function failedAttemptsByPid(output: string): Map<number, number> {
  const failed = new Map<number, number>();
  for (const line of output.split("\n").filter((l) => l.includes('"msg":"reaching the stores failed'))) {
    const pid = Number(/"pid":(\d+)/.exec(line)?.[1]);
    failed.set(pid, (failed.get(pid) ?? 0) + 1);
  }
  return failed;
}

/** Whether a like (which needs Redis) answers with data, through whichever process the port hands the request to. */
async function likes(url: string, user: TestUser, postId: string): Promise<boolean> {
  const gql = graphqlClient(url);
  const answer = await gql<{ likePost: { changed: boolean } }>(`mutation($id: ID!) { likePost(postId: $id) { changed } }`, { id: postId }, user.token).catch(
    () => null,
  );
  return answer?.data?.likePost !== undefined && !answer.errors;
}

async function status(url: string, path: string): Promise<number> {
  return (await fetch(new URL(path, url))).status;
}

describe("npm start through a Redis outage", () => {
  it("when Redis is down while an API process is killed, then its replacement keeps trying, nothing else is stopped, and the service serves within 10 s of Redis's return", async () => {
    const config = testConfig();
    const service = await startServiceProcess(config, { REDIS_URL: redisProxy.url, WEB_CONCURRENCY: "2", PORT: String(await freePort()) });
    try {
      await eventually(
        async () => pidsOf(service, "API process ready").length >= 2 && pidsOf(service, "pipeline running").length >= 1,
        30_000,
        () => service.output(),
      );
      const [user] = await createUsers(db, config, 1);
      if (!user) throw new Error("no user made");
      const created = await graphqlClient(service.url)<{ createPost: { id: string } }>(`mutation { createPost(title: "t", body: "b") { id } }`, {}, user.token);
      const postId = created.data?.createPost.id;
      if (!postId) throw new Error(`no post made: ${JSON.stringify(created)}`);
      const [killed, healthy] = pidsOf(service, "API process ready") as [number, number];
      const [pipeline] = pidsOf(service, "pipeline running") as [number];

      redisProxy.refuse();
      const failedStarts = () => (service.output().match(/reaching the stores failed/g) ?? []).length;
      const failedBefore = failedStarts();
      process.kill(killed, "SIGKILL");
      // The replacement fails its start again and again (start-up.ts's back-off): three tries, then three more.
      await eventually(
        async () => failedStarts() >= failedBefore + 3,
        20_000,
        () => service.output(),
      );
      expect(await status(service.url, "health/live")).toBe(200);
      // The healthy process's readiness says so once its probe of Redis fails.
      await eventually(
        async () => (await status(service.url, "health/ready")) === 503,
        10_000,
        () => service.output(),
      );
      await eventually(
        async () => failedStarts() >= failedBefore + 6,
        20_000,
        () => service.output(),
      );
      expect(service.output()).not.toContain("stopping everything");
      expect(service.child.exitCode).toBeNull();
      for (const pid of [healthy, pipeline]) expect(() => process.kill(pid, 0)).not.toThrow();

      redisProxy.resume();
      const returnedAt = Date.now();
      await eventually(
        async () => (await likes(service.url, user, postId)) && (await likes(service.url, user, postId)),
        15_000,
        () => service.output(),
      );
      // Within the healthy process's next reconnect (ioredis waits at most 2 s between tries) and
      // the replacement's next start (the start's back-off reaches 2 s): about 5 s on a quiet
      // machine, 10 s allowed for one whose cores another test file shares.
      const servedAfterMs = Date.now() - returnedAt;
      expect(servedAfterMs <= 10_000 ? "≤ 10 s" : `${servedAfterMs} ms`).toBe("≤ 10 s");
      // The replacement serves too: every request answers, whichever process takes it.
      await eventually(
        async () => pidsOf(service, "API process ready").length >= 3,
        15_000,
        () => service.output(),
      );
      const answers = await Promise.all(Array.from({ length: 10 }, () => likes(service.url, user, postId)));
      expect(answers.every(Boolean)).toBe(true);
    } finally {
      redisProxy.resume();
      expect(await service.stop("SIGTERM")).toBe(0);
    }
  });

  it("when npm start starts during a Redis outage, then every process waits through attempt after attempt, ready 503 and live meanwhile, and serves once Redis returns", async () => {
    const config = testConfig();
    redisProxy.refuse();
    const port = await freePort();
    const started = startServiceProcess(config, { REDIS_URL: redisProxy.url, WEB_CONCURRENCY: "2", PORT: String(port) });
    let service: ServiceProcess | null = null;
    try {
      service = await started;
      const url = service.url;
      const output = () => service?.output() ?? "";
      // Two API processes and the pipeline each fail six attempts: with the start's backoff (0.25 s doubling
      // to 2 s), each has waited about 8 s, past every wait of the backoff's growth, and is still waiting.
      await eventually(
        async () => {
          const failed = failedAttemptsByPid(output());
          return failed.size >= 3 && [...failed.values()].every((attempts) => attempts >= 6);
        },
        30_000,
        output,
      );
      expect(await status(url, "health/live")).toBe(200);
      expect(await status(url, "health/ready")).toBe(503);
      const waiting = await fetch(new URL("graphql", url), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: '{"query":"{ __typename }"}',
      });
      expect(waiting.status).toBe(503);
      expect(((await waiting.json()) as { errors: { extensions: { code: string } }[] }).errors[0]?.extensions.code).toBe("SERVICE_UNAVAILABLE");
      expect(service.child.exitCode).toBeNull();
      // Waiting, not dying and being started again (an unhandled rejection at start would end a process).
      expect(output()).not.toContain("process died");

      redisProxy.resume();
      await eventually(
        async () => pidsOf(service as ServiceProcess, "API process ready").length >= 2 && pidsOf(service as ServiceProcess, "pipeline running").length >= 1,
        30_000,
        () => service?.output() ?? "",
      );
      expect(await status(url, "health/ready")).toBe(200);
      const [user] = await createUsers(db, config, 1);
      if (!user) throw new Error("no user made");
      const created = await graphqlClient(url)<{ createPost: { id: string } }>(`mutation { createPost(title: "t", body: "b") { id } }`, {}, user.token);
      expect(await likes(url, user, created.data?.createPost.id ?? "")).toBe(true);
    } finally {
      redisProxy.resume();
      if (service) expect(await service.stop("SIGTERM")).toBe(0);
      else await started.then((s) => s.stop("SIGKILL")).catch(() => null);
    }
  });
});
