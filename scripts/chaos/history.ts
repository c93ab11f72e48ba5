// What the load asked for and what it was told, per (user, post), and what
// that allows the final state to be.
//
// Each user's operations run one after another, so one pair's operations never
// overlap. An acknowledged operation (the API answered data) took effect
// between its request and its answer. An operation without an answer (a
// timeout, an error, a dropped connection) may never take effect, or take
// effect at any later time: a command queued in a client or re-sent after a
// reconnect can run after operations issued later. So after an unanswered
// operation the load keeps asking for the same state on that pair ("pinned"),
// as a client retrying a "safe to retry" error would: an acknowledged
// operation after the pin makes the final state certain again, and a pair
// whose retries were never answered may end either way ("unknown"), never
// counted as lost.
export type Kind = "like" | "unlike";

export type Outcome =
  | { readonly kind: "acknowledged"; readonly changed: boolean; readonly count: number }
  /** The request never reached the service (connection refused): it cannot take effect. */
  | { readonly kind: "refused"; readonly reason: string }
  | { readonly kind: "unanswered"; readonly reason: string };

export interface Operation {
  readonly kind: Kind;
  /** Milliseconds since the load started. */
  readonly startMs: number;
  readonly endMs: number;
  readonly outcome: Outcome;
  /** What an acknowledged answer's `changed` had to be, when the state before was certain. */
  readonly expectedChanged: boolean | null;
  /** When the state before this operation was acknowledged (ms since the load started; 0 = never touched). */
  readonly priorCertainMs: number;
}

const stateOf = (kind: Kind) => kind === "like";

export class PairHistory {
  readonly operations: Operation[] = [];
  /** The state every unanswered operation asked for, once there was one. */
  private pin: Kind | null = null;
  /** The state after the last acknowledged operation (initially not liked). */
  private acknowledged = false;
  /** Whether an operation without an answer may still take effect. */
  private pending = false;
  /** When the certain state was last established, ms since the load started (0 = the initial state). */
  private certainSinceMs = 0;
  /** When the operation that established it was sent. */
  private certainSentMs = 0;

  constructor(
    readonly userId: string,
    readonly postId: string,
  ) {}

  /** The operation the load may ask for next: `wanted`, unless the pair is pinned. */
  next(wanted: Kind): Kind {
    return this.pin ?? wanted;
  }

  /** The state the pair is certainly in, or null when an unanswered operation may still change it. */
  certainState(): boolean | null {
    return this.pending ? null : this.acknowledged;
  }

  record(kind: Kind, startMs: number, endMs: number, outcome: Outcome): Operation {
    const before = this.certainState();
    const operation: Operation = {
      kind,
      startMs,
      endMs,
      outcome,
      expectedChanged: outcome.kind === "acknowledged" && before !== null ? before !== stateOf(kind) : null,
      priorCertainMs: this.certainSinceMs,
    };
    this.operations.push(operation);
    if (outcome.kind === "acknowledged") {
      // Every unanswered operation asked for this same state (the pin), so none can undo it.
      this.acknowledged = stateOf(kind);
      this.pending = false;
      this.certainSinceMs = endMs;
      this.certainSentMs = startMs;
    } else if (outcome.kind === "unanswered") {
      this.pin = kind;
      this.pending = true;
    }
    return operation;
  }

  /** The final states the history allows: one when certain, both when an unanswered operation may or may not have applied. */
  allowedFinal(): ReadonlySet<boolean> {
    if (!this.pending || this.pin === null) return new Set([this.acknowledged]);
    return new Set([this.acknowledged, stateOf(this.pin)]);
  }

  /** When the state the check expects was acknowledged (ms since the load started; 0 = never touched). */
  get lastCertainMs(): number {
    return this.certainSinceMs;
  }

  /** When the operation that gave the expected state was sent (ms since the load started; 0 = never touched). */
  get lastCertainSentMs(): number {
    return this.certainSentMs;
  }

  /** Acknowledged answers whose `changed` contradicts the state known before them. */
  misanswered(): Operation[] {
    return this.operations.filter((o) => o.outcome.kind === "acknowledged" && o.expectedChanged !== null && o.outcome.changed !== o.expectedChanged);
  }

  /** The operations around `focus` (the last ones without it), for evidence. */
  describe(focus?: Operation): string {
    const at = focus ? this.operations.indexOf(focus) : this.operations.length - 1;
    const from = Math.max(0, at - 4);
    const to = Math.min(this.operations.length, at + 4);
    const ops = this.operations.slice(from, to).map((o) => {
      const answer = o.outcome.kind === "acknowledged" ? `changed=${o.outcome.changed} count=${o.outcome.count}` : `${o.outcome.kind}: ${o.outcome.reason}`;
      return `${o === focus ? ">" : ""}${o.kind}@${(o.startMs / 1000).toFixed(2)}-${(o.endMs / 1000).toFixed(2)}s ${answer}`;
    });
    return `${from > 0 ? `… ${from} earlier, ` : ""}${ops.join(", ")}${to < this.operations.length ? `, … ${this.operations.length - to} later` : ""}`;
  }
}
