// The worker's local Redis Cluster (scripts/redis-cluster.sh, started by test/setup/global.ts)
// reached through the clients the service itself opens in cluster mode.
import { createHash } from "node:crypto";
import { readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Cluster, type Redis } from "ioredis";
import type { Config } from "../../src/config.js";
import { openClients, type Clients } from "../../src/stores/clients.js";
import { loadScript } from "../../src/stores/redis/scripts.js";
import { clusterNodes, silentLogger, testConfig } from "./env.js";

export interface ClusterClients extends Clients {
  readonly config: Config;
  /** clients.redis, known to be a cluster client. */
  readonly cluster: Cluster;
}

/**
 * openClients on a configuration naming the cluster's nodes, as `npm start` and
 * `npm run worker` open them with REDIS_CLUSTER_NODES set: auto-pipelining, the
 * command timeout, the relay's own connection.
 */
export async function openClusterClients(overrides: Record<string, string> = {}): Promise<ClusterClients> {
  const config = testConfig({ REDIS_CLUSTER_NODES: clusterNodes().join(","), ...overrides });
  const clients = await openClients(config, silentLogger, { relay: true });
  if (!(clients.redis instanceof Cluster)) {
    await clients.close();
    throw new Error(`Expected a cluster client for REDIS_CLUSTER_NODES=${config.redisClusterNodes.join(",")}, got a standalone one.`);
  }
  return { ...clients, config, cluster: clients.redis };
}

/**
 * Empties every master of the suite's own cluster, data and script cache, so a
 * file's checks see only what it wrote and ran. Never point it at a shared cluster.
 */
export async function emptyCluster(cluster: Cluster): Promise<void> {
  await Promise.all(
    cluster.nodes("master").map(async (node) => {
      await node.flushall();
      await node.script("FLUSH");
    }),
  );
}

const scriptsDir = path.join(path.dirname(fileURLToPath(import.meta.url)), "../../src/stores/redis/scripts");

/** The name of every script file beside the Redis stores (scripts/*.lua, includes aside). */
export const scriptFileNames = (): string[] =>
  readdirSync(scriptsDir)
    .filter((name) => name.endsWith(".lua"))
    .map((name) => name.slice(0, -".lua".length))
    .sort();

/**
 * The script files some master of the cluster has run since its cache was
 * emptied: ioredis sends a script's text (EVAL) on a connection's first call,
 * and Redis caches every script it ran by its SHA1.
 */
export async function scriptsRun(cluster: Cluster, files: readonly string[]): Promise<string[]> {
  const shas = files.map((file) => createHash("sha1").update(loadScript(file)).digest("hex"));
  const cached = await Promise.all(cluster.nodes("master").map((node) => node.script("EXISTS", ...shas) as Promise<number[]>));
  return files.filter((_, i) => cached.some((flags) => flags[i] === 1));
}

export interface Master {
  readonly id: string;
  readonly port: number;
  readonly node: Redis;
}

export async function masters(cluster: Cluster): Promise<Master[]> {
  return Promise.all(cluster.nodes("master").map(async (node) => ({ id: String(await node.cluster("MYID")), port: Number(node.options.port), node })));
}

export async function ownerOf(cluster: Cluster, slot: number, all: readonly Master[]): Promise<Master> {
  const ranges = await cluster.cluster("SLOTS");
  const range = ranges.find(([from, to]) => slot >= from && slot <= to);
  const owner = all.find((m) => m.id === range?.[2]?.[2]);
  if (!owner) throw new Error(`no master owns slot ${slot}`);
  return owner;
}

/** Moves `slot` from `from` to `to` one key at a time, as a reshard does, then tells every master. */
export async function migrate(slot: number, from: Master, to: Master, all: readonly Master[], pauseMs: number): Promise<number> {
  await to.node.cluster("SETSLOT", slot, "IMPORTING", from.id);
  await from.node.cluster("SETSLOT", slot, "MIGRATING", to.id);
  let moved = 0;
  for (;;) {
    const names = await from.node.cluster("GETKEYSINSLOT", slot, 1);
    if (names.length === 0) break;
    await from.node.call("MIGRATE", "127.0.0.1", to.port, "", 0, 5_000, "KEYS", ...names);
    moved += names.length;
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
  for (const master of [to, from, ...all.filter((m) => m !== to && m !== from)]) await master.node.cluster("SETSLOT", slot, "NODE", to.id);
  return moved;
}
