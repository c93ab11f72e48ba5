// The pipeline's persist step in PostgreSQL: a batch of changes in one transaction,
// its steps (persist-steps.ts, view-totals.ts, like-buckets.ts) in one lock order.
import { Prisma } from "../../generated/prisma/client.js";
import type { AppliedChanges, Change, RelationChange, ViewChange } from "../../domain/model/index.js";
import type { PersistStore } from "../../domain/ports/index.js";
import type { Database } from "./database.js";
import { bucketDeltas, rankPosts } from "./like-buckets.js";
import { advanceVersions, changesByPair, countMoves, inPairOrder, moveCounters, moveRows, readCredits } from "./persist-steps.js";
import { applyViews } from "./view-totals.js";

async function apply(db: Database, input: readonly Change[]): Promise<AppliedChanges> {
  const changes = input.filter((c): c is RelationChange => c.kind === "relation").sort(inPairOrder);
  const views = input.filter((c): c is ViewChange => c.kind === "views");
  if (changes.length === 0 && views.length === 0) {
    return { inserted: 0, deleted: 0, superseded: 0, passed: [], current: [], views: [], deltas: [], credits: [], ranked: { buckets: [], totals: [] } };
  }
  const byPair = changesByPair(changes);

  return db.$transaction(
    async (tx) => {
      // One lock order for every batch, so concurrent batches never wait on each other in a
      // cycle; the steps run in it. relation_versions rows in pair order (target type, target
      // id, relation, user); then relation by relation (likes, collects, follows) the rows
      // inserted, then those deleted, each in pair order; view_totals rows by (post, epoch);
      // counters rows by "type:id:name" (the recounts of counter-recounts.ts lock them in this
      // order too); like_buckets rows by (span, bucket, post). Credits are read, not locked.
      const { passed, current } = await advanceVersions(tx, changes, byPair);
      const now = Date.now();
      const moved = await moveRows(tx, passed);
      const tally = countMoves(moved, byPair);
      const committedViews = await applyViews(tx, views, tally.add);
      const deltas = tally.moved();
      const counted = await moveCounters(tx, deltas);
      const credits = await readCredits(tx, current);
      const ranked = await rankPosts(tx, bucketDeltas(moved, now), current, now, counted);
      return {
        inserted: moved.filter((m) => m.sign > 0).length,
        deleted: moved.filter((m) => m.sign < 0).length,
        superseded: changes.length - passed.length,
        passed,
        current,
        views: committedViews,
        deltas,
        credits,
        ranked,
      };
    },
    { timeout: 60_000, maxWait: 10_000, isolationLevel: Prisma.TransactionIsolationLevel.ReadCommitted },
  );
}

export function createPersistStore(db: Database): PersistStore {
  return { apply: (changes) => apply(db, changes) };
}
