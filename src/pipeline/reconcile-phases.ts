// The phases of one reconcile pass (reconcile-pass.ts), in the order it runs
// them: the targets Redis holds, the targets only PostgreSQL holds, every
// target's other counters, users' lists. Each walks its side a page at a time,
// adds what it finds to the pass's tally, publishes the page's repairs before
// reading the next, and reports its progress after each page.
import type { Logger } from "pino";
import { setTimeout as sleep } from "node:timers/promises";
import {
  relationsOf,
  targetKey,
  type CounterName,
  type CounterSurvey,
  type DatabaseTarget,
  type RedisTarget,
  type Repair,
  type Target,
} from "../domain/model/index.js";
import type { InFlightTarget, RebuildStore, RelationTarget } from "../domain/ports/index.js";
import { compareCounters, compareHeld, compareUnheld, compareVersions, stillLagging, stuckAfterPasses } from "../domain/reconcile.js";
import { reconcileLists } from "./reconcile-lists.js";
import { sampleSize, type ReconcileTally } from "./reconcile-tally.js";
import { redisLost, walkBigTarget, type WalkContext, type WalkOutcome } from "./reconcile-walk.js";

/** What every phase works with: the stores, the pass's settings, and the tally they all add to. */
export interface PassContext extends WalkContext {
  readonly rebuilds: RebuildStore;
  /** Targets (or lists) per page. */
  readonly batchSize: number;
  readonly mirrorGraceMs: number;
  /** Targets idle longer than this leave Redis; 0 or absent keeps every target. */
  readonly coldAfterSeconds?: number;
  readonly logger?: Logger;
  readonly onProgress?: (progress: { readonly phase: "redis" | "postgres" | "counters" | "lists"; readonly done: number; readonly total: number }) => void;
  readonly tally: ReconcileTally;
}

/**
 * Every relation of every target Redis holds, Redis authoritative. PostgreSQL is read before Redis
 * (compareVersions): a change made and persisted between the two reads is then in flight, never lag.
 */
export async function compareTargetsRedisHolds(pass: PassContext): Promise<void> {
  const total = await pass.redis.size();
  let cursor: string | null = null;
  let done = 0;
  do {
    const page = await pass.redis.scan(cursor, pass.batchSize);
    cursor = page.cursor;
    done += page.targets.length;
    await compareHeldPage(pass, page.targets);
    pass.onProgress?.({ phase: "redis", done, total: Math.max(done, total) });
  } while (cursor !== null);
}

/** What the relations of one page of held targets came to, per target (targetKey). */
interface HeldPage {
  readonly repairs: Repair[];
  readonly inFlight: Map<string, InFlightTarget>;
  /** Whether every relation of the target compared clean, so that it may leave Redis if cold. */
  readonly clean: Map<string, { held: RedisTarget; persisted: DatabaseTarget; clean: boolean }>;
  /** Targets whose Redis lost changes PostgreSQL applied: given up to be rebuilt, their other relations not compared. */
  readonly droppedBehind: Set<string>;
}

async function compareHeldPage(pass: PassContext, targets: readonly Target[]): Promise<void> {
  const items = targets.flatMap((target) => relationsOf(target.type).map((relation): RelationTarget => ({ relation, target })));
  const persisted = await pass.database.read(items, pass.memberChunk);
  const surveyed = await pass.redis.survey(items, pass.memberChunk);
  const page: HeldPage = { repairs: [], inFlight: new Map(), clean: new Map(), droppedBehind: new Set() };
  for (const [i, held] of surveyed.entries()) {
    if (held !== null) await compareHeldRelation(pass, page, held, persisted[i] as DatabaseTarget);
  }
  // A target found to have lost changes is rebuilt from PostgreSQL, not repaired from its other relations.
  await pass.send(page.repairs.filter((r) => !page.droppedBehind.has(targetKey(r.target))));
  await evictCold(pass, page);
  await noteInFlight(pass, page);
}

async function compareHeldRelation(pass: PassContext, page: HeldPage, held: RedisTarget, persisted: DatabaseTarget): Promise<void> {
  const key = targetKey(held.target);
  if (page.droppedBehind.has(key)) return;
  pass.tally.targetsChecked++;
  const { outcome, repaired } = await compareRelation(pass, held, persisted, page.repairs);
  if (outcome === "redisBehind") {
    // Redis is missing changes PostgreSQL applied: it cannot be the authority, so it gives the target up
    // and the next read rebuilds it from PostgreSQL (with every change committed after the snapshot).
    page.droppedBehind.add(key);
    const dropped = await pass.rebuilds.drop(held.target);
    if (dropped === "kept") pass.tally.behindKept.add(held.target);
    else pass.tally.rebuiltBehind.add(held.target);
    return;
  }
  if (outcome === "inFlight" && !page.inFlight.has(key)) {
    pass.tally.inFlight.add(held.target);
    page.inFlight.set(key, { target: held.target, redisVersion: held.version, databaseVersion: persisted.version });
  }
  const clean = outcome === "compared" && !repaired && (page.clean.get(key)?.clean ?? true);
  page.clean.set(key, { held, persisted, clean });
}

/**
 * Compares one relation of a held target, quiescent ones only: whole when both sides were
 * loaded (its repairs join `repairs`), walked in pieces otherwise (the walk sends its own).
 * `repaired`: whether it asked for a repair, which keeps the target in Redis this pass.
 */
