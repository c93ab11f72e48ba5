// Loads the member indexes that feeds find missing: a viewer whose index Redis
// does not hold complete (new, or never read since Redis started keeping them) is
// read from PostgreSQL once, in the background, with others asked meanwhile in
// one query. The read that found it missing answered exactly without it; reads
// after the load rule out, with one command, every target the viewer did not join.
import type { Relation, TargetType } from "./model/index.js";
import type { MemberIndexStore, MemberPageStore } from "./ports/index.js";

export interface MemberIndexLoader {
  /** Asks for the user's index to be loaded; returns at once. */
  missing(relation: Relation, targetType: TargetType, userId: bigint): void;
  /** Resolves once no load is under way (tests, shutdown). */
  idle(): Promise<void>;
}

export interface MemberIndexLoaderDeps {
  readonly indexes: MemberIndexStore;
  readonly memberPages: MemberPageStore;
  /** Users read from PostgreSQL in one query. */
  readonly batch?: number;
  /** Indexes waiting for a load, at most; more are asked again by a later read. */
  readonly maxWaiting?: number;
  /** How long an index loaded (or failed) is not asked for again by this process. */
  readonly quietMs?: number;
  readonly onFailure?: (error: unknown) => void;
}

interface Wanted {
  readonly relation: Relation;
  readonly targetType: TargetType;
  readonly userId: bigint;
}

export function createMemberIndexLoader(deps: MemberIndexLoaderDeps): MemberIndexLoader {
  const { indexes, memberPages } = deps;
  const batch = deps.batch ?? 50;
  const maxWaiting = deps.maxWaiting ?? 1_000;
  const quietMs = deps.quietMs ?? 10_000;
  const waiting = new Map<string, Wanted>();
  // Recently loaded or tried, by when: a viewer's next feeds, already on their way, do not ask again.
  const recent = new Map<string, number>();
  let running: Promise<void> | null = null;

  async function loadSome(): Promise<void> {
    while (waiting.size > 0) {
      const taken = [...waiting].slice(0, batch);
      for (const [key] of taken) waiting.delete(key);
      const wanted = taken.map(([, w]) => w);
      try {
        // Begun first: a target rebuilt from PostgreSQL after the read below notes its members in it.
        await Promise.all(wanted.map((w) => indexes.begin(w.relation, w.targetType, w.userId)));
        const found = await memberPages.memberships(
          wanted.map((w) => ({
            relation: w.relation,
            targetType: w.targetType,
            userId: w.userId,
            limit: indexes.capacity + 1,
            after: null,
            skip: new Set<bigint>(),
          })),
        );
        await Promise.all(
          wanted.map((w, i) => {
            const rows = found[i] ?? [];
            const overflowed = rows.length > indexes.capacity;
            return indexes.complete(w.relation, w.targetType, w.userId, overflowed ? [] : rows.map((row) => row.targetId), overflowed);
          }),
        );
      } catch (error) {
        try {
          deps.onFailure?.(error);
        } catch {
          // A failing report must not stop the loads that follow.
        }
      }
    }
  }

  function kick(): void {
    running ??= loadSome().finally(() => {
      running = null;
      // Asked for between the last round and this line.
      if (waiting.size > 0) kick();
    });
  }

  return {
    missing(relation, targetType, userId) {
      const key = `${relation}:${targetType}:${userId}`;
      const now = Date.now();
      const at = recent.get(key);
      if ((at !== undefined && now - at < quietMs) || waiting.has(key) || waiting.size >= maxWaiting) return;
      if (recent.size >= maxWaiting * 10) recent.clear();
      recent.set(key, now);
      waiting.set(key, { relation, targetType, userId });
      kick();
    },
    async idle() {
      while (running) await running;
    },
  };
}
