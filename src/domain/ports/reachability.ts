// Whether Redis answers, as this process sees it.

export interface Reachability {
  /**
   * False from a call that found Redis out of reach (refused, reset, or silent past
   * its command timeout) until Redis answers again: reads of counts go to PostgreSQL without
   * asking it, and writes that need it are refused at once.
   */
  reachable(): boolean;
  /**
   * Tells of an error a Redis call met; answers whether it says Redis could not serve
   * the call (a caller may turn to PostgreSQL). Only an error that says Redis is out of
   * reach turns it unreachable: not an answer that refused the command (a write past
   * its deadline, out of memory, a slot moving).
   */
  failed(error: unknown): boolean;
}
