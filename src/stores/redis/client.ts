import { Cluster, Redis, type ChainableCommander } from "ioredis";
import { defineScripts, variableKeyCommands } from "./scripts.js";
import { RedisClockUnknownError } from "./redis-clock.js";
import { reconnectAfterSentinelRace, watchConnectionLoss } from "./connection-losses.js";

export type RedisClient = Redis | Cluster;

export interface RedisConnectionOptions {
  readonly url: string;
  /** host:port seeds; when non-empty the client speaks Redis Cluster. */
  readonly clusterNodes?: readonly string[];
  /**
   * A command unanswered this long fails with "Command timed out" (ioredis has no
   * default, so a stalled Redis would hold every request for as long as it stalls).
   * Blocking reads must block for less.
   */
  readonly commandTimeoutMs?: number;
  /** A connection that only subscribes (sharded pub/sub): on a cluster, one subscriber per master. */
  readonly subscriber?: boolean;
  /** host:port of Redis Sentinels: the primary they name `sentinelName` is used (`url` gives credentials and database). */
  readonly sentinels?: readonly string[];
  readonly sentinelName?: string;
}

/** A `host:port` setting as ioredis takes it; Redis's port, or a Sentinel's (26379), when none is given. */
export const hostAndPort = (node: string, defaultPort = 6379) => {
  const [host = "127.0.0.1", port = String(defaultPort)] = node.split(":");
  return { host, port: Number(port) };
};

/**
 * How long a connection with commands waiting may receive nothing before it is
 * dropped and made again, past the command timeout: a half-open connection (a
 * peer gone without a word, a network that drops everything) would otherwise hold
 * every later command until TCP gave up, minutes on. Blocking reads block for less
 * than the command timeout; a connection without one (the outbox relay's, whose
 * reads block for half a second) gets ten seconds. TCP keepalive probes find idle ones.
 */
const silentSocketMs = (commandTimeoutMs: number | undefined) => (commandTimeoutMs ?? 9_000) + 1_000;
const keepAliveDelayMs = 5_000;

interface QueuedCommand {
  readonly command: { readonly isSettled?: boolean };
}
interface ResendQueue {
  toArray(): QueuedCommand[];
  clear(): void;
  push(item: QueuedCommand): void;
}

/**
 * ioredis re-sends on the new connection every command the closed one left
 * unanswered (autoResendUnfulfilledCommands), those its caller stopped waiting
 * for at the command timeout included: a read would run for nobody, and a write
 * without a deadline of its own would apply after its caller answered that it
 * failed. Only commands someone still waits for are re-sent. The queue and the
 * flag are ioredis's internals (6.0.0, pinned in package.json); a test of this
 * file fails if they change.
 */
function resendOnlyAwaited(connection: Redis): void {
  connection.on("reconnecting", () => {
    const queue = (connection as unknown as { prevCommandQueue?: ResendQueue | null }).prevCommandQueue;
    if (!queue) return;
    const awaited = queue.toArray().filter((item) => !item.command.isSettled);
    queue.clear();
    for (const item of awaited) queue.push(item);
  });
}

/** A client with the service's scripts defined. */
export function createRedisClient(options: RedisConnectionOptions): RedisClient {
  const connection = {
    protocol: 2,
    commandTimeout: options.commandTimeoutMs,
    socketTimeout: silentSocketMs(options.commandTimeoutMs),
    keepAlive: keepAliveDelayMs,
  } as const;
  const client =
    options.clusterNodes && options.clusterNodes.length > 0
      ? new Cluster(
          options.clusterNodes.map(hostAndPort),
          // A cluster pipeline may only hold keys of one node; auto-pipelining groups
          // each tick's commands per node, which is what a batch read needs there.
          // It would group the scripts that take their key count first by the count.
          // The scripts a request waits on (a like's membership change, a budget charged
          // in Redis) leave at once instead: ioredis keeps one auto-pipeline in flight per
          // node, so a hot post's likes waited for each other's round trips. Measured with
          // two API processes (npm run bench -- scale), when a like also charged its budgets
          // in Redis: like-hot 1,153 → 1,539 likes/s, the machine's cores idle 0.32 → 0.02.
          {
            enableAutoPipelining: !options.subscriber,
            autoPipeliningIgnoredCommands: [...variableKeyCommands, "addMember", "removeMember", "chargeBudget"],
            shardedSubscribers: options.subscriber ?? false,
            lazyConnect: true,
            // RESP2 as on a standalone Redis: under RESP3 (ioredis 6's default) an XREADGROUP
            // reply arrives as a flattened map, not the list of [stream, entries] the outbox reads.
            redisOptions: connection,
          },
        )
      : new Redis(options.url, {
          lazyConnect: true,
          maxRetriesPerRequest: 3,
          ...connection,
          // The Sentinels tell the primary at each connect; the failover detector drops the
          // connection as soon as they announce a new one, rather than at the old one's death.
          ...(options.sentinels &&
            options.sentinels.length > 0 && {
              sentinels: options.sentinels.map((node) => hostAndPort(node, 26379)),
              name: options.sentinelName ?? "mymaster",
              failoverDetector: true,
            }),
        });
  if (client instanceof Cluster)
    client.on("+node", (node: Redis) => {
      resendOnlyAwaited(node);
      watchConnectionLoss(client, node);
    });
  else {
    resendOnlyAwaited(client);
    watchConnectionLoss(client, client);
    if (options.sentinels && options.sentinels.length > 0) reconnectAfterSentinelRace(client);
  }
  defineScripts(client);
  return client;
}

