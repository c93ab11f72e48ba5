import type { Viewer } from "../domain/identity.js";
import type { ChargedBudgets } from "../domain/rate-limits.js";
import type { Services } from "../domain/services.js";
import { unauthenticated } from "../errors.js";
import { coldReadsOf } from "./cold-reads.js";
import { createLoaders, type Loaders } from "./loaders.js";

/** REQUEST_DEADLINE_MS's default. */
export const defaultRequestDeadlineMs = 1_000;
/** CONTENT_DEADLINE_MS's default. */
export const defaultContentDeadlineMs = 5_000;

export interface Context {
  /** Set by register and login for the rest of their request, so the payload reads as the new user. */
  viewer: Viewer | null;
  /**
   * Why a sent token was not accepted. The operation is then refused before any
   * resolver runs (authentication-plugin.ts), unless it only signs in.
   */
  readonly tokenProblem: string | null;
  /** The caller's address as Fastify saw it (X-Forwarded-For only when TRUST_PROXY believes it): whose per-address budgets pay. */
  readonly clientIp: string;
  readonly loaders: Loaders;
  readonly services: Services;
  /** The request's tightest charged budget, for the response's RateLimit-* headers (rate-limit-plugin.ts). */
  readonly charged: ChargedBudgets;
  /**
   * When the request answers SERVICE_UNAVAILABLE if it has not answered otherwise, in
   * milliseconds since the epoch: REQUEST_DEADLINE_MS after its context was made, or
   * CONTENT_DEADLINE_MS for an operation that only writes content or signs in (set once
   * the operation is known, deadline-plugin.ts). Writes of the request apply before it or
   * never. A subscription, which outlives any request and writes nothing, has none.
   */
  deadlineAtMs?: number;
  /** When the context was made, in milliseconds since the epoch: where its deadlines count from. */
  readonly startedAtMs?: number;
}

/** A request's context, from its Authorization header and the client's address, answering within `deadlineMs`. */
export async function createContext(
  services: Services,
  header: string | undefined,
  clientIp = "unknown",
  deadlineMs = defaultRequestDeadlineMs,
): Promise<Context> {
  const startedAtMs = Date.now();
  let viewer: Viewer | null = null;
  let tokenProblem: string | null = null;
  if (header) {
    const token = /^Bearer\s+(\S+)$/i.exec(header)?.[1];
    if (token) {
      const authentication = await services.users.authenticate(token);
      if ("viewer" in authentication) viewer = authentication.viewer;
      else tokenProblem = authentication.problem;
    } else {
      tokenProblem = 'The Authorization header must be "Bearer <token>".';
    }
  }
  const charged: ChargedBudgets = { standing: null };
  const context: Context = {
    viewer,
    tokenProblem,
    clientIp,
    // Asked when a read runs: by then the operation is known, and with it the deadline.
    loaders: createLoaders(
      services,
      viewer,
      coldReadsOf(services, viewer, clientIp, charged, () => context.deadlineAtMs),
    ),
    services,
    charged,
    deadlineAtMs: startedAtMs + deadlineMs,
    startedAtMs,
  };
  return context;
}

/** The signed-in viewer, or UNAUTHENTICATED. */
export function requireViewer(ctx: Context): Viewer {
  if (!ctx.viewer) throw unauthenticated(ctx.tokenProblem ?? undefined);
  return ctx.viewer;
}
