// Each user's own lists, newest first: the posts they liked or collected (the
// newest in Redis, so a change shows at once; older ones from PostgreSQL), and
// the users they follow (from PostgreSQL). One cursor walks across both stores.
//
// Redis holds a list's newest entries and where its knowledge ends (the
// horizon): entries newer than the horizon are Redis's alone, entries at or
// before it PostgreSQL's, but for posts whose membership changed recently
// (PostgreSQL may not hold the change yet): Redis's record of the change speaks
// for those, while the list is held and while it is not. A page takes what follows its cursor from both and merges
// them, so no entry is skipped or shown twice at the boundary. While Redis is out of
// reach, pages come from PostgreSQL alone.
import { setTimeout as sleep } from "node:timers/promises";
import { listCapacity, listedRelations, type ListedRelation, type ListPosition, type Relation, type TargetType } from "./model/index.js";
import type { HeldList, ListStore, MemberPageStore, Reachability } from "./ports/index.js";

export interface ListPage {
  /** Each entry's position: the post or user, and when it was listed; a client's cursor names one. */
  readonly entries: ListPosition[];
  readonly hasMore: boolean;
}

export interface ListPageRequest {
  /** like: liked posts; collect: collected posts; follow: followed users. */
  readonly relation: Relation;
  readonly userId: bigint;
  readonly first: number;
  readonly after: ListPosition | null;
}

export interface ListService {
  /** A page of each request's list, in order. */
  pages(requests: readonly ListPageRequest[]): Promise<ListPage[]>;
}

/** Whether `a` comes after `b` in a newest-first list (is older). */
export function isOlder(a: ListPosition, b: ListPosition): boolean {
  const at = a.at.getTime() - b.at.getTime();
  return at < 0 || (at === 0 && a.targetId < b.targetId);
}

const newestFirst = (a: ListPosition, b: ListPosition) => (isOlder(a, b) ? 1 : isOlder(b, a) ? -1 : 0);

const listedType: Record<Relation, TargetType> = { like: "post", collect: "post", follow: "user" };

const isListed = (relation: Relation): relation is ListedRelation => (listedRelations as readonly Relation[]).includes(relation);

export interface ListServiceDeps {
  readonly lists: ListStore;
  readonly memberPages: MemberPageStore;
  /** How long a load may hold its lock before another process may take over. */
  readonly loadLockMs?: number;
  /**
   * How long a read waits for another process's load of the same list before it
   * reads PostgreSQL alone: well within a request's deadline (REQUEST_DEADLINE_MS),
   * and a load takes a few milliseconds.
   */
  readonly loadWaitMs?: number;
  /** Whether Redis answers; while it does not, pages come from PostgreSQL alone. Without it Redis is always asked. */
  readonly reachability?: Reachability;
}

