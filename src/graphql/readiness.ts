// Whether this process can serve: every dependency answers within a bound.
// Load balancers poll it, so a stalled store must show here within the bound
// rather than hold the probe for as long as the stall lasts.
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";

/** Resolves when the dependency answered, rejects with what went wrong. */
export type Probe = () => Promise<unknown>;

/**
 * A condition worth an operator's attention that does not stop this process from
 * serving: resolves with null when all is well, or a sentence saying what is not.
 */
export type Advisory = () => Promise<string | null>;

export interface ReadinessReport {
  /** Every probe answered: the process can serve. */
  readonly ready: boolean;
  /** Some advisory found a problem (or could not tell); serving goes on. */
  readonly degraded: boolean;
  /** Per probe and advisory: "ok", or why not. */
  readonly checks: Readonly<Record<string, string>>;
}

export type Readiness = () => Promise<ReadinessReport>;

/** What a failing check means: the process answers 503 (a probe), or serves on, degraded (an advisory). */
export type CheckEffect = "unavailable" | "degraded";

/** Where each report's failing checks are counted (the API's metrics); prom-client's Counter is one. */
export interface CheckFailures {
  inc(labels: { check: string; effect: CheckEffect }, value?: number): void;
}

/**
 * A check shared by every caller: answered from its last result while that is
 * younger than `maxAgeMs`, and never run twice at once (a caller arriving while
 * it runs waits for that run). Probes at any rate then cost the stores one check
 * per interval per process; a public probe hammered would otherwise be an
 * amplifier (about 1,000 Redis commands per probe for the outbox's length). Ages
 * are read on a monotonic clock: a wall clock stepped back would keep a report.
 */
export function shared<T>(check: () => Promise<T>, maxAgeMs: number, now: () => number = () => performance.now()): () => Promise<T> {
  let last: { readonly at: number; readonly value: Promise<T> } | null = null;
  let running: Promise<T> | null = null;
  return () => {
    if (running) return running;
    if (last && now() - last.at < maxAgeMs) return last.value;
    const started = now();
    const run = check();
    running = run;
    const settle = () => {
      if (running === run) running = null;
      last = { at: started, value: run };
    };
    run.then(settle, settle);
    return run;
  };
}

export function createReadiness(
  probes: Readonly<Record<string, Probe>>,
  timeoutMs: number,
  advisories: Readonly<Record<string, Advisory>> = {},
  failures?: CheckFailures,
): Readiness {
  /** "ok", what the check found wrong, or why it did not answer. */
  const within = async (check: () => Promise<string | null>): Promise<string> => {
    const abandon = new AbortController();
    try {
      const timedOut = sleep(timeoutMs, undefined, { signal: abandon.signal }).then(() => {
        throw new Error(`no answer within ${timeoutMs} ms`);
      });
      return (await Promise.race([check(), timedOut])) ?? "ok";
    } catch (error) {
      return error instanceof Error ? error.message : String(error);
    } finally {
      abandon.abort();
    }
  };
  const run = (checks: Readonly<Record<string, () => Promise<string | null>>>) =>
    Promise.all(Object.entries(checks).map(async ([name, check]) => [name, await within(check)] as const));
  // A probe's answer itself means nothing (PING says "PONG"): answering is what counts.
  const answered = Object.fromEntries(
    Object.entries(probes).map(([name, probe]) => [
      name,
      async () => {
        await probe();
        return null;
      },
    ]),
  );
  // Every series exists from the start at 0, so that increase() sees a check's first failure.
  for (const check of Object.keys(probes)) failures?.inc({ check, effect: "unavailable" }, 0);
  for (const check of Object.keys(advisories)) failures?.inc({ check, effect: "degraded" }, 0);
  return async () => {
    const [required, advised] = await Promise.all([run(answered), run(advisories)]);
    for (const [check, result] of required) if (result !== "ok") failures?.inc({ check, effect: "unavailable" });
    for (const [check, result] of advised) if (result !== "ok") failures?.inc({ check, effect: "degraded" });
    return {
      ready: required.every(([, result]) => result === "ok"),
      degraded: advised.some(([, result]) => result !== "ok"),
      checks: Object.fromEntries([...required, ...advised]),
    };
  };
}

/**
 * The outbox backlog as an advisory, not a probe. A backlog means the pipeline
 * lags (RabbitMQ or PostgreSQL slow or down), not that this process cannot take
 * likes: they still land in Redis and wait in the outbox. Taking API processes out
 * of the balancer for it would turn a persistence delay into an outage of every
 * like and every read, so the backlog is reported (HTTP 200, status "degraded")
 * and alerted on, never a reason to stop serving.
 */
export function outboxBacklog(length: () => Promise<number>, warnLength: number): Advisory {
  return async () => {
    const waiting = await length();
    return waiting > warnLength ? `${waiting} changes wait in the outbox, more than OUTBOX_WARN_LENGTH (${warnLength}): the pipeline lags behind` : null;
  };
}
