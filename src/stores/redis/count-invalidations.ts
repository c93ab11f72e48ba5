// Hears every write to a counter hash, so an API process may keep counts in memory
// (hot-counts.ts). Redis's server-assisted client-side caching does the work:
// CLIENT TRACKING in broadcasting mode on the counter hashes' prefix, redirected
// to the listening connection itself, subscribed to __redis__:invalidate. Every
// write Redis runs to such a key, inside a script or not, sends its name here.
//
// How recent is what was heard: a PING on the listening connection answers after
// every invalidation Redis sent before it ran, so once its reply arrives, every
// write Redis ran before the PING was sent has been heard. A listener pings on a
// timer (the bound on staleness) and on demand (a barrier). One listener per Redis
// node: the standalone server, or each master of a cluster.
import type { Redis } from "ioredis";

/** Where a Redis node is, as ioredis names it ("host:port"). */
export type NodeAddress = string;

export interface CountInvalidations {
  /** Handles each key written; null for "anything may have changed" (a flush, a listener lost or re-armed). */
  onInvalidate(handler: (key: string | null) => void): void;
  /**
   * When (performance.now() ms) the newest ping that came back on every node was
   * sent: every write Redis ran before it has been heard. -Infinity while any node
   * is not listening.
   */
  confirmedAt(): number;
  /** Whether every node listens now: what is read from now on may be kept until a write is heard. */
  listening(): boolean;
  /**
   * Resolves once a ping sent after this call came back on every node, so that
   * every write Redis ran before the call has been heard; rejects when a node is
   * not listening. Calls made in one tick share their pings.
   */
  barrier(): Promise<void>;
  close(): Promise<void>;
}

export interface CountInvalidationsOptions {
  /** The nodes to listen to now (one for a standalone Redis; every master of a cluster). */
  readonly nodes: () => readonly NodeAddress[];
  /** Opens a RESP2 connection to a node, not connected yet (lazyConnect), without an offline queue. */
  readonly open: (node: NodeAddress) => Redis;
  /** The prefix of every counter hash (keys.ts). */
  readonly prefix: string;
  /** How often each node is pinged: the staleness of what was heard, at rest. */
  readonly pingEveryMs: number;
  /** Tells a listener's problem (a failed arming or ping); the listener keeps trying. */
  readonly onProblem?: (error: unknown, node: NodeAddress) => void;
}

const channel = "__redis__:invalidate";

interface Waiter {
  readonly since: number;
  readonly resolve: () => void;
  readonly reject: (error: Error) => void;
}

class NodeListener {
  armed = false;
  confirmedAt = Number.NEGATIVE_INFINITY;
  private waiters: Waiter[] = [];
  private barrierPing = false;
  private closed = false;

  constructor(
    readonly node: NodeAddress,
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly invalidate: (key: string | null) => void,
    private readonly onProblem: (error: unknown) => void,
  ) {
    redis.on("messageBuffer", (name: Buffer, message: unknown) => {
      if (name.toString() !== channel) return;
      // Keys arrive as an array; a flush of the database sends a nil instead.
      if (!Array.isArray(message)) return this.invalidate(null);
      for (const key of message as Buffer[]) this.invalidate(key.toString());
    });
    redis.on("ready", () => void this.arm());
    redis.on("close", () => this.lose(new Error(`the invalidation listener of ${node} lost its connection`)));
    // Errors surface through 'close' and the listener re-arms on the next 'ready'.
    redis.on("error", () => {});
  }

  start(): void {
    this.redis.connect().catch((error: unknown) => this.onProblem(error));
  }

  /** Tracking is per connection: every new connection turns it on again, redirected to itself, then subscribes. */
  private async arm(): Promise<void> {
    try {
      const id = await this.redis.client("ID");
      await this.redis.call("CLIENT", "TRACKING", "ON", "REDIRECT", String(id), "BCAST", "PREFIX", this.prefix);
      await this.redis.subscribe(channel);
      if (this.closed) return;
      // Anything kept while this connection was not listening may be stale.
      this.invalidate(null);
      this.armed = true;
      this.ping();
    } catch (error) {
      this.onProblem(error);
      // A new connection arms from the start.
      this.redis.disconnect(true);
    }
  }

  private lose(error: Error): void {
    const was = this.armed;
    this.armed = false;
    this.confirmedAt = Number.NEGATIVE_INFINITY;
    for (const waiter of this.waiters.splice(0)) waiter.reject(error);
    if (was) this.invalidate(null);
  }

  ping(): void {
    if (!this.armed) return;
    const sentAt = performance.now();
    this.redis.ping().then(
      () => {
        if (!this.armed) return;
        if (sentAt > this.confirmedAt) this.confirmedAt = sentAt;
        this.waiters = this.waiters.filter((waiter) => (waiter.since <= sentAt ? (waiter.resolve(), false) : true));
      },
      (error: unknown) => this.onProblem(error),
    );
  }

  barrier(): Promise<void> {
    if (!this.armed) return Promise.reject(new Error(`the invalidation listener of ${this.node} is not listening`));
    return new Promise<void>((resolve, reject) => {
      this.waiters.push({ since: performance.now(), resolve, reject });
      if (this.barrierPing) return;
      this.barrierPing = true;
      // At the end of the tick: every barrier asked in it waits for the same ping.
      process.nextTick(() => {
        this.barrierPing = false;
        this.ping();
      });
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    this.lose(new Error(`the invalidation listener of ${this.node} closed`));
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

export function createCountInvalidations(options: CountInvalidationsOptions): CountInvalidations {
  const { prefix, pingEveryMs } = options;
  let handler: (key: string | null) => void = () => {};
  const listeners = new Map<NodeAddress, NodeListener>();
  const invalidate = (key: string | null) => handler(key);

  /** Listens to every node there is now, and stops listening to nodes gone. */
  const follow = () => {
    const nodes = new Set(options.nodes());
    for (const node of nodes) {
      if (listeners.has(node)) continue;
      const listener = new NodeListener(node, options.open(node), prefix, invalidate, (error) => options.onProblem?.(error, node));
      listeners.set(node, listener);
      listener.start();
    }
    for (const [node, listener] of listeners) {
      if (nodes.has(node)) continue;
      listeners.delete(node);
      void listener.close();
    }
  };
  follow();

  const timer = setInterval(() => {
    follow();
    for (const listener of listeners.values()) listener.ping();
  }, pingEveryMs);
  timer.unref();

  return {
    onInvalidate(next) {
      handler = next;
    },
    confirmedAt() {
      let oldest = Number.POSITIVE_INFINITY;
      for (const listener of listeners.values()) oldest = Math.min(oldest, listener.confirmedAt);
      return listeners.size === 0 ? Number.NEGATIVE_INFINITY : oldest;
    },
    listening() {
      return listeners.size > 0 && [...listeners.values()].every((listener) => listener.armed);
    },
    barrier() {
      return Promise.all([...listeners.values()].map((listener) => listener.barrier())).then(() => undefined);
    },
    async close() {
      clearInterval(timer);
      await Promise.all([...listeners.values()].map((listener) => listener.close()));
      listeners.clear();
    },
  };
}
