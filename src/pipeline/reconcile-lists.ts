// The reconcile pass's last phase (src/pipeline/reconcile-pass.ts): every user's
// list of liked or collected posts Redis holds, compared with PostgreSQL's rows.
// A list is a view of PostgreSQL (its newest entries, and records of recent
// changes PostgreSQL may not hold yet), so PostgreSQL is the authority: a list
// that differs where no record speaks is dropped and loaded again on its next read.
import { listCapacity } from "../domain/model/index.js";
import type { DatabaseReconcileStore, ListRef, RedisReconcileStore } from "../domain/ports/index.js";
import { compareList } from "../domain/reconcile.js";

export interface ListsContext {
  readonly redis: RedisReconcileStore;
  readonly database: DatabaseReconcileStore;
  /** Lists per batch. */
  readonly batchSize: number;
  readonly onProgress?: (progress: { readonly phase: "lists"; readonly done: number; readonly total: number }) => void;
}

/**
 * PostgreSQL's rows read per list: a list holds `listCapacity` entries past its
 * horizon, and PostgreSQL as many more as the list's changes it has not applied
 * yet, so twice that tells a list that lacks rows from one that is merely full.
 */
const rowsPerList = 2 * listCapacity + 1;

/** Compares every list Redis holds, a batch at a time; the lists checked and the lists dropped for differing. */
export async function reconcileLists(context: ListsContext): Promise<{ checked: number; dropped: ListRef[] }> {
  const { redis, database } = context;
  let checked = 0;
  const dropped: ListRef[] = [];
  let cursor: string | null = null;
  let done = 0;
  do {
    const page = await redis.scanLists(cursor, context.batchSize);
    cursor = page.cursor;
    done += page.lists.length;
    // PostgreSQL first, as for memberships: a change committed between the reads reaches the list with a
    // record of it (the persist consumer writes lists after its commit), which takes the post out of the comparison.
    const newest = await database.newestListed(page.lists, rowsPerList);
    const held = await redis.readLists(page.lists);
    for (const [i, list] of page.lists.entries()) {
      const view = held[i];
      if (!view) continue;
      checked++;
      const differing = compareList(view, newest[i] ?? [], rowsPerList);
      if (differing.length === 0) continue;
      const recorded = await redis.listRecords(list, differing);
      if (recorded.every(Boolean)) continue;
      await redis.dropList(list);
      dropped.push(list);
    }
    // No count of lists up front (a SCAN finds them): the estimate runs a batch ahead until the last.
    context.onProgress?.({ phase: "lists", done, total: cursor === null ? done : done + context.batchSize });
  } while (cursor !== null);
  return { checked, dropped };
}