async function compareRelation(
  pass: PassContext,
  held: RedisTarget,
  persisted: DatabaseTarget,
  repairs: Repair[],
): Promise<{ outcome: WalkOutcome; repaired: boolean }> {
  const standing = compareVersions(held.version, persisted.version);
  if (standing !== "quiescent") return { outcome: standing, repaired: false };
  if (held.members === null || persisted.members === null) {
    pass.tally.walked++;
    return { outcome: await walkBigTarget(pass, held, persisted), repaired: true };
  }
  const comparison = compareHeld(held, persisted, pass.memberChunk);
  if (await redisLost(pass.database, held, comparison.differing, held.version)) return { outcome: "redisBehind", repaired: false };
  pass.tally.countDifferences(comparison.differences);
  repairs.push(...comparison.repairs);
  return { outcome: "compared", repaired: comparison.repairs.length > 0 };
}

/** Posts and comments of the page that compared clean and sat idle past `coldAfterSeconds` leave Redis, to come back by a rebuild when next used. */
async function evictCold(pass: PassContext, page: HeldPage): Promise<void> {
  const { coldAfterSeconds } = pass;
  if (!coldAfterSeconds) return;
  for (const [key, { held, persisted, clean }] of page.clean) {
    if (!clean || page.droppedBehind.has(key) || held.target.type === "user" || held.idleSeconds <= coldAfterSeconds) continue;
    if ((await pass.rebuilds.evict(held.target, persisted.version)) === "evicted") pass.tally.evicted++;
  }
}

/** Notes the page's targets in flight; one found so `stuckAfterPasses` passes in a row at the same versions counts as stuck. */
async function noteInFlight(pass: PassContext, page: HeldPage): Promise<void> {
  if (page.inFlight.size === 0) return;
  const noted = [...page.inFlight.values()];
  const inARow = await pass.redis.noteInFlight(noted);
  for (const [i, t] of noted.entries()) if ((inARow[i] ?? 0) >= stuckAfterPasses) pass.tally.stuck.add(t.target);
}

/** Relations of targets Redis does not hold, PostgreSQL authoritative: each counter must count its rows. */
export async function compareTargetsOnlyPostgresHolds(pass: PassContext): Promise<void> {
  const total = await pass.database.countTargets();
  let after: RelationTarget | null = null;
  let done = 0;
  for (;;) {
    const page = await pass.database.page(after, pass.batchSize);
    if (page.length === 0) break;
    after = page.at(-1)!;
    done += page.length;
    const held = await pass.redis.holds(page.map((p) => p.target));
    const repairs: Repair[] = [];
    for (const [i, entry] of page.entries()) {
      if (held[i]) continue;
      pass.tally.targetsChecked++;
      const repair = compareUnheld(entry);
      if (repair) {
        pass.tally.differences.databaseCounter++;
        repairs.push(repair);
      }
    }
    await pass.send(repairs);
    pass.onProgress?.({ phase: "postgres", done, total: Math.max(done, total) });
  }
}

/** Every target's other counters: derived ones against PostgreSQL's rows and Redis, a post's views. */
export async function compareOtherCounters(pass: PassContext): Promise<void> {
  const total = await pass.database.countCounterTargets();
  let after: Target | null = null;
  let done = 0;
  for (;;) {
    const page = await pass.database.counterPage(after, pass.batchSize);
    if (page.length === 0) break;
    after = page.at(-1)!.target;
    done += page.length;
    await pass.send(await compareCounterPage(pass, page));
    pass.onProgress?.({ phase: "counters", done, total: Math.max(done, total) });
  }
}

/** Derived counters Redis held an older write of, waiting for a second look. */
interface Lagging {
  readonly survey: CounterSurvey;
  readonly names: readonly CounterName[];
}

async function compareCounterPage(pass: PassContext, page: readonly Omit<CounterSurvey, "redis" | "redisVersion">[]): Promise<Repair[]> {
  const inRedis = await pass.redis.counters(page.map((p) => p.target));
  const repairs: Repair[] = [];
  const lagging: Lagging[] = [];
  for (const [i, persisted] of page.entries()) {
    const held = inRedis[i] ?? null;
    const survey: CounterSurvey = { ...persisted, redis: held?.values ?? null, redisVersion: held?.version ?? -1n };
    const comparison = compareCounters(survey);
    pass.tally.countDifferences(comparison.differences);
    repairs.push(...comparison.repairs);
    if (comparison.lagging.length > 0) lagging.push({ survey, names: comparison.lagging });
  }
  if (lagging.length > 0) repairs.push(...(await mirrorsNotComing(pass, lagging)));
  return repairs;
}

/** Of the lagging counters, the mirrors of those Redis still holds an older write of after `mirrorGraceMs`: theirs is not coming. */
async function mirrorsNotComing(pass: PassContext, lagging: readonly Lagging[]): Promise<Repair[]> {
  await sleep(pass.mirrorGraceMs);
  const again = await pass.redis.counters(lagging.map((l) => l.survey.target));
  const repairs: Repair[] = [];
  for (const [i, { survey, names }] of lagging.entries()) {
    const repair = stillLagging({ ...survey, redis: again[i]?.values ?? null }, names);
    if (repair?.kind === "mirrorDerived") {
      pass.tally.differences.redisDerivedCounter += repair.names.length;
      repairs.push(repair);
    }
  }
  return repairs;
}

/** Users' lists of liked and collected posts, against PostgreSQL's rows (reconcile-lists.ts). */
export async function compareUsersLists(pass: PassContext): Promise<void> {
  const { redis, database, batchSize, onProgress } = pass;
  const lists = await reconcileLists({ redis, database, batchSize, ...(onProgress && { onProgress }) });
  pass.tally.listsChecked = lists.checked;
  pass.tally.differences.list = lists.dropped.length;
  if (lists.dropped.length > 0) {
    pass.logger?.warn(
      { lists: lists.dropped.slice(0, sampleSize).map((l) => `${l.relation}:${l.userId}`), count: lists.dropped.length },
      "users' lists in Redis differed from PostgreSQL's rows: dropped, to be loaded again on their next read",
    );
  }
}
