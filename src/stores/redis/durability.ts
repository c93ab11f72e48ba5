// What a Redis keeps when it restarts, and whether it is new enough. Redis holds likes the outbox has not yet
// handed to RabbitMQ: without AOF or a replica, a restart loses them silently
// (both stores agree afterwards, so nothing would ever notice).
import { Cluster } from "ioredis";
import type { Logger } from "pino";
import { StartRefusal } from "../../process/refusal.js";
import type { RedisClient } from "./client.js";

export interface RedisDurability {
  /** Every master appends to an AOF. */
  readonly aof: boolean;
  /** Every master has at least one connected replica. */
  readonly replicated: boolean;
  /** The fewest connected replicas of any master. */
  readonly fewestReplicas: number;
}

function field(info: string, name: string): string | undefined {
  return new RegExp(`^${name}:(.*)$`, "m").exec(info)?.[1]?.trim();
}

async function durabilityOf(node: { info(section: string): Promise<string> }): Promise<RedisDurability> {
  const [persistence, replication] = await Promise.all([node.info("persistence"), node.info("replication")]);
  const replicas = Number(field(replication, "connected_slaves") ?? 0);
  return { aof: field(persistence, "aof_enabled") === "1", replicated: replicas > 0, fewestReplicas: replicas };
}

export async function readDurability(redis: RedisClient): Promise<RedisDurability> {
  const nodes = redis instanceof Cluster ? redis.nodes("master") : [redis];
  const each = await Promise.all(nodes.map(durabilityOf));
  return { aof: each.every((d) => d.aof), replicated: each.every((d) => d.replicated), fewestReplicas: Math.min(...each.map((d) => d.fewestReplicas)) };
}

/** "durable": Redis must keep what it acknowledged (AOF or a replica); "volatile": the operator accepts losing what the outbox holds. */
export type DurabilityPolicy = "durable" | "volatile";

export class VolatileRedisError extends StartRefusal {
  override readonly name = "VolatileRedisError";
}

/**
 * Checks at start that Redis keeps acknowledged likes across a restart. Without
 * AOF or a replica it warns, and refuses to start when `refuse` is set (production)
 * unless the policy is "volatile".
 */
export async function checkDurability(redis: RedisClient, options: { policy: DurabilityPolicy; refuse: boolean; logger: Logger }): Promise<RedisDurability> {
  const durability = await readDurability(redis);
  if (durability.aof || durability.replicated) return durability;
  const risk =
    "Redis runs without AOF and without replicas: a Redis restart loses the likes its outbox still holds (acknowledged, not yet in RabbitMQ). " +
    "Run Redis with appendonly yes and appendfsync everysec, or set REDIS_DURABILITY=volatile to accept the loss.";
  if (options.policy === "volatile") {
    options.logger.warn({ durability, policy: options.policy }, "Redis keeps nothing across a restart; accepted by REDIS_DURABILITY=volatile");
  } else if (options.refuse) {
    throw new VolatileRedisError(risk);
  } else {
    options.logger.warn({ durability }, risk);
  }
  return durability;
}

/**
 * Warns at start when a master has fewer replicas than every write waits for
 * (REDIS_REPLICA_ACKS): its writes answer SERVICE_UNAVAILABLE until enough connect.
 * Not a refusal: replicas resync after restarts, and a start must not wait for them.
 */
export function warnOfMissingReplicas(durability: RedisDurability, replicaAcks: number, logger: Logger): void {
  if (replicaAcks > durability.fewestReplicas)
    logger.error(
      { replicaAcks, replicas: durability.fewestReplicas },
      `REDIS_REPLICA_ACKS=${replicaAcks}, but a Redis primary has ${durability.fewestReplicas} replica(s) connected: its likes, unlikes, collects and follows answer SERVICE_UNAVAILABLE until enough replicas connect.`,
    );
}

/** The oldest Redis the service runs on: scripts with flags, `SET NX GET`, `SMISMEMBER`, sharded pub/sub. */
export const minimumRedisVersion = [7, 0] as const;

export class RedisVersionError extends StartRefusal {
  override readonly name = "RedisVersionError";
}

/** Whether a `redis_version` (INFO server) is at least `minimumRedisVersion`. */
export function meetsRedisVersion(version: string): boolean {
  const [major = Number.NaN, minor = Number.NaN] = version.split(".").map(Number);
  const [needMajor, needMinor] = minimumRedisVersion;
  return major > needMajor || (major === needMajor && minor >= needMinor);
}

/** Refuses to start on a Redis older than `minimumRedisVersion` (every master of a cluster asked). */
export async function checkRedisVersion(redis: RedisClient): Promise<void> {
  const nodes = redis instanceof Cluster ? redis.nodes("master") : [redis];
  const versions = await Promise.all(nodes.map(async (node) => field(await node.info("server"), "redis_version") ?? "unknown"));
  const old = versions.find((version) => !meetsRedisVersion(version));
  if (old !== undefined) {
    throw new RedisVersionError(
      `Redis ${old} is too old: the service needs Redis ${minimumRedisVersion.join(".")} or later (scripts with flags, SET NX GET, SMISMEMBER, sharded pub/sub). Upgrade Redis.`,
    );
  }
}

export class EvictingRedisError extends StartRefusal {
  override readonly name = "EvictingRedisError";
}

/**
 * Checks at start that Redis evicts nothing of its own accord: it holds changes not yet
 * persisted (the outbox), receipts of writes, rebuild records and half-loaded targets,
 * and an evicting policy (the default of many managed offerings) would drop any of
 * them silently. The service keeps Redis under its maxmemory itself (memory-policy.ts).
 * Refuses to start when `refuse` is set (production), else warns; answers the policies found.
 */
export async function checkMemoryPolicy(redis: RedisClient, options: { refuse: boolean; logger: Logger }): Promise<string[]> {
  const nodes = redis instanceof Cluster ? redis.nodes("master") : [redis];
  const policies = await Promise.all(nodes.map(async (node) => field(await node.info("memory"), "maxmemory_policy") ?? "unknown"));
  const evicting = policies.find((policy) => policy !== "noeviction");
  if (evicting === undefined) return policies;
  const problem = `Redis's maxmemory-policy is ${evicting}: it may evict changes not yet persisted and half a target. Set maxmemory-policy noeviction (redis.conf, or CONFIG SET maxmemory-policy noeviction).`;
  if (options.refuse) throw new EvictingRedisError(problem);
  options.logger.warn({ policies }, problem);
  return policies;
}
