// Whether Redis answers, as this process sees it.

export interface Reachability {
  /**
   * False from a call that found Redis out of reach (refused, reset, or silent past
   * its timeout) until Redis answers again: reads of counts go to PostgreSQL without
   * asking it, and writes that need it are refused at once.
   */
  reachable(): boolean;
  /** Tells of an error a Redis call met; answers whether it says Redis is out of reach. */
  failed(error: unknown): boolean;
  /** Tells of a call Redis did not answer within what its caller could wait (far past its usual time): out of reach too. */
  silent(): void;
}
