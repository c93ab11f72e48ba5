// failover, failover-lag and failover-lag-acks: the case's Redis gets a replica,
// and under the load its primary is killed (SIGKILL) and the replica promoted
// behind the service's address (the proxy moves to it, as a managed Redis's
// endpoint or a virtual IP moves). In failover the replica is in sync up to the
// kill. In failover-lag it is cut off 1 s before it (SIGSTOP, its link killed on
// the primary, so it cannot catch up on resuming): the promoted replica lacks the
// changes the primary acknowledged in that second, which the relay carried on to
// PostgreSQL. The suite's history check then counts every answer that contradicts
// an earlier acknowledged one, and every pair whose final state in Redis or
// PostgreSQL is not the last acknowledged answer, with no reconcile run. In
// failover-lag-acks the service asks for REDIS_REPLICA_ACKS=1: likes made while
// the replica is cut off answer SERVICE_UNAVAILABLE, so nothing acknowledged is lost.
// sentinel-failover runs the service under three Sentinels of the case's own
// (REDIS_SENTINELS), which promote the replica themselves once the primary is killed.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Redis } from "ioredis";
import { startSentinels } from "../lib/sentinels.js";
import { at, type ChaosCase, type FaultContext } from "./case.js";
import { countsText, ms } from "./figures.js";
import { startRedisInstance, type RedisInstance } from "./redis-instance.js";

export const killAtMs = 4_000;
export const lagMs = 1_000;
/** The likes after the kill must succeed again within this (issue #34). */
const backWithinMs = 5_000;

const sentinelName = "likes-chaos";

let replica: RedisInstance | null = null;

/** Waits up to 10 s for the replica on `port` to be in sync with its primary; whether it is. */
export async function inSync(port: number): Promise<boolean> {
  const client = new Redis({ port, lazyConnect: true });
  client.on("error", () => {});
  try {
    await client.connect();
    for (let i = 0; i < 200; i++) {
      if ((await client.info("replication")).includes("master_link_status:up")) return true;
      await sleep(50);
    }
    return false;
  } finally {
    client.disconnect();
  }
}

/** A replica of the case's Redis, in sync before the service starts. */
async function startReplica(primary: RedisInstance) {
  const started = await startRedisInstance({ appendOnly: true, replicaOf: primary.port });
  replica = started;
  await inSync(started.port);
  return { env: {}, stop: () => started.stop() };
}

/** A replica and three Sentinels watching the primary, which the service finds through them. */
async function startReplicaAndSentinels(primary: RedisInstance) {
  const withReplica = await startReplica(primary);
  const dir = mkdtempSync(path.join(tmpdir(), "likes-chaos-sentinel-"));
  const sentinels = await startSentinels(dir, sentinelName, primary.port);
  const ports = sentinels.ports;
  const stop = async () => {
    sentinels.stop();
    rmSync(dir, { recursive: true, force: true });
    await withReplica.stop();
  };
  const client = new Redis({ port: ports[0], lazyConnect: true });
  client.on("error", () => {});
  try {
    await client.connect();
    for (let i = 0; i < 400 && ((await client.call("SENTINEL", "REPLICAS", sentinelName)) as unknown[]).length === 0; i++) await sleep(50);
  } finally {
    client.disconnect();
  }
  return { env: { REDIS_SENTINELS: ports.map((port) => `127.0.0.1:${port}`).join(","), REDIS_SENTINEL_NAME: sentinelName }, stop };
}

export interface Timing {
  /** When the replica was cut off (the lag cases), and when the primary died: ms into the load. */
  cutAt: number | null;
  killedAt: number;
}

/** Kills the primary, promotes the replica and moves the service's address to it. */
async function failOver(ctx: FaultContext, lag: boolean, sentinels: boolean, replicaAfter: boolean, timing: Timing): Promise<void> {
  const promoted = replica as RedisInstance;
  if (lag) {
    await at(ctx, killAtMs - lagMs);
    promoted.freeze();
    // Its link dropped, a replica resuming would catch up from the primary's backlog.
    await ctx.redisClient.call("CLIENT", "KILL", "TYPE", "replica");
    timing.cutAt = ctx.elapsedMs();
    ctx.note("replica paused (SIGSTOP) and its link killed: the primary alone acknowledges");
  }
  await at(ctx, killAtMs);
  await ctx.redis.crash();
  timing.killedAt = ctx.elapsedMs();
  ctx.note("primary kill -9");
  promoted.thaw();
  const client = new Redis(promoted.url, { lazyConnect: true });
  client.on("error", () => {});
  try {
    await client.connect();
    if (sentinels) {
      // The Sentinels see the primary down after 1 s and promote the replica; the service follows them.
      while (!(await client.info("replication")).includes("role:master")) await sleep(50);
      ctx.note("the Sentinels promoted the replica");
    } else {
      await client.replicaof("NO", "ONE");
      ctx.note("replica promoted; the service's address moved to it");
    }
  } finally {
    client.disconnect();
  }
  ctx.failOverTo(promoted.port);
  if (replicaAfter) {
    // With replica acks, writes wait for a replica of the new primary: one joins, as a deployment's would.
    const next = await startRedisInstance({ appendOnly: true, replicaOf: promoted.port });
    ctx.defer(() => next.stop());
    await inSync(next.port);
    ctx.note("a new replica of the promoted primary in sync");
  }
}

