// Redis's clock as this process knows it. A write carries its deadline on Redis's
// clock (write-deadline.ts); set from this process's clock with a fixed allowance,
// a Redis 2 s ahead refused every write and one 2 s behind let a write whose
// failure was answered apply later. So the offset between the clocks is measured
// all along: every few seconds one TIME, whose answer Redis read somewhere between
// sending and answering, so that half the round trip bounds the estimate's error.
// As NTP does, the sample of the shortest round trip among the recent ones is
// kept, its bound widened for the drift of the clocks since it was taken; a
// sample that contradicts it (a clock was stepped) makes the older ones void.
import { Cluster, type Redis } from "ioredis";
import { UnavailableError } from "../../errors.js";

/** A client whose clock is watched: a standalone Redis or a cluster (client.ts's RedisClient is either). */
type Client = Redis | Cluster;

/** How long a client waits before retrying a write refused for the clock: about two samples. */
const clockRetrySeconds = 10;

/** One TIME: Redis's clock minus this process's, and the bound of that estimate's error, in ms. */
export interface ClockSample {
  readonly offsetMs: number;
  readonly errorMs: number;
  /** When it was taken, on this process's monotonic clock (performance.now()). */
  readonly takenAtMs: number;
}

/** What is known of the offset: Redis's clock is between `lowerMs` and `upperMs` ahead of this process's. */
export interface ClockBounds {
  readonly lowerMs: number;
  readonly upperMs: number;
}

/** How far the clocks may drift apart per millisecond between samples: 500 ppm, well above a crystal's. */
const driftPerMs = 0.0005;
/** Date.now() counts whole milliseconds, Redis's TIME microseconds: the estimate may be off by this much more. */
const resolutionMs = 1;

/** A sample from one TIME sent at `sentMs` and answered at `answeredMs` (this process's clock, and its monotonic clock at the answer). */
export function sampleOf(sentMs: number, redisTime: readonly (string | number)[], answeredMs: number, takenAtMs: number): ClockSample {
  const redisMs = Number(redisTime[0]) * 1000 + Number(redisTime[1]) / 1000;
  return { offsetMs: redisMs - (sentMs + answeredMs) / 2, errorMs: Math.max(0, answeredMs - sentMs) / 2 + resolutionMs, takenAtMs };
}

/** A sample's bound on the offset at `nowMs` (monotonic), widened by the drift since it was taken. */
function boundsOf(sample: ClockSample, nowMs: number): ClockBounds {
  const error = sample.errorMs + driftPerMs * Math.max(0, nowMs - sample.takenAtMs);
  return { lowerMs: sample.offsetMs - error, upperMs: sample.offsetMs + error };
}

const overlap = (a: ClockBounds, b: ClockBounds) => a.lowerMs <= b.upperMs && b.lowerMs <= a.upperMs;

/**
 * The samples worth keeping at `nowMs`: those of the last `windowMs` (at least the
 * newest, whose bound the drift widens while Redis does not answer), and none
 * older than a sample that contradicts them (its bound and theirs do not meet:
 * one of the clocks was stepped since).
 */
export function keptSamples(samples: readonly ClockSample[], nowMs: number, windowMs: number): ClockSample[] {
  const recent = samples.filter((s, i) => nowMs - s.takenAtMs <= windowMs || i === samples.length - 1);
  let from = 0;
  recent.forEach((sample, i) => {
    for (let j = from; j < i; j++) if (!overlap(boundsOf(recent[j] as ClockSample, nowMs), boundsOf(sample, nowMs))) from = j + 1;
  });
  return recent.slice(from);
}

/** The tightest bound the samples give at `nowMs`, or null without any. */
export function bestBounds(samples: readonly ClockSample[], nowMs: number): ClockBounds | null {
  let best: ClockBounds | null = null;
  for (const sample of samples) {
    const bounds = boundsOf(sample, nowMs);
    if (!best || bounds.upperMs - bounds.lowerMs < best.upperMs - best.lowerMs) best = bounds;
  }
  return best;
}

/** How far apart the bounds may be before writes are refused: beyond it a write could wait needlessly, or its deadline could not be told. */
export const clockUncertaintyAllowanceMs = 100;

/** A write refused because this process cannot tell Redis's clock well enough: nothing was done. */
export class RedisClockUnknownError extends UnavailableError {}

