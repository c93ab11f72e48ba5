import type { Viewer } from "../domain/identity.js";
import type { Services } from "../domain/services.js";
import { unauthenticated } from "../errors.js";
import { createLoaders, type Loaders } from "./loaders.js";

export interface Context {
  /** Set by register and login for the rest of their request, so the payload reads as the new user. */
  viewer: Viewer | null;
  /** Why a sent token was not accepted, for the error a mutation then gets. */
  readonly tokenProblem: string | null;
  readonly loaders: Loaders;
  readonly services: Services;
}

/** A request's context, from its Authorization header. */
export async function createContext(services: Services, header: string | undefined): Promise<Context> {
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
  return { viewer, tokenProblem, loaders: createLoaders(services, viewer), services };
}

/** The signed-in viewer, or UNAUTHENTICATED. */
export function requireViewer(ctx: Context): Viewer {
  if (!ctx.viewer) throw unauthenticated(ctx.tokenProblem ?? undefined);
  return ctx.viewer;
}