/** The likes of posts the killed primary served: all of them, but on a cluster only its shard's. */
export type Affected = (postId: string | undefined) => boolean;
const everyPost: Affected = () => true;

/** Likes and unlikes answered while the replica was cut off: what the promoted replica lacks. */
export function acknowledgedWhileCut(ctx: FaultContext, timing: Timing, acks: boolean, affected: Affected = everyPost): void {
  if (timing.cutAt === null) return;
  const cutAt = timing.cutAt;
  const inside = ctx.load.samples.filter((s) => affected(s.postId) && s.atMs >= cutAt && s.atMs + s.ms <= timing.killedAt);
  const answered = inside.filter((s) => s.error === null).length;
  const errors = new Map<string, number>();
  for (const s of inside) if (s.error !== null) errors.set(s.error, (errors.get(s.error) ?? 0) + 1);
  ctx.figure({
    name: "changes answered while the replica was cut off",
    value: `${answered} of ${inside.length} (errors: ${countsText(errors)})`,
    // Without acks, the case proves something only if the promoted replica lacks acknowledged changes.
    target: acks ? { text: "0", met: answered === 0 } : { text: "≥ 1", met: answered >= 1 },
  });
}

/** How long after the kill the first like (or unlike) was answered changed again, and the errors meanwhile. */
export function backAfter(ctx: FaultContext, killedAt: number, affected: Affected = everyPost): void {
  const after = ctx.load.samples.filter((s) => affected(s.postId) && s.atMs >= killedAt);
  const firstOk = after.find((s) => s.error === null);
  const errors = new Map<string, number>();
  for (const s of after) if (s.error !== null && (!firstOk || s.atMs < firstOk.atMs)) errors.set(s.error, (errors.get(s.error) ?? 0) + 1);
  const backMs = firstOk ? firstOk.atMs + firstOk.ms - killedAt : Number.NaN;
  ctx.figure({
    name: "likes succeed again after the kill",
    value: `${ms(backMs)} (errors before: ${countsText(errors)})`,
    target: { text: `≤ ${backWithinMs / 1000} s`, met: backMs <= backWithinMs },
  });
}

interface Variant {
  readonly lag: boolean;
  readonly sentinels?: boolean;
  readonly env?: Readonly<Record<string, string>>;
}

function failoverCase(name: string, summary: string, variant: Variant): ChaosCase {
  const timing: Timing = { cutAt: null, killedAt: 0 };
  const sentinels = variant.sentinels ?? false;
  const acks = variant.env?.REDIS_REPLICA_ACKS !== undefined;
  return {
    name,
    summary,
    layout: "npm start",
    redisAppendOnly: true,
    env: variant.env ?? {},
    loadSeconds: 12,
    beforeStart: sentinels ? startReplicaAndSentinels : startReplica,
    inject: (ctx) => failOver(ctx, variant.lag, sentinels, acks, timing),
    // Views are not waited for by replica acks: those the primary counted while the replica was cut off may go with it.
    ...(variant.lag && { viewsMayBeLost: { from: "replica paused", to: "primary kill" } }),
    async afterSettled(ctx) {
      backAfter(ctx, timing.killedAt);
      acknowledgedWhileCut(ctx, timing, acks);
    },
  };
}

export const failover = failoverCase(
  "failover",
  `a primary and its replica in sync: the primary killed (SIGKILL) ${killAtMs / 1000} s in, the replica promoted behind the service's address`,
  { lag: false },
);

export const failoverLag = failoverCase(
  "failover-lag",
  `as failover, but the replica cut off (SIGSTOP, its link killed) ${lagMs / 1000} s before the kill: the promoted replica lacks what the primary acknowledged meanwhile`,
  { lag: true },
);

export const failoverLagAcks = failoverCase(
  "failover-lag-acks",
  "as failover-lag, with REDIS_REPLICA_ACKS=1: what the replica did not confirm is never acknowledged; a new replica joins the promoted primary",
  { lag: true, env: { REDIS_REPLICA_ACKS: "1" } },
);

export const sentinelFailover = failoverCase(
  "sentinel-failover",
  `the service under three Sentinels (REDIS_SENTINELS): the primary killed (SIGKILL) ${killAtMs / 1000} s in, the Sentinels promote its replica`,
  { lag: false, sentinels: true },
);
