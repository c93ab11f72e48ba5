// The part of the composition root that builds the use cases the API serves, over
// the stores and the counts (compose/counts.ts).
import type { Logger } from "pino";
import type { Config } from "../config.js";
import { findOne, type Catalog } from "../domain/catalog.js";
import { createContentService } from "../domain/content.js";
import { KnownUsers } from "../domain/known-users.js";
import { createListService } from "../domain/lists.js";
import { createLiveCounts, type LiveCounts } from "../domain/live-counts.js";
import { createMembershipService } from "../domain/memberships.js";
import { createRankingService } from "../domain/rankings.js";
import type { Services } from "../domain/services.js";
import { createUserService } from "../domain/users.js";
import { createViewService } from "../domain/views.js";
import { createTokenService } from "../graphql/tokens.js";
import { createCountChanges } from "../stores/redis/count-changes.js";
import { createMembershipStore } from "../stores/redis/membership-store.js";
import { createRateBudgetStore } from "../stores/redis/rate-budget-store.js";
import { createViewStore } from "../stores/redis/view-store.js";
import type { ComposedCounts } from "./counts.js";
import { composeRateLimits } from "./rate-limits.js";
import type { ComposedClients, ComposedStores } from "./stores.js";

/** What the services are built over: the clients, the stores, the catalog and the counts. */
export interface ServiceParts {
  readonly clients: ComposedClients;
  readonly stores: ComposedStores;
  readonly catalog: Catalog;
  readonly counts: ComposedCounts;
  /** Users this process knows exist; filled by the user directory in an API process. */
  readonly knownUsers: KnownUsers;
}

function liveCountsOf(config: Config, { clients, stores, counts }: ServiceParts, logger: Logger): LiveCounts | undefined {
  if (!clients.subscriberRedis) return undefined;
  return createLiveCounts({
    changes: createCountChanges(clients.subscriberRedis, stores.keys),
    read: (targets, cold) => counts.counters.read(targets, cold),
    outOfReach: (error) => counts.reachability.failed(error),
    intervalMs: config.live.intervalMs,
    maxPosts: config.live.maxPosts,
    onReadFailure: (err) => logger.warn({ err }, "live counts could not be read from Redis; read again in a second"),
    onListenFailure: (err) => logger.warn({ err }, "Redis did not take an unsubscribe of live counts"),
  });
}

function viewsOf(config: Config, { clients, stores, catalog, counts }: ServiceParts, logger: Logger): Services["views"] {
  return createViewService({
    store: createViewStore(clients.redis, stores.keys),
    catalog,
    counters: counts.counters,
    flushEveryMs: config.views.flushIntervalMs,
    flushAtPosts: config.views.flushPosts,
    onFlushFailure: (err) => logger.warn({ err }, "views could not be flushed to Redis; they wait for the next flush"),
    onViewsLost: (views, err) =>
      logger.error({ err, views }, "views given up: Redis did not confirm them in time (a command already sent may still count them, once)"),
  });
}

export function composeServices(config: Config, parts: ServiceParts, logger: Logger): Services {
  const { clients, stores, catalog, counts } = parts;
  const { counters, reachability } = counts;
  const tokens = createTokenService({
    secret: config.jwtSecret,
    ttlSeconds: config.tokenTtlSeconds,
    issuer: config.jwt.issuer,
    audience: config.jwt.audience,
    clockToleranceSeconds: config.jwt.clockToleranceSeconds,
  });
  const rateLimits = composeRateLimits(config.rateLimits, createRateBudgetStore(clients.redis, stores.keys), reachability, logger);
  const live = liveCountsOf(config, parts, logger);
  return {
    catalog,
    counters,
    tokens,
    memberships: createMembershipService({
      memberships: createMembershipStore(clients.redis, stores.keys, undefined, stores.hotCounts ?? undefined),
      memberPages: stores.memberPages,
      counters,
      reachability,
      uses: counts.uses,
      journal: counts.journal,
    }),
    lists: createListService({ lists: stores.listStore, memberPages: stores.memberPages, reachability }),
    views: viewsOf(config, parts, logger),
    users: createUserService({
      users: stores.users,
      tokens,
      counters,
      catalog,
      known: parts.knownUsers,
      announcements: stores.userAnnouncements,
      onAnnounceFailure: (err) => logger.warn({ err }, "a new user could not be announced; other API processes look them up once instead"),
      rateLimits,
      reachability,
    }),
    rateLimits,
    rankings: createRankingService({ store: stores.rankingStore, cacheMs: config.ranking.cacheMs }),
    content: createContentService({
      posts: stores.posts,
      comments: stores.comments,
      counters,
      findPost: (id) => findOne(catalog.posts, id),
      findComment: (id) => findOne(catalog.comments, id),
    }),
    ...(live && { live }),
  };
}
