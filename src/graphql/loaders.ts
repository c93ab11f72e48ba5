// One set of DataLoaders per request: a feed's many fields become one Redis
// round trip for counts and the viewer's likes, one SQL query for unseen rows.
import DataLoader from "dataloader";
import type { ColdReads } from "../domain/counters.js";
import type { Viewer } from "../domain/identity.js";
import type { ListPage, ListPageRequest } from "../domain/lists.js";
import type { MembersPage, MembersPageRequest } from "../domain/memberships.js";
import {
  targetKey,
  type Comment,
  type Counts,
  type Page,
  type Post,
  type Relation,
  type Target,
  type TargetType,
  type TargetReadout,
  type User,
} from "../domain/model/index.js";
import type { PageRequest } from "../domain/ports/index.js";
import type { Services } from "../domain/services.js";

/**
 * A loader over targets of every type that also remembers what its batches
 * returned, so a field can answer synchronously once its list prefetched it:
 * a promise per item costs graphql-js far more than the value itself in a list
 * of 100. Keys are bigint ids per type, since building string keys showed in profiles.
 */
export class SettledLoader<V, T extends Target = Target, Hint = never> {
  private readonly byType = new Map<
    TargetType,
    { loader: DataLoader<bigint, V>; settled: Map<bigint, V>; prefetcher: DataLoader<{ targets: readonly T[]; hints: readonly Hint[] }, void> }
  >();

  /**
   * `batch` loads targets of one type; `hints` narrow what a prefetch needs of them
   * (undefined for a plain load, which needs everything).
   */
  constructor(private readonly batch: (targets: readonly T[], hints?: readonly Hint[]) => Promise<V[]>) {}

  private of(type: T["type"]) {
    let entry = this.byType.get(type);
    if (!entry) {
      const settled = new Map<bigint, V>();
      const loader = new DataLoader<bigint, V>(async (ids) => {
        const values = await this.batch(ids.map((id) => ({ type, id }) as T));
        values.forEach((value, i) => settled.set(ids[i] as bigint, value));
        return values;
      });
      // Lists prefetched in the same tick, such as the pages of one connection level
      // (every post's comments), load together: one batch for the level, not one per parent,
      // with every hint any of them gave.
      const prefetcher = new DataLoader<{ targets: readonly T[]; hints: readonly Hint[] }, void>(
        async (lists) => {
          const missing = [
            ...new Map(
              lists
                .flatMap((l) => l.targets)
                .filter((t) => !settled.has(t.id))
                .map((t) => [t.id, t]),
            ).values(),
          ];
          if (missing.length > 0) {
            const values = await this.batch(missing, [...new Set(lists.flatMap((l) => l.hints))]);
            values.forEach((value, i) => settled.set((missing[i] as T).id, value));
          }
          return lists.map(() => undefined);
        },
        { cache: false },
      );
      entry = { loader, settled, prefetcher };
      this.byType.set(type, entry);
    }
    return entry;
  }

  /** The value, synchronously when already loaded. */
  get(target: T): V | Promise<V> {
    const { loader, settled } = this.of(target.type);
    const value = settled.get(target.id);
    return value !== undefined || settled.has(target.id) ? (value as V) : loader.load(target.id);
  }

  load(target: T): Promise<V> {
    return this.of(target.type).loader.load(target.id);
  }

  /**
   * Loads those not loaded yet (targets of one type), in one batch with every other
   * list prefetched in the same tick; afterwards `get` answers them synchronously.
   */
  async prefetch(targets: readonly T[], hints: readonly Hint[] = []): Promise<void> {
    const first = targets[0];
    if (!first) return;
    if (targets.some((t) => t.type !== first.type)) throw new Error("prefetch takes targets of one type at a time.");
    const { settled, prefetcher } = this.of(first.type);
    if (targets.every((t) => settled.has(t.id))) return;
    await prefetcher.load({ targets, hints });
  }