type BatchCommand = "hgetall" | "hget" | "sismember";
type Reply<C extends BatchCommand> = C extends "hgetall" ? Record<string, string> : C extends "hget" ? string | null : number;
type Call = readonly [key: string, ...args: string[]];

/** Adds a request's commands to a pipeline. */
export type PipelineCommands = (pipeline: ChainableCommander) => void;

/** A command that closes each tick's pipeline, its reply handed to every request of the tick after their own. */
export interface ClosingCommand {
  /** Adds it, given the latest moment (Date.now() terms) a request of the tick waits for. */
  add(pipeline: ChainableCommander, latestAnswerAtMs: number): void;
}

interface PendingGroup {
  readonly add: PipelineCommands;
  readonly answerAtMs: number;
  resolve(replies: unknown[]): void;
  reject(error: unknown): void;
}

/**
 * Every batch read issued in one tick leaves in one pipeline: one write, one
 * round trip. Unlike ioredis's auto-pipelining, which keeps one pipeline in
 * flight per connection, the next tick's pipeline does not wait for this one's
 * replies, so concurrent requests do not queue behind each other's round trips.
 */
class TickPipeline {
  private pending: PendingGroup[] = [];

  constructor(
    private readonly redis: Redis,
    private readonly closing?: ClosingCommand,
  ) {}

  run(add: PipelineCommands, answerAtMs = 0): Promise<unknown[]> {
    return new Promise((resolve, reject) => {
      if (this.pending.length === 0) process.nextTick(() => this.flush());
      this.pending.push({ add, answerAtMs, resolve, reject });
    });
  }

  private flush(): void {
    const groups = this.pending;
    this.pending = [];
    const pipeline = this.redis.pipeline();
    // Each group's slots in the pipeline; a group whose commands threw is answered at once
    // and its slots (if any were queued) are skipped, so one request's bad arguments fail it alone.
    const slots: { group: PendingGroup; start: number; end: number; failed: boolean }[] = [];
    for (const group of groups) {
      const start = pipeline.length;
      let failed = false;
      try {
        group.add(pipeline);
      } catch (error) {
        failed = true;
        group.reject(error);
      }
      slots.push({ group, start, end: pipeline.length, failed });
    }
    if (pipeline.length === 0) return;
    const closed = this.closing ? pipeline.length : -1;
    this.closing?.add(pipeline, Math.max(...groups.map((group) => group.answerAtMs)));
    pipeline.exec().then(
      (results) => {
        for (const { group, start, end, failed } of slots) {
          if (failed) continue;
          const replies: unknown[] = [];
          let failure: unknown = null;
          const take = (i: number) => {
            const [error, value] = results?.[i] ?? [new Error("missing pipeline reply"), null];
            if (error) failure ??= error;
            replies.push(value);
          };
          for (let i = start; i < end; i++) take(i);
          if (closed >= 0) take(closed);
          if (failure) group.reject(failure);
          else group.resolve(replies);
        }
      },
      (error: unknown) => slots.forEach(({ group, failed }) => failed || group.reject(error)),
    );
  }
}

/**
 * The replies of an executed pipeline, in order; the first command's error, if
 * any failed, is thrown rather than left in place of a reply.
 */
export async function pipelineReplies(executed: Promise<[Error | null, unknown][] | null>): Promise<unknown[]> {
  const results = (await executed) ?? [];
  const failed = results.find(([error]) => error)?.[0];
  if (failed) throw failed;
  return results.map(([, value]) => value);
}

/**
 * Whether an error says Redis did not answer (stalled, unreachable, connection
 * lost), as opposed to a fault of the command: the request may be retried.
 */
