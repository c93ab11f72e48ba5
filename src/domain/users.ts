// Accounts: registration, sign-in, and who a bearer token names.
import { LRUCache } from "lru-cache";
import { badInput, DomainError, ErrorCode } from "../errors.js";
import { findOne, type Catalog } from "./catalog.js";
import type { CounterService } from "./counters.js";
import { hashPassword, verifyPassword, type Viewer } from "./identity.js";
import type { KnownUsers } from "./known-users.js";
import type { User } from "./model/index.js";
import type { Reachability, TokenService, UserAnnouncements, UserStore } from "./ports/index.js";
import { checkPlainText } from "./text.js";
import type { RateLimits } from "./rate-limits.js";

export interface Session {
  readonly token: string;
  readonly user: User;
}

/** A bearer token's viewer, or why it names none. */
export type Authentication = { readonly viewer: Viewer } | { readonly problem: string };

export interface UserService {
  register(username: string, email: string, password: string): Promise<Session>;
  login(username: string, password: string): Promise<Session>;
  /** The viewer a bearer token names: validly signed, unexpired, and naming a user that exists. */
  authenticate(token: string): Promise<Authentication>;
}

export function validateRegistration(username: string, email: string, password: string): void {
  if (!/^[A-Za-z0-9_]{3,32}$/.test(username)) {
    throw badInput("username", "username must be 3 to 32 letters, digits or underscores.");
  }
  // The username's pattern admits no control character; email and password are checked for them.
  checkPlainText("email", email);
  if (email.length > 254 || !/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email)) {
    throw badInput("email", "email must be an address such as name@example.com.");
  }
  checkPlainText("password", password);
  if (password.length < 8 || password.length > 128 || !/[A-Za-z]/.test(password) || !/[0-9]/.test(password)) {
    throw badInput("password", "password must be 8 to 128 characters with at least one letter and one digit.");
  }
}

const noSuchUser = "The bearer token names no user of this service; sign in again.";

/**
 * Whether a username could name an account (registration's rule). Others are
 * answered as unknown without asking PostgreSQL: a null byte would make it fail
 * the query, and no such name was ever registered.
 */
const couldBeUsername = (username: string): boolean => /^[A-Za-z0-9_]{3,32}$/.test(username);

/**
 * What an unknown username's password is checked against, so that answering
 * "wrong" costs one scrypt whether the account exists or not. The same shape as
 * a stored hash (16-byte salt, 32-byte key); no password is sought to match it.
 */
const unknownUserHash = `scrypt$${"5a".repeat(16)}$${"c3".repeat(32)}`;

export function createUserService(deps: {
  users: UserStore;
  tokens: TokenService;
  counters: CounterService;
  catalog: Catalog;
  /** Users known to exist without SQL; an API process fills it (user-directory.ts), elsewhere it stays empty. */
  known: KnownUsers;
  /** Where each new user is told to the other API processes. */
  announcements: Pick<UserAnnouncements, "announce">;
  /** Called when a new user could not be announced: other processes then look them up once. */
  onAnnounceFailure?: (err: unknown) => void;
  missingTtlMs?: number;
  /** Charges each sign-in attempt to its username's budget before any password work. */
  rateLimits?: RateLimits;
  /** Whether Redis answers: while it does not, a new user is not announced (other processes look them up once instead). */
  reachability?: Reachability;
}): UserService {
  const { users, tokens, counters, catalog, known, announcements, rateLimits, reachability } = deps;
  // Users found missing, so a token naming none costs one query per 30 s, not one per request.
  const missing = new LRUCache<bigint, true>({ max: 100_000, ttl: deps.missingTtlMs ?? 30_000 });
  return {
    async authenticate(token) {
      const viewer = await tokens.verify(token);
      if (!viewer) return { problem: "The bearer token is invalid or expired; sign in again." };
      if (known.has(viewer.userId)) return { viewer };
      if (missing.has(viewer.userId)) return { problem: noSuchUser };
      let exists: boolean;
      try {
        exists = (await findOne(catalog.users, viewer.userId)) !== null;
      } catch {
        // PostgreSQL is out of reach: trust the signature rather than fail every signed-in
        // request; only a holder of the secret can sign a token naming no user.
        return { viewer };
      }
      if (!exists) {
        missing.set(viewer.userId, true);
        return { problem: noSuchUser };
      }
      known.add(viewer.userId);
      return { viewer };
    },
    async register(username, email, password) {
      validateRegistration(username, email, password);
      const outcome = await users.create({ username, email: email.toLowerCase(), passwordHash: await hashPassword(password) });
      if ("taken" in outcome) throw badInput(outcome.taken, `That ${outcome.taken} is already registered; choose another.`);
      const user = outcome.created;
      known.add(user.id);
      // Awaited: Redis hands the message to every subscriber before it answers, so the other
      // processes have it on its way before the client holds a token to send them.
      if (!reachability || reachability.reachable()) {
        await announcements.announce(user.id).catch((err: unknown) => {
          reachability?.failed(err);
          deps.onAnnounceFailure?.(err);
        });
      }
      await counters.initNew({ type: "user", id: user.id });
      return { token: await tokens.issue(user.id), user };
    },
    async login(username, password) {
      await rateLimits?.charge([{ budget: "usernameLogins", subject: username, cost: 1 }]);
      const found = couldBeUsername(username) ? await users.findCredentials(username) : null;
      // One message and one scrypt for both cases, so sign-in reveals neither by its answer nor by its time which usernames exist.
      const matches = await verifyPassword(password, found ? found.passwordHash : unknownUserHash);
      if (!found || !matches) {
        throw new DomainError(ErrorCode.UNAUTHENTICATED, "Username or password is wrong.");
      }
      return { token: await tokens.issue(found.user.id), user: found.user };
    },
  };
}
