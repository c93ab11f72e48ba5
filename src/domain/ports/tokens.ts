// The bearer tokens users sign in with, as the use cases need them: issued on
// sign-up and sign-in, verified on every authenticated request. How a token is
// made (JWT HS256) is the HTTP API's business (src/graphql/tokens.ts).
import type { Viewer } from "../identity.js";

export interface TokenService {
  issue(userId: bigint): Promise<string>;
  /** The viewer a token names, or null when it is malformed, forged or expired. */
  verify(token: string): Promise<Viewer | null>;
}
