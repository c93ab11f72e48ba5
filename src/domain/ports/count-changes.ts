// Word of counts that changed, heard from whichever process changed them.
import type { Target } from "../model/index.js";

/** Announcements that targets' counts changed, heard from whichever process changed them. */
export interface CountChanges {
  /** Starts hearing of changes to these targets; resolves once it does. */
  listen(targets: readonly Target[]): Promise<void>;
  /** Stops hearing of them. */
  ignore(targets: readonly Target[]): Promise<void>;
  /**
   * Called with each target heard of, and with null when changes may have been
   * missed (the connection dropped and came back): every target is then to be read again.
   */
  onChange(handler: (target: Target | null) => void): void;
}