export interface RedisClock {
  /** What is known of the offset now; null when no recent sample is. */
  bounds(): ClockBounds | null;
  /** Why writes cannot be given a deadline on Redis's clock now (in words for the client), or null. */
  problem(): string | null;
  /**
   * The last millisecond, on Redis's clock, at which a write whose caller answers
   * at `answerAtMs` (this process's clock) may still apply: the earliest Redis's
   * clock can read then. Throws a RedisClockUnknownError naming the clock when unknown.
   */
  deadlineFor(answerAtMs: number): number;
  /** Whether every node answered the last round of samples: while one does not, the clock is not what is wrong. */
  answering(): boolean;
  /** Takes a sample from every node now. */
  sample(): Promise<void>;
  close(): void;
}

export interface RedisClockOptions {
  /** How often the offset is sampled; default 5 s. */
  readonly everyMs?: number;
  /** How long a sample counts; default 60 s. */
  readonly windowMs?: number;
}

/** The clock of a client nobody watches: Redis's assumed within the allowance of this process's, as NTP keeps hosts. */
const assumedClock: RedisClock = {
  bounds: () => ({ lowerMs: -clockUncertaintyAllowanceMs, upperMs: clockUncertaintyAllowanceMs }),
  problem: () => null,
  answering: () => true,
  // A wait too short for the allowance keeps half of it for the write.
  deadlineFor: (answerAtMs) => answerAtMs - Math.min(clockUncertaintyAllowanceMs, Math.max(0, answerAtMs - Date.now()) / 2),
  sample: async () => {},
  close: () => {},
};

const watched = new WeakMap<Client, RedisClock>();

/** The clock watched over `redis` (watchRedisClock), or one that assumes both clocks agree within the allowance. */
export function redisClockOf(redis: Client): RedisClock {
  return watched.get(redis) ?? assumedClock;
}

/** A server whose clock is sampled. */
interface Node {
  readonly name: string;
  time(): Promise<(string | number)[]>;
}

/** The clients to sample: a standalone Redis, or each master of a cluster (each has its own clock). */
function nodesOf(redis: Client): Node[] {
  if (!(redis instanceof Cluster)) return [{ name: "redis", time: () => redis.time() }];
  return redis.nodes("master").map((node) => ({ name: `${node.options.host ?? ""}:${node.options.port ?? ""}`, time: () => node.time() }));
}

/** What the samples of every node tell at `atMs`, against the monotonic clock. */
interface Combined {
  readonly bounds: ClockBounds | null;
  /** The widest bound of a single node: beyond the allowance, round trips were slow; within, the masters disagree. */
  readonly nodeUncertaintyMs: number;
  readonly atMs: number;
}

/** Prunes each listed node's samples and combines their bounds: a node never sampled leaves deadlines unknown. */
function combinedBounds(samples: Map<string, ClockSample[]>, listed: readonly string[], atMs: number, windowMs: number): Combined {
  let all: ClockBounds | null = null;
  let nodeUncertaintyMs = 0;
  for (const name of listed) {
    const kept = keptSamples(samples.get(name) ?? [], atMs, windowMs);
    samples.set(name, kept);
    const node = bestBounds(kept, atMs);
    if (!node) return { bounds: null, nodeUncertaintyMs: 0, atMs };
    nodeUncertaintyMs = Math.max(nodeUncertaintyMs, (node.upperMs - node.lowerMs) / 2);
    // Which master a write goes to is not known here: its deadline must hold on each.
    all = all ? { lowerMs: Math.min(all.lowerMs, node.lowerMs), upperMs: Math.max(all.upperMs, node.upperMs) } : node;
  }
  return { bounds: all, nodeUncertaintyMs, atMs };
}

/** This process's wall clock less its monotonic clock: moves when the wall clock is stepped. */
const wallLessMonotonic = () => Date.now() - performance.now();

/** Why writes cannot be timed with `bounded` (in words for the client), or null. */
function refusal(
  bounded: ClockBounds | null,
  seen: { readonly silentForMs: number; readonly windowMs: number; readonly nodeUncertaintyMs: number },
): string | null {
  if (!bounded) return "This process has not yet had an answer to Redis's TIME, so it cannot tell Redis's clock: writes are refused until it has.";
  const uncertainty = (bounded.upperMs - bounded.lowerMs) / 2;
  if (uncertainty <= clockUncertaintyAllowanceMs) return null;
  const why =
    seen.silentForMs > seen.windowMs
      ? `Redis has not answered its TIME for ${Math.round(seen.silentForMs / 1000)} s`
      : seen.nodeUncertaintyMs <= clockUncertaintyAllowanceMs
        ? "the clocks of Redis's masters disagree"
        : "its recent round trips to Redis were slow";
  return `This process can tell Redis's clock only within ±${Math.round(uncertainty)} ms, more than the ${clockUncertaintyAllowanceMs} ms a write's deadline allows, since ${why}: writes are refused until it can tell it better. Check the load of Redis and of this host, the network between them, and their clocks (NTP).`;
}

