// Whether Redis answers, as this process sees it (domain/ports/reachability.ts).
// A call that found Redis out of reach turns it unreachable; from then on a PING
// every `probeEveryMs` (or the client's own reconnection) tells when it answers
// again. Reads meanwhile go to PostgreSQL without waiting for Redis's timeouts.
import type { Reachability } from "../../domain/ports/index.js";
import { isRedisOutOfReach, isRedisUnavailable, type RedisClient } from "./client.js";

export interface RedisReachability extends Reachability {
  /** Stops probing. */
  close(): void;
}

export interface ReachabilityOptions {
  /** How often Redis is pinged while it is out of reach; default 500 ms. */
  readonly probeEveryMs?: number;
  /** Told each time Redis turns unreachable (with the error that showed it) or reachable again. */
  readonly onChange?: (reachable: boolean, cause?: unknown) => void;
}

/** One watch per client: compositions that share a client (tests compose many) share what it found. */
const watches = new WeakMap<RedisClient, RedisReachability>();

/** The watch of `redis`'s reachability; a client watched already keeps the first watch (and its `onChange`). */
export function createReachability(redis: RedisClient, options: ReachabilityOptions = {}): RedisReachability {
  let watch = watches.get(redis);
  if (!watch) watches.set(redis, (watch = watchReachability(redis, options)));
  return watch;
}

function watchReachability(redis: RedisClient, options: ReachabilityOptions): RedisReachability {
  const probeEveryMs = options.probeEveryMs ?? 500;
  let reachable = true;
  let probe: NodeJS.Timeout | null = null;
  let probing = false;

  const back = () => {
    if (probe) clearInterval(probe);
    probe = null;
    if (reachable) return;
    reachable = true;
    options.onChange?.(true);
  };

  // A reconnected client answers; so does a PING that came back (a stall over without a reconnect).
  redis.on("ready", back);

  const ping = () => {
    if (probing) return;
    probing = true;
    redis
      .ping()
      .then(back, () => {})
      .finally(() => (probing = false));
  };

  const lost = (cause: unknown) => {
    if (!reachable) return;
    reachable = false;
    options.onChange?.(false, cause);
    probe = setInterval(ping, probeEveryMs);
    probe.unref();
  };

  return {
    reachable: () => reachable,
    failed(error) {
      if (isRedisOutOfReach(error)) lost(error);
      return isRedisUnavailable(error);
    },
    close() {
      if (probe) clearInterval(probe);
      probe = null;
    },
  };
}
