// The persist batch's views step (persist-store.ts sequences the steps):
// the highest total each (post, epoch) reached, and the views it adds to the post.
import type { CommittedViews, CounterName, Target, TargetType, ViewChange } from "../../domain/model/index.js";
import { splitVersion } from "../versions.js";
import { compareIds, type Transaction } from "./persist-steps.js";

/**
 * Applies view changes: per (post, epoch), the highest total PostgreSQL holds
 * rises to the batch's, and the post's views rise by the difference. The rows
 * are created first and locked, so concurrent batches of one post each add
 * only what the other did not.
 */
export async function applyViews(
  tx: Transaction,
  changes: readonly ViewChange[],
  add: (target: Target, name: CounterName, delta: number) => void,
): Promise<CommittedViews[]> {
  if (changes.length === 0) return [];
  const highest = new Map<string, ViewChange>();
  for (const c of changes) {
    const key = `${c.target.id}:${splitVersion(c.version).epoch}`;
    const kept = highest.get(key);
    if (!kept || c.total > kept.total) highest.set(key, c);
  }
  const rows = [...highest.values()].sort((a, b) => compareIds(a.target.id, b.target.id) || compareIds(a.version, b.version));
  const types = rows.map((c) => c.target.type);
  const ids = rows.map((c) => c.target.id.toString());
  const epochs = rows.map((c) => splitVersion(c.version).epoch.toString());
  await tx.$executeRaw`
    INSERT INTO view_totals (target_type, target_id, epoch, total, version)
    SELECT * , 0::bigint, 0::numeric FROM unnest(${types}::text[], ${ids}::text[]::bigint[], ${epochs}::text[]::bigint[])
    ON CONFLICT DO NOTHING`;
  const before = await tx.$queryRaw<{ target_id: string; epoch: string; total: string }[]>`
    SELECT v.target_id::text AS target_id, v.epoch::text AS epoch, v.total::text AS total
    FROM view_totals v JOIN unnest(${types}::text[], ${ids}::text[]::bigint[], ${epochs}::text[]::bigint[]) AS k(target_type, target_id, epoch)
      ON v.target_type = k.target_type AND v.target_id = k.target_id AND v.epoch = k.epoch
    ORDER BY v.target_type, v.target_id, v.epoch
    FOR UPDATE OF v`;
  const held = new Map(before.map((r) => [`${r.target_id}:${r.epoch}`, Number(r.total)]));
  const rising = rows.filter((c) => c.total > (held.get(`${c.target.id}:${splitVersion(c.version).epoch}`) ?? 0));
  if (rising.length > 0) {
    await tx.$executeRaw`
      UPDATE view_totals v SET total = k.total, version = k.version, txid = pg_current_xact_id()::text::bigint
      FROM unnest(
        ${rising.map((c) => c.target.type)}::text[],
        ${rising.map((c) => c.target.id.toString())}::text[]::bigint[],
        ${rising.map((c) => splitVersion(c.version).epoch.toString())}::text[]::bigint[],
        ${rising.map((c) => c.total.toString())}::text[]::bigint[],
        ${rising.map((c) => c.version.toString())}::text[]::numeric[]
      ) AS k(target_type, target_id, epoch, total, version)
      WHERE v.target_type = k.target_type AND v.target_id = k.target_id AND v.epoch = k.epoch`;
    for (const c of rising) add(c.target, "read", c.total - (held.get(`${c.target.id}:${splitVersion(c.version).epoch}`) ?? 0));
  }
  const after = await tx.$queryRaw<{ target_type: string; target_id: string; epoch: string; total: string; txid: string | null }[]>`
    SELECT v.target_type, v.target_id::text AS target_id, v.epoch::text AS epoch, v.total::text AS total, v.txid::text AS txid
    FROM view_totals v JOIN unnest(${types}::text[], ${ids}::text[]::bigint[], ${epochs}::text[]::bigint[]) AS k(target_type, target_id, epoch)
      ON v.target_type = k.target_type AND v.target_id = k.target_id AND v.epoch = k.epoch`;
  return after.map((r) => ({
    target: { type: r.target_type as TargetType, id: BigInt(r.target_id) },
    epoch: BigInt(r.epoch),
    total: Number(r.total),
    txid: BigInt(r.txid ?? "0"),
  }));
}
