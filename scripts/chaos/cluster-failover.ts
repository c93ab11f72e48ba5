// cluster-failover, cluster-failover-lag and cluster-failover-lag-acks: the service
// on a Redis Cluster of the suite's own (3 masters with a replica each, AOF,
// `cluster-node-timeout 2000`), and under the load the master serving the hot post
// killed (SIGKILL). The cluster sees it down and promotes its replica itself; once
// it has, the old master starts again and rejoins as a replica of its successor. In
// the lag cases its replica was cut off 1 s before (SIGSTOP, its link killed on the
// master), so the promoted replica lacks what the master acknowledged in that
// second, as in the fleet where failover-lag was first measured. The other masters'
// posts never stop: the figures are of the killed master's posts.
import { Redis } from "ioredis";
import { setTimeout as sleep } from "node:timers/promises";
import { createRedisKeys } from "../../src/stores/redis/keys.js";
import { at, type ChaosCase, type FaultContext } from "./case.js";
import { acknowledgedWhileCut, backAfter, inSync, killAtMs, lagMs, type Affected, type Timing } from "./failover.js";
import { keySlots, type ClusterShard } from "./redis-cluster.js";

interface Shard extends ClusterShard {
  /** The load's posts that master serves. */
  readonly posts: ReadonlySet<string>;
}

async function hotShard(ctx: FaultContext): Promise<Shard> {
  const cluster = ctx.cluster;
  if (!cluster) throw new Error("a cluster failover case runs on a Redis Cluster (redisCluster)");
  const keys = createRedisKeys(ctx.partitions);
  const counters = (id: string) => keys.counters({ type: "post", id: BigInt(id) });
  const shard = await cluster.shardOf(counters(ctx.hotPostId));
  const slots = await keySlots(
    shard.master.port,
    ctx.cast.posts.map((post) => counters(post.id)),
  );
  const posts = new Set(ctx.cast.posts.filter((_, i) => shard.slots.has(slots[i] ?? -1)).map((post) => post.id));
  return { ...shard, posts };
}

async function role(port: number): Promise<string> {
  const client = new Redis({ port, lazyConnect: true, maxRetriesPerRequest: 1 });
  client.on("error", () => {});
  try {
    await client.connect();
    return /role:(\w+)/.exec(await client.info("replication"))?.[1] ?? "unknown";
  } catch {
    return "unreachable";
  } finally {
    client.disconnect();
  }
}

async function failOver(ctx: FaultContext, shard: Shard, lag: boolean, timing: Timing): Promise<void> {
  if (lag) {
    await at(ctx, killAtMs - lagMs);
    shard.replica.freeze();
    // Its link dropped, a replica resuming would catch up from the master's backlog.
    const master = new Redis({ port: shard.master.port, lazyConnect: true });
    master.on("error", () => {});
    await master.connect();
    await master.call("CLIENT", "KILL", "TYPE", "replica");
    master.disconnect();
    timing.cutAt = ctx.elapsedMs();
    ctx.note("the hot post's replica paused (SIGSTOP) and its link killed: its master alone acknowledges");
  }
  await at(ctx, killAtMs);
  await shard.master.crash();
  timing.killedAt = ctx.elapsedMs();
  ctx.note(`the hot post's master kill -9 (${shard.posts.size} of ${ctx.cast.posts.length} posts)`);
  shard.replica.thaw();
  for (let waited = 0; (await role(shard.replica.port)) !== "master"; waited += 50) {
    if (waited > 30_000) throw new Error("the cluster did not promote the killed master's replica within 30 s");
    await sleep(50);
  }
  ctx.note("the cluster promoted its replica");
  // Started again as a supervisor would: it finds its slots served by its successor and replicates it.
  await shard.master.crashAndRestart(0);
  ctx.note(
    (await inSync(shard.master.port))
      ? "the old master back, a replica of its successor in sync"
      : "the old master back, not in sync with its successor after 10 s",
  );
}

function clusterFailoverCase(name: string, summary: string, lag: boolean, env: Readonly<Record<string, string>> = {}): ChaosCase {
  const timing: Timing = { cutAt: null, killedAt: 0 };
  let shard: Shard | null = null;
  const affected: Affected = (postId) => postId !== undefined && (shard?.posts.has(postId) ?? false);
  return {
    name,
    summary,
    layout: "npm start",
    redisAppendOnly: true,
    redisCluster: true,
    env,
    // As the fleet the issue measured: 30 users liking and unliking 50 posts, spread over the three masters.
    load: { likers: 30, posts: 50 },
    loadSeconds: 12,
    async prepare(ctx) {
      shard = await hotShard(ctx);
    },
    inject: (ctx) => failOver(ctx, shard as Shard, lag, timing),
    // Views are not waited for by replica acks: those the master counted while its replica was cut off may go with it.
    ...(lag && { viewsMayBeLost: { from: "replica paused", to: "master kill" } }),
    async afterSettled(ctx) {
      backAfter(ctx, timing.killedAt, affected);
      acknowledgedWhileCut(ctx, timing, env.REDIS_REPLICA_ACKS !== undefined, affected);
    },
  };
}

export const clusterFailover = clusterFailoverCase(
  "cluster-failover",
  `a Redis Cluster of 3 masters with a replica each: the hot post's master killed (SIGKILL) ${killAtMs / 1000} s in, the cluster promotes its replica`,
  false,
);

export const clusterFailoverLag = clusterFailoverCase(
  "cluster-failover-lag",
  `as cluster-failover, but the replica cut off (SIGSTOP, its link killed) ${lagMs / 1000} s before the kill: the promoted replica lacks what the master acknowledged meanwhile`,
  true,
);

export const clusterFailoverLagAcks = clusterFailoverCase(
  "cluster-failover-lag-acks",
  "as cluster-failover-lag, with REDIS_REPLICA_ACKS=1: what the replica did not confirm is never acknowledged",
  true,
  { REDIS_REPLICA_ACKS: "1" },
);
