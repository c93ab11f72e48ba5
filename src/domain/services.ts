// The use cases, built from stores handed in by an entry point.
import type { Catalog } from "./catalog.js";
import type { ContentService } from "./content.js";
import type { CounterService } from "./counters.js";
import type { ListService } from "./lists.js";
import type { LiveCounts } from "./live-counts.js";
import type { MembershipService } from "./memberships.js";
import type { RankingService } from "./rankings.js";
import type { RateLimits } from "./rate-limits.js";
import type { TokenService } from "./ports/index.js";
import type { UserService } from "./users.js";
import type { ViewService } from "./views.js";

export interface Services {
  readonly catalog: Catalog;
  readonly content: ContentService;
  readonly counters: CounterService;
  readonly memberships: MembershipService;
  readonly lists: ListService;
  readonly views: ViewService;
  readonly tokens: TokenService;
  readonly users: UserService;
  readonly rateLimits: RateLimits;
  readonly rankings: RankingService;
  /** Counts sent to subscribers as they change; absent where no subscribing Redis connection was opened. */
  readonly live?: LiveCounts;
}
