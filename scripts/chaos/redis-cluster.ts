// A Redis Cluster of the fault suite's own: 3 masters with a replica each, AOF on
// every node, a master seen down after 2 s (`cluster-node-timeout 2000`), as the
// fleet the failover issue was measured on. Its nodes are servers of
// redis-instance.ts, so a case kills, freezes and thaws them as it does a single one.
import { execFile } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { Redis } from "ioredis";
import { startRedisInstance, type RedisInstance } from "./redis-instance.js";

const run = promisify(execFile);

export interface RedisClusterInstance {
  readonly nodes: readonly RedisInstance[];
  /** Every node's address, as REDIS_CLUSTER_NODES takes them. */
  readonly seeds: string;
  /** The master serving `key`'s slot now, its replica, and every slot that master serves. */
  shardOf(key: string): Promise<ClusterShard>;
  stop(): Promise<void>;
}

export interface ClusterShard {
  readonly master: RedisInstance;
  readonly replica: RedisInstance;
  readonly slots: ReadonlySet<number>;
}

interface NodeLine {
  readonly id: string;
  readonly port: number;
  readonly master: boolean;
  /** The id of the master it replicates, for a replica. */
  readonly replicates: string | null;
  readonly slots: readonly number[];
}

/** Parses CLUSTER NODES: `<id> <ip:port@cport> <flags> <master> <ping> <pong> <epoch> <link> <slot ranges>…`. */
function parseNodes(text: string): NodeLine[] {
  return text
    .trim()
    .split("\n")
    .map((line) => {
      const [id = "", address = "", flags = "", master = "-", , , , , ...ranges] = line.split(" ");
      const slots: number[] = [];
      for (const range of ranges) {
        // Slots being imported or migrated ("[…]") are not served by this node yet.
        if (range.startsWith("[")) continue;
        const [from, to = from] = range.split("-").map(Number) as [number, number?];
        for (let slot = from; slot <= (to ?? from); slot++) slots.push(slot);
      }
      return {
        id,
        port: Number(address.split("@")[0]?.split(":")[1]),
        master: flags.split(",").includes("master") && !flags.includes("fail"),
        replicates: master === "-" ? null : master,
        slots,
      };
    });
}

async function ask<T>(port: number, question: (client: Redis) => Promise<T>): Promise<T> {
  const client = new Redis({ port, lazyConnect: true, maxRetriesPerRequest: 1 });
  client.on("error", () => {});
  try {
    await client.connect();
    return await question(client);
  } finally {
    client.disconnect();
  }
}

/** Waits until every node says the cluster is ok and every replica is in sync with its master. */
async function whole(nodes: readonly RedisInstance[]): Promise<void> {
  for (let i = 0; i < 400; i++) {
    const states = await Promise.all(
      nodes.map((node) =>
        ask(node.port, async (client) => {
          const [info, replication] = [await client.call("CLUSTER", "INFO"), await client.info("replication")];
          return String(info).includes("cluster_state:ok") && (replication.includes("role:master") || replication.includes("master_link_status:up"));
        }).catch(() => false),
      ),
    );
    if (states.every(Boolean)) return;
    await sleep(50);
  }
  throw new Error("the chaos suite's Redis Cluster did not come up whole within 20 s");
}

export async function startRedisCluster(options: { appendOnly: boolean }): Promise<RedisClusterInstance> {
  const nodes: RedisInstance[] = [];
  const stop = () => Promise.all(nodes.map((node) => node.stop()));
  try {
    for (let i = 0; i < 6; i++) nodes.push(await startRedisInstance({ appendOnly: options.appendOnly, clusterNode: true }));
    const addresses = nodes.map((node) => `127.0.0.1:${node.port}`);
    await run("redis-cli", ["--cluster", "create", ...addresses, "--cluster-replicas", "1", "--cluster-yes"], { timeout: 30_000 });
    await whole(nodes);
  } catch (error) {
    await stop();
    throw error;
  }
  const byPort = new Map(nodes.map((node) => [node.port, node]));
  return {
    nodes,
    seeds: nodes.map((node) => `127.0.0.1:${node.port}`).join(","),
    async shardOf(key) {
      // Asked of a node that is up: a case asks before it kills one.
      const live = nodes[0] as RedisInstance;
      const [slot, text] = await ask(
        live.port,
        async (client) => [Number(await client.call("CLUSTER", "KEYSLOT", key)), String(await client.call("CLUSTER", "NODES"))] as const,
      );
      const lines = parseNodes(text);
      const master = lines.find((line) => line.master && line.slots.includes(slot));
      const replica = master && lines.find((line) => line.replicates === master.id);
      const masterNode = master && byPort.get(master.port);
      const replicaNode = replica && byPort.get(replica.port);
      if (!master || !masterNode || !replicaNode) throw new Error(`no master with a replica serves slot ${slot} of the chaos suite's cluster`);
      return { master: masterNode, replica: replicaNode, slots: new Set(master.slots) };
    },
    stop: async () => {
      await stop();
    },
  };
}

/** The slot of each key, asked of a node of the cluster (Redis's own CRC16, so nothing here can disagree with it). */
export async function keySlots(port: number, keys: readonly string[]): Promise<number[]> {
  return ask(port, (client) => Promise.all(keys.map(async (key) => Number(await client.call("CLUSTER", "KEYSLOT", key)))));
}
