// The stores the domain needs, in its own terms, one subsystem per file. Redis,
// PostgreSQL and RabbitMQ implement these in src/stores/; the use cases and
// pipeline loops take them as arguments, so neither knows a client library or a
// key layout.
export type * from "./content.js";
export type * from "./count-changes.js";
export type * from "./counters.js";
export type * from "./leases.js";
export type * from "./lists.js";
export type * from "./member-pages.js";
export type * from "./memberships.js";
export type * from "./memory.js";
export type * from "./message-bus.js";
export type * from "./outbox.js";
export type * from "./persist-store.js";
export type * from "./persisted-counts.js";
export type * from "./persisted-queries.js";
export type * from "./rankings.js";
export type * from "./rate-budgets.js";
export type * from "./reachability.js";
export type * from "./rebuild.js";
export type * from "./reconcile.js";
export type * from "./snapshots.js";
export type * from "./tokens.js";
export type * from "./users.js";
export type * from "./views.js";
