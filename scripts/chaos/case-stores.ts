// The stores of one case: its Redis (a single server, with what `beforeStart`
// puts around it, or a cluster) with the service's settings for it and the
// check's own client, a proxy in front of the suite's RabbitMQ, and a database
// of its own in the suite's PostgreSQL cluster.
import { Cluster, Redis } from "ioredis";
import { startTcpProxy, type TcpProxy } from "../lib/tcp-proxy.js";
import type { ChaosCase } from "./case.js";
import type { RedisClient } from "./check.js";
import { startRedisCluster, type RedisClusterInstance } from "./redis-cluster.js";
import { startRedisInstance, type RedisInstance } from "./redis-instance.js";
import type { RunningCase } from "./running-case.js";

export interface CaseStores {
  readonly redis: RedisInstance;
  readonly cluster: RedisClusterInstance | null;
  readonly redisProxy: TcpProxy;
  readonly redisClient: RedisClient;
  readonly retarget: (port: number) => void;
  readonly redisEnv: Readonly<Record<string, string>>;
  readonly amqpProxy: TcpProxy;
  readonly databaseUrl: string;
}

type CaseRedis = Omit<CaseStores, "amqpProxy" | "databaseUrl">;
type Cleanup = (() => Promise<unknown>)[];

async function startClusterRedis(c: ChaosCase, cleanup: Cleanup): Promise<CaseRedis> {
  const cluster = await startRedisCluster({ appendOnly: c.redisAppendOnly });
  cleanup.push(() => cluster.stop());
  const redis = cluster.nodes[0] as RedisInstance;
  // Unused by the service, which reaches the nodes as they announce themselves; kept so every case has one.
  const redisProxy = await startTcpProxy({ host: "127.0.0.1", port: redis.port });
  cleanup.push(() => redisProxy.close());
  const redisClient = new Cluster(
    cluster.nodes.map((node) => ({ host: "127.0.0.1", port: node.port })),
    { lazyConnect: true, redisOptions: { maxRetriesPerRequest: null } },
  );
  redisClient.on("error", () => {});
  await redisClient.connect();
  cleanup.push(async () => redisClient.disconnect());
  const retarget = () => {
    throw new Error("a Redis Cluster fails over by itself: no address moves");
  };
  const redisEnv: Record<string, string> = { REDIS_CLUSTER_NODES: cluster.seeds };
  return { redis, cluster, redisProxy, redisClient, retarget, redisEnv };
}

async function startSingleRedis(c: ChaosCase, cleanup: Cleanup): Promise<CaseRedis> {
  const redis = await startRedisInstance({ appendOnly: c.redisAppendOnly, maxMemory: c.redisMaxMemory });
  cleanup.push(() => redis.stop());
  const around = c.beforeStart ? await c.beforeStart(redis) : null;
  if (around) cleanup.push(() => around.stop());
  const redisProxy = await startTcpProxy({ host: "127.0.0.1", port: redis.port });
  cleanup.push(() => redisProxy.close());
  // The checks' own way to Redis: never faulted, and moved with the service's by a failover.
  const inspectProxy = await startTcpProxy({ host: "127.0.0.1", port: redis.port });
  cleanup.push(() => inspectProxy.close());
  const redisClient = new Redis(inspectProxy.url, { lazyConnect: true, maxRetriesPerRequest: null });
  redisClient.on("error", () => {});
  await redisClient.connect();
  cleanup.push(async () => redisClient.disconnect());
  const retarget = (port: number) => {
    redisProxy.retarget(port);
    inspectProxy.retarget(port);
  };
  const redisEnv: Record<string, string> = { REDIS_URL: redisProxy.url, ...around?.env };
  return { redis, cluster: null, redisProxy, redisClient, retarget, redisEnv };
}

export async function startCaseStores(run: RunningCase): Promise<CaseStores> {
  const { c } = run;
  run.progress(`starting Redis${c.redisCluster ? " Cluster" : ""}, proxies and the database`);
  const redis = await (c.redisCluster ? startClusterRedis(c, run.cleanup) : startSingleRedis(c, run.cleanup));
  const broker = new URL(run.settings.amqpUrl);
  const amqpProxy: TcpProxy = await startTcpProxy({ host: broker.hostname, port: Number(broker.port || 5672) }, "amqp");
  run.cleanup.push(() => amqpProxy.close());
  const databaseUrl = await run.instances.postgres.createDatabase(`${run.instances.runTag}_${c.name.replaceAll("-", "_")}`);
  return { ...redis, amqpProxy, databaseUrl };
}
