// The tables and lines the scenarios besides the HTTP ones print.
import type { Likes20mFigures } from "./likes-20m.js";
import type { MemoryFigures } from "./memory.js";
import type { NestedFigures } from "./nested.js";
import type { PersistFigures } from "./persist.js";
import type { ReconcileBigFigures } from "./reconcile-big.js";

/** A pass of reconcile-big; the load before the passes is reported apart. */
type ReconcilePass = Omit<ReconcileBigFigures, "loadSeconds">;
import type { ReconcileFigures } from "./reconcile.js";
import type { StartupFigures } from "./startup.js";

export function printMemory(m: MemoryFigures, shapeName: string): void {
  console.log(
    `\nRedis memory of the ${shapeName} data set, warmed through the rebuild (${m.likes.toLocaleString()} likes, ${m.targets.toLocaleString()} targets):`,
  );
  console.table([
    {
      "bytes/like (membership)": m.bytesPerLike,
      "bytes/counter hash": m.bytesPerCounterHash,
      "membership keys": m.membershipKeys,
      "largest key (members)": m.largestKeyMembers,
      "used_memory (MB)": m.usedMemoryMb,
    },
  ]);
}

export function printNested(figures: readonly NestedFigures[]): void {
  console.log(`\nThe nested query (feed(100) → comments(100) → post → comments(100)), anonymous, one request to a freshly started API:`);
  console.table(
    figures.map((f) => ({
      service: f.service,
      status: f.status,
      code: f.code,
      cost: f.cost,
      "time (s)": f.seconds,
      "SQL transactions": f.sqlTransactions,
      nodes: f.nodes,
      "response (MB)": f.responseMb,
      "API peak RSS (MB)": f.apiPeakRssMb,
      "API CPU (s)": f.apiCpuSeconds,
    })),
  );
}

export function printStartup(figures: readonly StartupFigures[]): void {
  console.log("\nStart-up, one process at a time (median of 5): spawn to serving, and resident memory of the process and its children a second later:");
  console.table(figures.map((f) => ({ entry: f.entry, runtime: f.runtime, "ready ms": f.readyMs, "RSS MB": f.rssMb })));
}

export function printPersist(p: PersistFigures): void {
  console.table([
    {
      "drained likes": p.drainedLikes,
      "persisted likes/s": p.persistedPerSecond,
      "transactions per 1,000": p.transactionsPer1000,
      [`lag p50 ms at ${p.pacedRate}/s`]: p.lagP50Ms,
      [`lag p99 ms at ${p.pacedRate}/s`]: p.lagP99Ms,
    },
  ]);
}

export function printReconcile(r: ReconcileFigures): void {
  console.log("\nRebuild and reconcile, 1,000,000 likes over 10,000 posts (Zipf), every post held by Redis:");
  console.table([
    {
      likes: r.likes,
      "rebuild 10,000 likers (ms)": r.rebuild10kLikersMs,
      "rebuild all posts (s)": r.rebuildAllSeconds,
      "reconcile pass (s)": r.reconcileSeconds,
      "targets/s": r.reconcileTargetsPerSecond,
      "reconcile peak RSS (MB)": r.reconcilePeakRssMb,
    },
  ]);
  console.log(r.summary);
}

export function printLikes20m(f: Likes20mFigures): void {
  console.log(
    `\n${f.likes.toLocaleString()} likes over ${f.posts.toLocaleString()} posts: loaded in ${f.loadSeconds.toFixed(0)} s (with their relation versions and counters); ` +
      `0007_partition_relations into ${f.relationPartitions} partitions in ${f.migrateSeconds.toFixed(1)} s; database ${f.databaseMb.toLocaleString()} MB after`,
  );
  console.table([
    {
      [`rebuild of post 1, ${f.hotLikers.toLocaleString()} likers (ms)`]: f.rebuildHotMs,
      [`rebuild of ${f.sampledPosts.toLocaleString()} posts (${f.sampledLikes.toLocaleString()} likes), 16 at a time (s)`]: f.rebuildSampleSeconds,
      "extrapolated to all posts, by posts / by likes (s)": `${Math.round((f.rebuildSampleSeconds * f.posts) / f.sampledPosts)} / ${Math.round((f.rebuildSampleSeconds * f.likes) / f.sampledLikes)}`,
      "reconcile pass (s)": f.reconcileSeconds,
      "targets/s": f.reconcileTargetsPerSecond,
      "reconcile peak RSS (MB)": f.reconcilePeakRssMb,
    },
  ]);
  console.log(f.reconcileSummary);
  console.log("\nList pages of 20 (the store's statements), 1,000 distinct users or posts each, warm; one under EXPLAIN ANALYZE:");
  console.table(
    f.pages.map((p) => ({
      page: p.page,
      tables: p.tables,
      "mean ms": p.meanMs,
      "p99 ms": p.p99Ms,
      "EXPLAIN planning ms": p.planningMs,
      "EXPLAIN execution ms": p.executionMs,
      "shared buffers": p.sharedBuffers,
      "index scans": p.indexScans,
    })),
  );
  console.log("\nPersistence beside them (worker process, batches of up to 1,000):");
  printPersist(f.persist);
}

/** The pass in pieces, then the pass that loaded the target whole. */
export function printReconcileBig(chunked: ReconcilePass, whole: ReconcilePass): void {
  console.log("\nReconcile of one post with 5,000,000 likers, node --max-old-space-size=160 (npm run reconcile):");
  console.table(
    [chunked, whole].map((r, i) => ({
      pass: i === 0 ? "in pieces of 10,000" : "loaded whole",
      "exit code": r.exitCode,
      "pass (s)": Number(r.passSeconds.toFixed(1)),
      "peak heap (MB)": r.peakHeapMb,
      "peak RSS (MB)": r.peakRssMb,
    })),
  );
  console.log(chunked.summary);
  console.log(`loaded whole: ${whole.summary.split("\n")[0]}`);
}
