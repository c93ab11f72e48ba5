// Acknowledged means replicated, when asked (REDIS_REPLICA_ACKS). Redis copies a
// primary's writes to its replicas after answering them, so a primary that dies
// can take its last acknowledged changes with it. With acks asked for, a change is
// answered only once that many replicas hold it (Redis's WAIT, within the
// request's deadline); otherwise the answer is SERVICE_UNAVAILABLE, and the change,
// already made on the primary, is not undone.
//
// WAIT holds its connection until the replicas answer, so the writes that wait
// have connections of their own: reads never queue behind a slow replica. On a
// standalone Redis (or under Sentinel) the writes of one tick leave in one
// pipeline closed by one WAIT, which covers them all: a replica acknowledges an
// offset of the replication stream, so everything the connection wrote before it.
// A cluster sends each write with its WAIT to the write's node. Writes take the
// connections in turn: behind one connection's WAIT, every later tick's writes
// waited for the replica's round trip too (like-hot: 1,042 likes/s on one
// connection against 1,715 without acks, docs/performance.md).
import { Cluster } from "ioredis";
import { UnavailableError } from "../../errors.js";
import { closedTickPipeline, pipelineReplies, type RedisClient } from "./client.js";

/** A write script's name and its keys and arguments, as the client's defined command takes them. */
export type ScriptCall = readonly [script: "addMember" | "removeMember", args: readonly (string | number)[]];

/**
 * Fewer replicas than asked confirmed a change by its deadline, or Redis did not
 * answer in time: the change may be made on the primary (it is not undone), and a
 * failover now could lose it. Repeating the request is safe and tells.
 */
export class ReplicasBehindError extends UnavailableError {
  constructor(
    readonly replicas: number,
    readonly confirmed: number | null,
  ) {
    super(
      `Redis did not confirm in time that ${replicas} replica(s) hold this change (${confirmed === null ? "no answer" : `${confirmed} did`}). ` +
        "It may have been made on the primary, and a failover could still lose it: repeat the request, which changes nothing if the change held and makes it if it was lost.",
    );
  }
}

export interface ReplicaAcks {
  /** How many replicas must hold a write before it is answered. */
  readonly replicas: number;
  /** Runs the script; its reply once `replicas` replicas hold it, else a ReplicasBehindError at `answerAtMs`. */
  send(call: ScriptCall, answerAtMs: number): Promise<unknown>;
}

const asked = new WeakMap<RedisClient, ReplicaAcks>();

/** The acks `redis`'s writes wait for, or null when they are answered on the primary's word. */
export const replicaAcksOf = (redis: RedisClient): ReplicaAcks | null => asked.get(redis) ?? null;

/**
 * How much sooner than its caller's answer WAIT gives up, so its count arrives to be
 * said: Redis ends a blocked command's wait on its cron, up to 1000 / hz (100 ms at
 * the default hz 10) after its timeout.
 */
const waitReplyMarginMs = 150;

/** WAIT's timeout: what is left until `answerAtMs` less the margin, at least 1 ms (0 would wait forever). */
const waitMs = (answerAtMs: number) => Math.max(1, Math.floor(answerAtMs - Date.now() - waitReplyMarginMs));

/** How many connections the writes that wait take turns on, per process. */
export const replicaAckConnections = 4;

/** Makes `redis`'s write scripts run on `writers`, in turn, and wait for `replicas` replicas (replicaAcksOf). */
export function askReplicaAcks(redis: RedisClient, writers: readonly RedisClient[], replicas: number): ReplicaAcks {
  const senders = writers.map((writer) => sendingAndWaiting(writer, replicas));
  let turn = 0;
  const acks: ReplicaAcks = {
    replicas,
    async send(call, answerAtMs) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), Math.max(0, answerAtMs - Date.now()))));
      try {
        const sent = (senders[turn++ % senders.length] as SendAndWait)(call, answerAtMs);
        // Answered late, when nobody waits any more: a failure then is nobody's to hear.
        sent.catch(() => {});
        const outcome = await Promise.race([sent, late]);
        if (outcome === "late") throw new ReplicasBehindError(replicas, null);
        const [reply, confirmed] = outcome;
        if (typeof confirmed !== "number" || confirmed < replicas) throw new ReplicasBehindError(replicas, typeof confirmed === "number" ? confirmed : null);
        return reply;
      } finally {
        clearTimeout(timer);
      }
    },
  };
  asked.set(redis, acks);
  return acks;
}

/** Sends of one write that a MOVED may cost: a map learnt after one points at the slot's node, unless the slot moves again. */
const maxMovedAttempts = 3;

/** A node's refusal of a key whose slot another node serves: nothing ran. */
const isMoved = (error: Error | null | undefined): boolean => error?.message.startsWith("MOVED ") ?? false;

/** Sends a write script and its WAIT; resolves with both replies. */
type SendAndWait = (call: ScriptCall, answerAtMs: number) => Promise<unknown[]>;

function sendingAndWaiting(writer: RedisClient, replicas: number): SendAndWait {
  const spread = (args: ScriptCall[1]) => args as [string, ...(string | number)[]];
  if (writer instanceof Cluster)
    return async ([script, args], answerAtMs) => {
      for (let attempt = 1; ; attempt++) {
        // A keyless WAIT goes to the node the script's keys route the pipeline to.
        const pipeline = writer.pipeline();
        pipeline[script](...spread(args));
        const results = (await pipeline.wait(replicas, waitMs(answerAtMs)).exec()) ?? [];
        // After a failover the client may still send the slot to a node that no longer serves it: the node
        // refuses the script (MOVED) without running it, and WAIT with another error, which ioredis does not
        // take as a redirect of the whole pipeline, so its slot map would stay wrong. Learn the map, send again.
        if (!isMoved(results[0]?.[0]) || attempt === maxMovedAttempts || Date.now() >= answerAtMs) return pipelineReplies(Promise.resolve(results));
        await new Promise<void>((resolve) => writer.refreshSlotsCache(() => resolve()));
        // A refresh asks node after node: past the deadline, the caller has had its answer.
        if (Date.now() >= answerAtMs) return pipelineReplies(Promise.resolve(results));
      }
    };
  const run = closedTickPipeline(writer, { add: (pipeline, latest) => void pipeline.wait(replicas, waitMs(latest)) });
  return ([script, args], answerAtMs) => run((pipeline) => void pipeline[script](...spread(args)), answerAtMs);
}
