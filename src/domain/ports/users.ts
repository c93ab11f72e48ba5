// Users: who exists, and telling other API processes of a new one.
import type { IdRun, User } from "../model/index.js";

export type NewUserOutcome = { readonly created: User } | { readonly taken: "username" | "email" };

export interface UserStore {
  create(input: { username: string; email: string; passwordHash: string }): Promise<NewUserOutcome>;
  /** The user with their password hash, for signing in. */
  findCredentials(username: string): Promise<{ readonly user: User; readonly passwordHash: string } | null>;
  findByIds(ids: readonly bigint[]): Promise<User[]>;
  /**
   * The lowest `maxIds` user ids above `after`, as runs of consecutive ids in
   * ascending order: one statement reading at most `maxIds` index entries, however
   * many users there are. Fewer ids than `maxIds` means none is left above them.
   */
  idRunsAfter(after: bigint, maxIds: number): Promise<IdRun[]>;
}

/**
 * Registrations told to every API process, so each knows a new user without
 * asking PostgreSQL. Best effort: a process that misses one looks the user up once.
 */
export interface UserAnnouncements {
  /** Tells every listening process that this user's row is committed. */
  announce(userId: bigint): Promise<void>;
  /**
   * Calls `handler` with every user announced from now on, by any process;
   * resolves once subscribed, with the function that stops it.
   */
  onAnnounced(handler: (userId: bigint) => void): Promise<() => Promise<void>>;
}