export function isRedisUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  return (
    error.name === "MaxRetriesPerRequestError" ||
    error.name === "WriteDeadlinePassedError" ||
    // This process cannot tell Redis's clock well enough to give a write its deadline (redis-clock.ts).
    error instanceof RedisClockUnknownError ||
    error.name === "ClusterAllFailedError" ||
    error.message === "Command timed out" ||
    error.message === "Command aborted due to connection close" ||
    error.message === "Cluster is disconnected." ||
    error.message.startsWith("None of startup nodes is available") ||
    // A slot being migrated refuses a script whose keys are split between its two
    // nodes (TRYAGAIN) until its last key moved; ioredis retries, then gives up so.
    error.message.startsWith("Too many Cluster redirections") ||
    error.message.startsWith("TRYAGAIN") ||
    // A cluster that sees a master failed refuses keys (of its slots, or all of them under
    // cluster-require-full-coverage) until a replica is promoted; ioredis retries its own
    // commands a while, but a pipeline's reply carries it as it came (replica-acks.ts).
    error.message.startsWith("CLUSTERDOWN") ||
    // A node refusing a slot it no longer serves, when the map learnt after it still pointed
    // there (a failover in progress): the command ran nowhere (replica-acks.ts).
    error.message.startsWith("MOVED ") ||
    // Past maxmemory, Redis refuses writes until eviction (memory-policy.ts) frees room.
    error.message.startsWith("OOM ") ||
    error.message === "Connection is closed." ||
    error.message.startsWith("Stream isn't writeable") ||
    // A cluster's sharded subscribers while its topology is being reset.
    error.message.startsWith("No sharded subscriber for slot") ||
    error.message.startsWith("No subscriber for the cluster") ||
    /^(connect )?(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE)/.test(error.message)
  );
}

/**
 * Whether an error says Redis itself could not be reached or did not answer at all
 * (refused, reset, closed, silent past the command timeout), as opposed to an answer
 * that refused the command: a write past its deadline, OOM, a slot moving. Only the
 * former makes reads go to PostgreSQL without asking (reachability.ts).
 */
export function isRedisOutOfReach(error: unknown): boolean {
  if (!(error instanceof Error) || !isRedisUnavailable(error)) return false;
  return !(
    error.name === "WriteDeadlinePassedError" ||
    error instanceof RedisClockUnknownError ||
    error.message.startsWith("OOM ") ||
    error.message.startsWith("TRYAGAIN") ||
    // Answers of a cluster in the middle of a failover (see isRedisUnavailable), as a slot moving is.
    error.message.startsWith("CLUSTERDOWN") ||
    error.message.startsWith("MOVED ") ||
    error.message.startsWith("Too many Cluster redirections")
  );
}

/** What both a client and a pipeline can be sent. */
interface Sender {
  hgetall(key: string): unknown;
  hget(key: string, field: string): unknown;
  sismember(key: string, member: string): unknown;
}

function send(target: Sender, command: BatchCommand, key: string, arg: string): unknown {
  switch (command) {
    case "hgetall":
      return target.hgetall(key);
    case "hget":
      return target.hget(key, arg);
    case "sismember":
      return target.sismember(key, arg);
  }
}

const tickPipelines = new WeakMap<Redis, TickPipeline>();

/** Sends a request's commands in the pipeline of the current tick, with every other request's; resolves with their replies. */
export function inTickPipeline(redis: Redis, add: PipelineCommands): Promise<unknown[]> {
  let tick = tickPipelines.get(redis);
  if (!tick) tickPipelines.set(redis, (tick = new TickPipeline(redis)));
  return tick.run(add);
}

/**
 * A tick pipeline of its own closed by `closing`: each request's replies end with
 * the closing command's, and it resolves once that command answered.
 */
export function closedTickPipeline(redis: Redis, closing: ClosingCommand): (add: PipelineCommands, answerAtMs: number) => Promise<unknown[]> {
  const tick = new TickPipeline(redis, closing);
  return (add, answerAtMs) => tick.run(add, answerAtMs);
}

/**
 * Sends a command per item in one round trip: in the tick's pipeline on a standalone
 * Redis, each on its own on a cluster (ioredis's auto-pipelining groups a tick's
 * commands per node). Without it, each call is a socket write of its own: 100 GETs
 * were about a third of a cold feed's API CPU, measured with a CPU profile.
 */
export async function inOneTrip<T>(redis: RedisClient, items: readonly T[], send: (to: ChainableCommander | Cluster, item: T) => unknown): Promise<unknown[]> {
  if (items.length === 0) return [];
  if (redis instanceof Cluster) return Promise.all(items.map((item) => send(redis, item)));
  return inTickPipeline(redis, (pipeline) => {
    for (const item of items) send(pipeline, item);
  });
}

/**
 * Runs one command over many keys in one round trip (one per node in a
 * cluster, where ioredis's auto-pipelining groups commands per node).
 */
export async function batchRead<C extends BatchCommand>(redis: RedisClient, command: C, calls: readonly Call[]): Promise<Reply<C>[]> {
  if (calls.length === 0) return [];
  if (redis instanceof Cluster) {
    return (await Promise.all(calls.map(([key, ...args]) => send(redis, command, key, args[0] ?? "")))) as Reply<C>[];
  }
  return (await inTickPipeline(redis, (pipeline) => {
    for (const [key, ...args] of calls) send(pipeline, command, key, args[0] ?? "");
  })) as Reply<C>[];
}