export function createListService(deps: ListServiceDeps): ListService {
  const { lists, memberPages, reachability } = deps;
  const loadLockMs = deps.loadLockMs ?? 30_000;
  const loadWaitMs = deps.loadWaitMs ?? 250;

  /** Loads the list from PostgreSQL unless another process does; then reads it (null if still not held). */
  async function load(relation: ListedRelation, userId: bigint): Promise<HeldList | null> {
    const token = await lists.lock(relation, userId, loadLockMs);
    if (token) {
      try {
        // Marked loading before PostgreSQL is read: changes arriving from now on are kept, and
        // the load joins them to PostgreSQL's rows, so none committed meanwhile is lost.
        await lists.begin(relation, userId);
        const [rows = []] = await memberPages.memberships([{ relation, targetType: "post", userId, limit: listCapacity + 1, after: null, skip: new Set() }]);
        await lists.finish(relation, userId, rows.slice(0, listCapacity), rows[listCapacity] ?? null);
      } finally {
        await lists.unlock(relation, userId, token);
      }
      return lists.read(relation, userId);
    }
    for (const started = Date.now(); Date.now() - started < loadWaitMs; await sleep(20)) {
      const held = await lists.read(relation, userId);
      if (held) return held;
    }
    return null;
  }

  /** A page of a list Redis holds: its entries, and PostgreSQL's rows past its horizon when the page reaches them. */
  async function heldPage(held: HeldList, request: ListPageRequest, fetch: number): Promise<ListPosition[]> {
    const { relation, userId, after } = request;
    // The list's entries, and joins PostgreSQL may not hold yet that the list no longer keeps (over its capacity).
    const kept = new Set(held.entries.map((e) => e.targetId));
    const unpersisted = [...held.recent].flatMap(([targetId, r]) => (r.member && !kept.has(targetId) ? [{ targetId, at: r.at }] : []));
    const fromRedis = [...held.entries, ...unpersisted]
      .sort(newestFirst)
      .filter((e) => after === null || isOlder(e, after))
      .slice(0, fetch);
    const { horizon } = held;
    // PostgreSQL's rows at or before the horizon count whenever the page may reach that far: when Redis
    // fills less than the page, or its last entry for the page is itself at or before the horizon.
    const last = fromRedis.at(-1);
    if (horizon === null || (fromRedis.length >= fetch && (last === undefined || isOlder(horizon, last)))) return fromRedis;
    // PostgreSQL's rows at or before the horizon (strictly before a position one id above it), after the cursor.
    const justAbove = { at: horizon.at, targetId: horizon.targetId + 1n };
    const bound = after !== null && isOlder(after, justAbove) ? after : justAbove;
    const skip = new Set([...held.entries.map((e) => e.targetId), ...held.recent.keys()]);
    const [older = []] = await memberPages.memberships([{ relation, targetType: listedType[relation], userId, limit: fetch, after: bound, skip }]);
    return [...fromRedis, ...older].sort(newestFirst);
  }

  /** A page of liked or collected posts: from the list Redis holds, loading it first if it holds none. */
  async function listedPage(relation: ListedRelation, request: ListPageRequest, fetch: number): Promise<ListPosition[]> {
    const { userId, after } = request;
    const held = (await lists.read(relation, userId)) ?? (await load(relation, userId));
    if (held) return heldPage(held, request, fetch);
    // A list another process is still loading: PostgreSQL, with Redis's records of recent changes speaking for their posts.
    const recent = await lists.recent(relation, userId);
    const [rows = []] = await memberPages.memberships([{ relation, targetType: "post", userId, limit: fetch, after, skip: new Set(recent.keys()) }]);
    const joined = [...recent].flatMap(([targetId, r]) => (r.member ? [{ targetId, at: r.at }] : []));
    return [...rows, ...joined.filter((e) => after === null || isOlder(e, after))].sort(newestFirst);
  }

  /** A page from PostgreSQL alone: follows always, and every list while Redis is out of reach. */
  async function persistedPage(request: ListPageRequest, fetch: number): Promise<ListPosition[]> {
    const { relation, userId, after } = request;
    const [rows = []] = await memberPages.memberships([{ relation, targetType: listedType[relation], userId, limit: fetch, after, skip: new Set() }]);
    return rows;
  }

  async function page(request: ListPageRequest): Promise<ListPage> {
    const { relation, first } = request;
    const fetch = first + 1;
    let candidates: ListPosition[];
    if (!isListed(relation) || (reachability && !reachability.reachable())) candidates = await persistedPage(request, fetch);
    else {
      try {
        candidates = await listedPage(relation, request, fetch);
      } catch (error) {
        // Redis out of reach: the changes still on their way from it show once it is back.
        if (!reachability?.failed(error)) throw error;
        candidates = await persistedPage(request, fetch);
      }
    }
    return {
      entries: candidates.slice(0, first),
      hasMore: candidates.length > first,
    };
  }

  return {
    pages: (requests) => Promise.all(requests.map(page)),
  };
}
