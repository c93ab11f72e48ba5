// The service's model: what can be counted, the entities the API shows, and the
// changes and repairs that travel between Redis and PostgreSQL, one concept per
// file. Data, and the arithmetic of it that every layer must agree on (stores
// included: the layer rule lets them import the model's values, and nothing else
// of the domain); no use case and no store's bookkeeping.
export * from "./applied-changes.js";
export * from "./changes.js";
export * from "./counts.js";
export * from "./entities.js";
export * from "./hot-windows.js";
export * from "./reconcile-survey.js";
export * from "./relations.js";
export * from "./targets.js";