/** One TIME from each node, as a sample against this process's monotonic clock; null where a node did not answer. */
async function sampleEach(nodes: readonly Node[]): Promise<(ClockSample | null)[]> {
  return Promise.all(
    nodes.map(async (node) => {
      const sent = Date.now();
      const time = await node.time().catch(() => null);
      if (!time) return null;
      const sample = sampleOf(sent, time, Date.now(), performance.now());
      return { ...sample, offsetMs: sample.offsetMs + wallLessMonotonic() };
    }),
  );
}

/**
 * Samples Redis's clock over `redis` every `everyMs`, and at once whenever the client
 * (re)connects; stores' write deadlines then follow it (redisClockOf). Offsets are kept
 * against this process's monotonic clock, so a step of its wall clock moves every
 * deadline with it rather than leaving them off until the next sample.
 */
export function watchRedisClock(redis: Client, options: RedisClockOptions = {}): RedisClock {
  const { everyMs = 5_000, windowMs = 60_000 } = options;
  const now = () => performance.now();
  // Per node, samples whose offsets are Redis's clock less this process's monotonic clock.
  const samples = new Map<string, ClockSample[]>();
  /** The nodes the last listing named: each must have a sample for deadlines to be known. */
  let listed: readonly string[] = [];
  // Asked once per write: worked out again after each round of samples, or once a second,
  // and widened in between by the drift since.
  let known: Combined = { bounds: null, nodeUncertaintyMs: 0, atMs: -Infinity };
  let answered = false;
  let lastAnswerAtMs = -Infinity;

  const workOut = (at: number) => combinedBounds(samples, listed, at, windowMs);

  /** The bounds against the monotonic clock, widened by the drift since they were worked out. */
  const monotonicBounds = (): ClockBounds | null => {
    const at = now();
    if (at - known.atMs > 1_000) known = workOut(at);
    if (!known.bounds) return null;
    const drift = driftPerMs * (at - known.atMs);
    return { lowerMs: known.bounds.lowerMs - drift, upperMs: known.bounds.upperMs + drift };
  };

  const bounds = (): ClockBounds | null => {
    const mono = monotonicBounds();
    if (!mono) return null;
    const shift = wallLessMonotonic();
    return { lowerMs: mono.lowerMs - shift, upperMs: mono.upperMs - shift };
  };

  const refusalOf = (bounded: ClockBounds | null) =>
    refusal(bounded, { silentForMs: now() - lastAnswerAtMs, windowMs, nodeUncertaintyMs: known.nodeUncertaintyMs });

  let sampling: Promise<void> | null = null;
  const sampleRound = async () => {
    const nodes = nodesOf(redis);
    // A cluster reconnecting lists no node: nothing is known to have changed, and nothing answered.
    if (nodes.length === 0) {
      answered = false;
      return;
    }
    const answers = await sampleEach(nodes);
    answers.forEach((sample, i) => {
      const name = (nodes[i] as Node).name;
      if (sample) samples.set(name, [...(samples.get(name) ?? []), sample]);
    });
    // A node that left (a failover) no longer counts; one that came counts from its first answer.
    listed = nodes.map((node) => node.name);
    for (const name of samples.keys()) if (!listed.includes(name)) samples.delete(name);
    answered = answers.every((sample) => sample !== null);
    if (answers.some((sample) => sample !== null)) lastAnswerAtMs = now();
    known = workOut(now());
  };

  const clock: RedisClock = {
    bounds,
    problem: () => refusalOf(bounds()),
    answering: () => answered,
    deadlineFor(answerAtMs) {
      const bounded = bounds();
      const refused = refusalOf(bounded);
      if (!bounded || refused) throw new RedisClockUnknownError(refused ?? "Redis's clock is unknown.", clockRetrySeconds);
      return answerAtMs + bounded.lowerMs;
    },
    sample() {
      sampling ??= sampleRound().finally(() => (sampling = null));
      return sampling;
    },
    close() {
      clearInterval(timer);
      redis.off("ready", sampleNow);
    },
  };
  // A new connection may reach another server (a Sentinel failover, a restart elsewhere):
  // its first sample, if it contradicts the older ones, voids them (keptSamples).
  const sampleNow = () => void clock.sample();
  redis.on("ready", sampleNow);
  const timer = setInterval(sampleNow, everyMs);
  timer.unref();
  watched.set(redis, clock);
  return clock;
}
