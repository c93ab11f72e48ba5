// Leases that keep one process at a time on a job.

/** A lock several processes share, held for at most a while. */
export interface Lease {
  /** A token when taken, null when another holder has it. */
  acquire(ttlMs: number): Promise<string | null>;
  release(token: string): Promise<void>;
}

/** Work due at known times that several processes share: the first to claim a time does that work. */
export interface TickClaims {
  /** True for the one caller that claimed `tick` first. */
  claim(tick: Date): Promise<boolean>;
}
