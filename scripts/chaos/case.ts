// What a fault case is and what it may do: the shape every case of
// `npm run chaos` has, and the handles the suite gives it while it runs.
import { setTimeout as sleep } from "node:timers/promises";
import { Cluster, type Redis } from "ioredis";
import type pg from "pg";
import type { TcpProxy } from "../lib/tcp-proxy.js";
import type { Cast } from "./cast.js";
import type { Endpoint } from "./endpoint.js";
import type { Figure } from "./figures.js";
import type { LoadOptions, LoadRun } from "./load.js";
import type { PostgresInstance } from "./postgres-instance.js";
import type { RedisClusterInstance } from "./redis-cluster.js";
import type { RedisInstance } from "./redis-instance.js";
import type { ServiceProcess } from "./service-process.js";
import type { Settling } from "./settle.js";

export type Layout = "npm start" | "api + worker";

export interface FaultContext {
  /** The case's Redis; on a cluster, its first node. */
  readonly redis: RedisInstance;
  /** The case's Redis Cluster, for a case that asked for one (`redisCluster`). */
  readonly cluster: RedisClusterInstance | null;
  /**
   * A client of the case's Redis, not through the service's proxy (through one of the suite's own, which follows a failover);
   * on a cluster, a cluster client of its nodes.
   */
  readonly redisClient: Redis | Cluster;
  /**
   * A failover behind the service's address: the service's proxy and the suite's own
   * client go to the Redis on `port` from now on (their connections are reset).
   */
  failOverTo(port: number): void;
  readonly partitions: number;
  readonly redisProxy: TcpProxy;
  readonly amqpProxy: TcpProxy;
  readonly postgres: PostgresInstance;
  /** The case's database (migrated, private to the case). */
  readonly databaseUrl: string;
  readonly hotPostId: string;
  /** The API the load uses (npm start's port, or api.ts's). */
  readonly api: Endpoint;
  /** Where that API serves plain HTTP (health routes): `http://127.0.0.1:<port>`. */
  readonly httpBase: string;
  /** The users and posts of the load. */
  readonly cast: Cast;
  /** Unique to this run of the case: a prefix for names the case makes. */
  readonly tag: string;
  /** The service's JWT_SECRET: a case signs tokens for users it wrote to PostgreSQL itself. */
  readonly jwtSecret: string;
  /** The running load; there is none yet while the case prepares. */
  readonly load: LoadRun;
  /** The running processes by role; `restart` starts one again as it was started and waits until it works. */
  process(role: "start" | "api" | "worker"): ServiceProcess;
  restart(role: "start" | "api" | "worker"): Promise<void>;
  /**
   * Starts one more API process (api.ts) on a port of its own, with `env` on top of
   * the case's settings, and waits until it serves; the suite stops it with the rest.
   */
  startApi(name: string, env: Readonly<Record<string, string>>): Promise<{ readonly api: Endpoint; readonly process: ServiceProcess }>;
  /** Runs `npm run reconcile`'s entry against the case's instances; resolves with its exit code. */
  reconcile(): Promise<number | null>;
  /** Waits until the outbox and the case's queues are empty (seen twice in a row). */
  settle(timeoutMs: number): Promise<Settling>;
  /** Runs `close` when the case ends, before the suite stops the service and the instances. */
  defer(close: () => Promise<unknown>): void;
  /** Posts the case made for its own measurement: their likes are not the load's, and the case checks them itself. */
  ownPosts(ids: readonly string[]): void;
  /** Milliseconds since the load started. */
  elapsedMs(): number;
  /** Notes a step of the fault in the case's timeline. */
  note(event: string): void;
  /** Reports a figure of the case; one with a target it missed fails the case. */
  figure(figure: Figure): void;
}

export interface ChaosCase {
  readonly name: string;
  readonly summary: string;
  readonly layout: Layout;
  readonly redisAppendOnly: boolean;
  /** Runs the service on a Redis Cluster of 3 masters with a replica each (redis-cluster.ts), with no proxy in front. */
  readonly redisCluster?: boolean;
  /** Redis's `maxmemory` (as redis-server takes it, such as "256mb"); none by default. */
  readonly redisMaxMemory?: string;
  /** Settings of the service beyond the suite's defaults. */
  readonly env?: Readonly<Record<string, string>>;
  /** The load of this case, where it differs from the suite's. */
  readonly load?: Partial<LoadOptions>;
  /** How long the load runs at least; the fault happens inside it, and the load runs until the fault is over. */
  readonly loadSeconds: number;
  /** Set when the case is expected to lose what Redis held at a crash, not counted as a failure then. */
  readonly expectsLoss?: string;
  /**
   * Which acknowledged views the case may lose: those an API process killed held in
   * memory since its last flush; those answered between two steps of the timeline
   * (the first noted step containing `from`, less a flush interval, to the one
   * containing `to`: an API process cannot flush to a Redis it cannot reach, and
   * what it holds when it stops or is killed then is gone); or any (Redis without
   * persistence). None otherwise.
   */
  readonly viewsMayBeLost?: "flushWindow" | { readonly from: string; readonly to: string } | "any";
  /**
   * Runs once the case's Redis runs, before the service starts: servers of the case's own
   * around it (a replica, Sentinels), stopped by `stop`; answers settings of the service.
   */
  beforeStart?(redis: RedisInstance): Promise<{ readonly env: Readonly<Record<string, string>>; stop(): Promise<void> }>;
  /** Why the case cannot run with these instances, or null. */
  unavailable?(postgres: PostgresInstance): string | null;
  /** Runs once the service serves and the load's users and posts exist, before the load starts. */
  prepare?(ctx: FaultContext): Promise<void>;
  inject(ctx: FaultContext): Promise<void>;
  /** Runs once the pipeline has settled, before the suite's own check: figures that need the stores at rest. */
  afterSettled?(ctx: FaultContext, sql: pg.Client): Promise<void>;
}

/** The case's client of its single Redis: the cases that measure one server's memory, commands or keys run on one. */
export function singleRedis(ctx: FaultContext): Redis {
  if (ctx.redisClient instanceof Cluster) throw new Error("this case runs on a single Redis, not a cluster");
  return ctx.redisClient;
}

/** Waits until `ms` into the load. */
export async function at(ctx: FaultContext, ms: number): Promise<void> {
  const wait = ms - ctx.elapsedMs();
  if (wait > 0) await sleep(wait);
}

/** Pauses the load's likes until the pipeline has settled, so a flush of Redis then loses nothing acknowledged. */
export async function settleBeforeFlush(ctx: FaultContext): Promise<void> {
  ctx.note("likes paused; waiting for the pipeline to settle");
  await ctx.load.pause();
  const settled = await ctx.settle(30_000);
  if (!settled.settled) throw new Error(`the pipeline did not settle before the flush: ${settled.left}`);
}
