// The reconcile pass's comparison of one quiescent target too big to load whole
// (src/pipeline/reconcile-phases.ts), and the check both comparisons make before
// repairing PostgreSQL from Redis: that Redis did not lose what it differs on.
import type { DatabaseTarget, DifferenceKind, RedisTarget, Repair } from "../domain/model/index.js";
import type { DatabaseReconcileStore, RedisReconcileStore, RelationTarget } from "../domain/ports/index.js";
import { alignDatabase, compareCounts, lostInRedis, type MemberDifferences } from "../domain/reconcile.js";

/** Below every user id, where a keyset walk over a target's likers starts. */
const beforeEveryUser = -(2n ** 63n);

export interface WalkContext {
  readonly redis: RedisReconcileStore;
  readonly database: DatabaseReconcileStore;
  readonly memberChunk: number;
  readonly send: (repairs: readonly Repair[]) => Promise<void>;
  readonly count: (found: Partial<Record<DifferenceKind, number>>) => void;
}

/** What comparing a target came to: compared (and repaired), in flight, or Redis lost changes PostgreSQL applied. */
export type WalkOutcome = "compared" | "inFlight" | "redisBehind";

/** Whether Redis lost a change PostgreSQL applied to any of the differing users (lostInRedis): one indexed read of their records. */
export async function redisLost(
  database: DatabaseReconcileStore,
  item: RelationTarget,
  differing: MemberDifferences,
  observedVersion: bigint,
): Promise<boolean> {
  const users = [...differing.add, ...differing.remove];
  if (users.length === 0) return false;
  return lostInRedis(differing, await database.pairRecords(item, users), observedVersion);
}

/**
 * Compares a quiescent target too big to load, in pieces of at most
 * `memberChunk` members, both ways, as two exact probes:
 *   1. PostgreSQL → Redis: PostgreSQL's likers are read in keyset pages
 *      (user_id > last ORDER BY user_id LIMIT n, on the unique index), and
 *      Redis is asked which of them its shards hold (each user's own shard
 *      of every generation that holds members); the rest are stray in PostgreSQL. The users
 *      both hold are counted.
 *   2. Redis → PostgreSQL: Redis holds memberCount users, so memberCount
 *      minus the users both hold are missing in PostgreSQL. Only when some
 *      are, Redis's shards are read a few whole shards at a time (each under
 *      the shard bound) and PostgreSQL is asked which of those users it
 *      holds, until that many are found.
 * A sorted merge would need Redis's members in user order, which sharded
 * sets cannot give without loading them all; membership probes need no
 * order, so each side is read at most once, in any order, and each piece is
 * checked against the other side's index. Every difference is found exactly
 * once, and memory holds at most two pieces, whatever the target's size.
 * The count in step 2 saves the slow side (one index probe in PostgreSQL per
 * Redis member) in the usual case where PostgreSQL misses nothing.
 * Repairs go out a full repair at a time, each only after Redis's version is
 * seen unchanged (a target that moves mid-walk is in flight; what was sent is
 * gated per pair by its observed version, so it cannot undo a newer change)
 * and PostgreSQL's records of the piece's users show Redis lost none of their
 * changes (a piece that shows a loss stops the walk: the target is rebuilt).
 */
export async function walkBigTarget(context: WalkContext, held: RedisTarget, persisted: DatabaseTarget): Promise<WalkOutcome> {
  const { redis, database, memberChunk, send, count } = context;
  const { target, relation } = held;
  const item: RelationTarget = { relation, target };
  const stillQuiescent = async () => (await redis.version(target)) === held.version;
  const counted = compareCounts(held, persisted);
  let aligned = false;
  // Differences wait here until a full repair's worth (or the end of a side): at most two chunks held.
  const pending = { add: [] as bigint[], remove: [] as bigint[] };
  const flush = async (all: boolean): Promise<WalkOutcome | null> => {
    const add = all ? pending.add.length : pending.add.length - (pending.add.length % memberChunk);
    const remove = all ? pending.remove.length : pending.remove.length - (pending.remove.length % memberChunk);
    if (add === 0 && remove === 0) return null;
    if (!(await stillQuiescent())) return "inFlight";
    const [adding, removing] = [pending.add.splice(0, add), pending.remove.splice(0, remove)];
    if (await redisLost(database, item, { add: adding, remove: removing }, held.version)) return "redisBehind";
    await send(alignDatabase(relation, target, held.version, adding, removing, false, memberChunk));
    count({ missingInDatabase: adding.length, strayInDatabase: removing.length });
    aligned = true;
    return null;
  };
  let stopped: WalkOutcome | null;
  let inBoth = 0;
  for (let after = beforeEveryUser; ;) {
    const users = await database.membersAfter(item, after, memberChunk);
    if (users.length === 0) break;
    after = users.at(-1) as bigint;
    const heldNow = await redis.holdsMembers(item, held.generations, users);
    for (const [j, user] of users.entries()) {
      if (heldNow[j]) inBoth++;
      else pending.remove.push(user);
    }
    if ((stopped = await flush(false))) return stopped;
  }
  if ((stopped = await flush(true))) return stopped;
  let missing = held.memberCount - inBoth;
  for (let from: number | null = 0; from !== null && missing > 0;) {
    const piece = await redis.membersFrom(item, held.generations, from, memberChunk);
    from = piece.next;
    for (let i = 0; i < piece.members.length && missing > 0; i += memberChunk) {
      const users = piece.members.slice(i, i + memberChunk);
      const found = await database.membersAmong(item, users);
      const absent = users.filter((_, j) => !found[j]);
      missing -= absent.length;
      pending.add.push(...absent);
      if ((stopped = await flush(false))) return stopped;
    }
  }
  if ((stopped = await flush(true))) return stopped;
  if (!(await stillQuiescent())) return "inFlight";
  count(counted.differences);
  // Every alignDatabase repair recounts PostgreSQL's counter; only without one does a wrong counter need its own.
  await send([...counted.repairs, ...alignDatabase(relation, target, held.version, [], [], !aligned && persisted.count !== persisted.rows, memberChunk)]);
  return "compared";
}