  /** Replaces a value, e.g. with a mutation's own result. */
  set(target: T, value: V): void {
    const { loader, settled } = this.of(target.type);
    settled.set(target.id, value);
    loader.clear(target.id).prime(target.id, value);
  }
}

export interface Loaders {
  readonly user: DataLoader<bigint, User | null>;
  readonly post: DataLoader<bigint, Post | null>;
  readonly comment: DataLoader<bigint, Comment | null>;
  /**
   * Counts of a target and the viewer's memberships, read together: of every relation
   * of its type when loaded alone, of those its list selects when prefetched.
   */
  readonly readouts: SettledLoader<TargetReadout, Target, Relation>;
  /**
   * The same, never primed: for a membership a mutation's result did not tell
   * (a like's payload asked whether the viewer collected the post).
   */
  readonly fullReadouts: DataLoader<Target, TargetReadout, string>;
  /**
   * Pages of a connection, one per parent: the parents of one level (every post's
   * comments, every comment's replies) load with one SQL query, whatever their
   * number and whatever page size and cursor each asks.
   */
  readonly commentsOf: DataLoader<PageRequest, Page<Comment>, string>;
  readonly repliesTo: DataLoader<PageRequest, Page<Comment>, string>;
  /** Pages of a target's members (likers, followers), one SQL query per relation for the whole level. */
  readonly members: DataLoader<MembersPageRequest, MembersPage, string>;
  /** Pages of what users are members of (liked or collected posts, followed users). */
  readonly lists: DataLoader<ListPageRequest, ListPage, string>;
}

const pageKey = (r: PageRequest) => `${r.parentId}:${r.limit}:${r.beforeId ?? ""}`;
const membersKey = (r: MembersPageRequest) => `${r.relation}:${targetKey(r.target)}:${r.first}:${r.after ? `${r.after.at.getTime()}:${r.after.userId}` : ""}`;
const listKey = (r: ListPageRequest) => `${r.relation}:${r.userId}:${r.first}:${r.after ? `${r.after.at.getTime()}:${r.after.targetId}` : ""}`;

/** `cold`: what the request's reads may spend on targets Redis does not hold (cold-reads.ts); without it, no deadline and no charge. */
export function createLoaders(services: Services, viewer: Viewer | null, cold?: ColdReads): Loaders {
  const { catalog, content, counters, memberships, lists } = services;
  const comment = new DataLoader<bigint, Comment | null>((ids) => catalog.comments(ids));
  /** Comments a page brought are known rows: `parent` and `comment` lookups of them need no batch. */
  const commentPages = (load: (requests: readonly PageRequest[]) => Promise<Page<Comment>[]>) =>
    new DataLoader<PageRequest, Page<Comment>, string>(
      async (requests) => {
        const pages = await load(requests);
        for (const page of pages) for (const row of page.items) comment.prime(row.id, row);
        return pages;
      },
      { cacheKeyFn: pageKey },
    );
  return {
    user: new DataLoader((ids) => catalog.users(ids)),
    post: new DataLoader((ids) => catalog.posts(ids)),
    comment,
    readouts: new SettledLoader<TargetReadout, Target, Relation>((targets, relations) => counters.readout(targets, viewer?.userId ?? null, relations, cold)),
    fullReadouts: new DataLoader((targets) => counters.readout(targets, viewer?.userId ?? null, undefined, cold), { cacheKeyFn: targetKey }),
    commentsOf: commentPages((requests) => content.commentsOf(requests)),
    repliesTo: commentPages((requests) => content.repliesTo(requests)),
    members: new DataLoader((requests) => memberships.members(requests), { cacheKeyFn: membersKey }),
    lists: new DataLoader((requests) => lists.pages(requests), { cacheKeyFn: listKey }),
  };
}

/**
 * Seeds the loaders with a change's own result, so the payload needs no second
 * read: the counts, and the viewer's membership of the relation changed (others
 * are read if asked for).
 */
export function primeAfterChange(loaders: Loaders, target: Target, counts: Counts, relation: Relation, member: boolean): void {
  loaders.readouts.set(target, { counts, viewerIn: { [relation]: member } });
}
