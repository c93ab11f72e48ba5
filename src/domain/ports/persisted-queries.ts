/** The texts of automatic persisted queries by their SHA-256, shared by every API process. */
export interface PersistedQueryStore {
  /** The text registered under a SHA-256 hash (64 lower-case hex digits), or undefined when unknown or out of reach. */
  get(hash: string): Promise<string | undefined>;
  /** Keeps a text under its hash, which the caller has checked is its SHA-256; a failure is not the caller's. */
  set(hash: string, query: string): Promise<void>;
}
