// Whether a load of membership changes was exact, checked against Redis itself.
import { setTimeout as sleep } from "node:timers/promises";
import { relations, type Relation } from "../../src/domain/model/index.js";
import { batchRead, type RedisClient } from "../../src/stores/redis/client.js";
import { createRedisKeys } from "../../src/stores/redis/keys.js";
import { createMembershipStore } from "../../src/stores/redis/membership-store.js";
import { partitions } from "./harness.js";
import { runLoad, type HttpFigures, type Load, type Pair } from "./http-load.js";
import type { ScenarioContext } from "./scenario-context.js";

const targetTypeOf = (relation: Relation) => relations[relation].targets[0];

/** The relation's counter on each target (in one pipeline, or one per node of a cluster). */
async function memberCounts(redis: RedisClient, relation: Relation, targets: readonly bigint[]): Promise<number[]> {
  const keys = createRedisKeys(partitions);
  const calls = targets.map((id) => [keys.counters({ type: targetTypeOf(relation), id }), relations[relation].counter] as const);
  return (await batchRead(redis, "hget", calls)).map((value) => Number(value ?? 0));
}

/** Counts once requests left in flight when the load stopped have been applied: unchanged for half a second. */
async function settledCounts(redis: RedisClient, relation: Relation, targets: readonly bigint[]): Promise<number[]> {
  const sum = (counts: number[]) => counts.reduce((a, b) => a + b, 0);
  let counts = await memberCounts(redis, relation, targets);
  for (let i = 0; i < 60; i++) {
    await sleep(500);
    const again = await memberCounts(redis, relation, targets);
    if (sum(again) === sum(counts)) return again;
    counts = again;
  }
  throw new Error(`${relation} counts were still moving 30 s after the load stopped`);
}

/** Which of the pairs Redis holds as members of the relation. */
export async function members(redis: RedisClient, relation: Relation, pairs: readonly Pair[]): Promise<boolean[]> {
  const store = createMembershipStore(redis, createRedisKeys(partitions));
  const held: boolean[] = [];
  for (let i = 0; i < pairs.length; i += 1_000) {
    const chunk = pairs.slice(i, i + 1_000);
    held.push(
      ...(await Promise.all(
        chunk.map(async ({ user, target }) => (await store.holds(relation, [{ type: targetTypeOf(relation), id: target }], user))[0] === true),
      )),
    );
  }
  return held;
}

export const pairKey = ({ user, target }: Pair) => `${user}:${target}`;

/**
 * Runs a load of membership changes, then checks exactness against Redis itself:
 * every change answered `changed: true` is held, and the counts moved by exactly
 * the sent changes that are held now and were not before (a load that stops at its
 * duration leaves some requests unanswered, though the service applied them).
 */
export async function countedChanges(
  ctx: ScenarioContext,
  relation: Relation,
  targets: readonly bigint[],
  load: Omit<Load, "onChangeAnswered" | "redis" | "service" | "mode">,
  heldBefore: (pairs: readonly Pair[]) => Promise<boolean[]>,
): Promise<HttpFigures> {
  // The warm-up's last requests may still be landing.
  const before = await settledCounts(ctx.redis.client, relation, targets);
  const sent = new Map<string, Pair>();
  const acknowledged: Pair[] = [];
  const figures = await runLoad({
    ...load,
    redis: ctx.redis,
    service: ctx.service,
    mode: ctx.mode,
    request: (n) => {
      const request = load.request(n);
      if (request.change) sent.set(pairKey(request.change), request.change);
      return request;
    },
    onChangeAnswered: (change, body) => void (body.includes('"changed":true') && acknowledged.push(change)),
  });
  const after = await settledCounts(ctx.redis.client, relation, targets);
  const moved = after.reduce((sum, n, i) => sum + n - (before[i] as number), 0);
  const pairs = [...sent.values()];
  const [was, is, ackHeld] = await Promise.all([
    heldBefore(pairs),
    members(ctx.redis.client, relation, pairs),
    members(ctx.redis.client, relation, acknowledged),
  ]);
  const gained = pairs.filter((_, i) => is[i] && !was[i]).length;
  const lostAcks = ackHeld.filter((held) => !held).length;
  const exact = moved === gained && lostAcks === 0 && acknowledged.length <= gained;
  return {
    ...figures,
    exact: exact
      ? `yes (+${moved}, ${acknowledged.length} answered changed)`
      : `NO: counts moved ${moved}, gained ${gained}, answered changed ${acknowledged.length}, of them not held ${lostAcks}`,
  };
}
