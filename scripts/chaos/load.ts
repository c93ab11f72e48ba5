// The load of a case: users and posts made through the API as clients make
// them, then likes and unlikes from every user at once (one request at a time
// per user, so each pair's operations are sequential) for a while, on several
// posts of which one is hot, each answer recorded in the pair's history; and
// anonymous viewers reporting views of the hot post, each answer's count and
// time recorded.
import { setTimeout as sleep } from "node:timers/promises";
import { PairHistory, type Kind, type Outcome } from "./history.js";

export interface GraphQLAnswer {
  data?: Record<string, unknown> | null;
  errors?: { message: string; extensions?: { code?: string } }[];
}

export type Post = { readonly id: string; readonly authorId: string };

export interface CastUser {
  readonly id: string;
  readonly token: string;
  /** Signs in again with `password`. */
  readonly username: string;
}

/** The password of every user a case registers. */
export const castPassword = "chaos-password-1";

export interface Cast {
  readonly authors: readonly CastUser[];
  readonly likers: readonly CastUser[];
  /** The first is the hot one. */
  readonly posts: readonly Post[];
}

export interface LoadOptions {
  readonly likers: number;
  readonly authors: number;
  readonly posts: number;
  /** Share of operations on the hot post. */
  readonly hotShare: number;
  /** Pause of each user between operations, drawn from [0, thinkMs], so the load leaves the shared cores some air. */
  readonly thinkMs: number;
  /** How long a request may go unanswered before the load counts it unanswered. */
  readonly requestTimeoutMs: number;
  /** Anonymous clients reporting views of the hot post, one request at a time each. */
  readonly viewers: number;
  /** Views of the hot post each report carries. */
  readonly viewsPerReport: number;
  /**
   * Likes and unlikes a second, started on a fixed schedule whatever the answers take
   * (each by a user with nothing in flight, who waits for one when all are busy), or
   * null for users that each send their next one a think time after the last answer.
   * On a schedule, a slow service makes requests wait instead of making fewer of them,
   * so latencies measured from the scheduled start show what users would see.
   */
  readonly likesPerSecond: number | null;
}

export const defaultLoad: LoadOptions = {
  likers: 20,
  authors: 2,
  posts: 6,
  hotShare: 0.5,
  thinkMs: 40,
  requestTimeoutMs: 10_000,
  viewers: 4,
  viewsPerReport: 10,
  likesPerSecond: null,
};

/** One like or unlike of the load, for latency figures. */
export interface LatencySample {
  /** When it was due (its scheduled start, or its start), ms into the load. */
  readonly atMs: number;
  /** From due to answered. */
  readonly ms: number;
  /** Answered with data; otherwise the error code or transport failure. */
  readonly error: string | null;
  /** The post liked or unliked, for the load's own samples (a paced sender's may be of anything). */
  readonly postId?: string;
}

/** The view reports of the load: what was answered counted, and when. */
export interface ViewReports {
  /** Views answered counted, with when each answer came (ms into the load). */
  readonly acknowledged: { readonly endMs: number; readonly views: number }[];
  /** Views in reports that got no answer: each may or may not have been counted. */
  unanswered: number;
}

/** The API's endpoint, changeable while the load runs (a restarted API keeps its port, but a case may move it). */
export class Endpoint {
  constructor(public url: string) {}

  async call(query: string, variables: Record<string, unknown>, token?: string, timeoutMs = 10_000): Promise<GraphQLAnswer> {
    const response = await fetch(this.url, {
      method: "POST",
      headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify({ query, variables }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    return (await response.json()) as GraphQLAnswer;
  }

  /** The data of a call that must succeed (setup and final reads), retried while the service is not ready. */
  async must<T>(query: string, variables: Record<string, unknown>, token?: string): Promise<T> {
    let last = "";
    for (let attempt = 0; attempt < 20; attempt++) {
      try {
        const answer = await this.call(query, variables, token);
        if (answer.data && !answer.errors?.length) return answer.data as T;
        last = JSON.stringify(answer.errors);
      } catch (error) {
        last = (error as Error).message;
      }
      await sleep(500);
    }
    throw new Error(`the API kept failing ${query.trim().split("\n")[0]}: ${last}`);
  }
}

const register = `mutation($u: String!, $e: String!, $p: String!) { register(username: $u, email: $e, password: $p) { token user { id } } }`;
const signIn = `mutation($u: String!, $p: String!) { login(username: $u, password: $p) { token user { id } } }`;
const createPost = `mutation($t: String!) { createPost(title: $t, body: "chaos") { id } }`;

async function inBatches<T>(count: number, size: number, make: (i: number) => Promise<T>): Promise<T[]> {
  const made: T[] = [];
  for (let i = 0; i < count; i += size) made.push(...(await Promise.all(Array.from({ length: Math.min(size, count - i) }, (_, j) => make(i + j)))));
  return made;
}

/** Registers the authors and likers and has the authors write the posts, round robin. */
export async function createCast(api: Endpoint, tag: string, options: LoadOptions): Promise<Cast> {
  type Registered = { register: { token: string; user: { id: string } } };
  const user = async (role: string, i: number) => {
    const name = `${tag}_${role}${i}`;
    for (let attempt = 0; ; attempt++) {
      try {
        const answer = await api.call(register, { u: name, e: `${name}@chaos.example`, p: castPassword });
        const r = (answer.data as Registered | null | undefined)?.register;
        if (r && !answer.errors?.length) return { id: r.user.id, token: r.token, username: name };
        // An earlier attempt answered with an error (or not at all) but registered the user: sign in instead.
        if (attempt > 0 && answer.errors?.[0]?.extensions?.code === "BAD_USER_INPUT") {
          const { login: l } = await api.must<{ login: Registered["register"] }>(signIn, { u: name, p: castPassword });
          return { id: l.user.id, token: l.token, username: name };
        }
        if (attempt >= 19) throw new Error(`registering ${name} kept failing: ${JSON.stringify(answer.errors)}`);
      } catch (error) {
        if (attempt >= 19) throw error;
      }
      await sleep(500);
    }
  };
  const authors = await inBatches(options.authors, 4, (i) => user("a", i));
  const likers = await inBatches(options.likers, 4, (i) => user("u", i));
  const posts: Post[] = [];
  for (let i = 0; i < options.posts; i++) {
    const author = authors[i % authors.length] as (typeof authors)[number];
    const { createPost: p } = await api.must<{ createPost: { id: string } }>(createPost, { t: `${tag} post ${i}` }, author.token);
    posts.push({ id: p.id, authorId: author.id });
  }
  return { authors, likers, posts };
}

const recordViews = `mutation($ids: [ID!]!) { recordViews(postIds: $ids) }`;

/** The load's like and unlike, answering `changed` and the post's count. */
export const mutations: Record<Kind, string> = {
  like: `mutation($id: ID!) { likePost(postId: $id) { changed post { counts { likes } } } }`,
  unlike: `mutation($id: ID!) { unlikePost(postId: $id) { changed post { counts { likes } } } }`,
};

function isRefused(error: unknown): boolean {
  // fetch wraps the socket error: ECONNREFUSED means no byte of the request reached a server.
  const cause = (error as { cause?: { code?: string } }).cause;
  return cause?.code === "ECONNREFUSED";
}

export interface LoadRun {
  readonly pairs: ReadonlyMap<string, PairHistory>;
  readonly views: ViewReports;
  /** Milliseconds since the load started. */
  readonly elapsedMs: () => number;
  /** Error codes and transport failures seen, with how often. */
  readonly failures: Map<string, number>;
  /** The longest any request took, in ms. */
  readonly maxLatencyMs: () => number;
  readonly attempted: () => number;
  /** Every like and unlike, in the order answered. */
  readonly samples: readonly LatencySample[];
  /** Sends nothing more; resolves once nothing is in flight. */
  pause(): Promise<void>;
  resume(): void;
  /** Resolves when every user finished its last operation after `stop`. */
  stop(): Promise<void>;
}

export const pairKey = (userId: string, postId: string) => `${userId}:${postId}`;

/** Starts every liker's loop; `stop` ends them after the operation in flight. */
export function startLoad(api: Endpoint, cast: Cast, options: LoadOptions): LoadRun {
  const started = Date.now();
  const elapsedMs = () => Date.now() - started;
  const pairs = new Map<string, PairHistory>();
  for (const liker of cast.likers) for (const post of cast.posts) pairs.set(pairKey(liker.id, post.id), new PairHistory(liker.id, post.id));
  const failures = new Map<string, number>();
  const fail = (what: string) => failures.set(what, (failures.get(what) ?? 0) + 1);
  let stopping = false;
  let attempted = 0;
  let maxLatencyMs = 0;
  const samples: LatencySample[] = [];

  async function operate(liker: CastUser, post: Post, dueMs?: number): Promise<void> {
    const pair = pairs.get(pairKey(liker.id, post.id)) as PairHistory;
    const believed = pair.certainState() ?? false;
    // Mostly the opposite of the state, so the pair keeps changing; now and then the same, which must answer changed=false.
    const wanted: Kind = Math.random() < 0.85 ? (believed ? "unlike" : "like") : believed ? "like" : "unlike";
    const kind = pair.next(wanted);
    const startMs = elapsedMs();
    attempted++;
    let outcome: Outcome;
    try {
      const answer = await api.call(mutations[kind], { id: post.id }, liker.token, options.requestTimeoutMs);
      const payload = (answer.data?.[kind === "like" ? "likePost" : "unlikePost"] ?? null) as { changed: boolean; post: { counts: { likes: number } } } | null;
      if (payload && !answer.errors?.length) {
        outcome = { kind: "acknowledged", changed: payload.changed, count: payload.post.counts.likes };
      } else {
        const code = answer.errors?.[0]?.extensions?.code ?? "no data";
        fail(code);
        outcome = { kind: "unanswered", reason: code };
      }
    } catch (error) {
      const reason = isRefused(error) ? "connection refused" : ((error as { cause?: { code?: string } }).cause?.code ?? (error as Error).name);
      fail(reason);
      outcome = isRefused(error) ? { kind: "refused", reason } : { kind: "unanswered", reason };
    }
    const endMs = elapsedMs();
    maxLatencyMs = Math.max(maxLatencyMs, endMs - startMs);
    pair.record(kind, startMs, endMs, outcome);
    const due = dueMs ?? startMs;
    samples.push({ atMs: due, ms: endMs - due, error: outcome.kind === "acknowledged" ? null : outcome.reason, postId: post.id });
  }

  /** Closed while paused; every loop passes it before each request. */
  let gate: { readonly opened: Promise<void>; open(): void } | null = null;
  /** Pauses so far (the schedule starts afresh after one), and when the last ended. */
  let pauses = 0;
  let resumedMs = 0;
  let inFlight = 0;
  let idle: (() => void) | null = null;
  const passGate = async () => {
    while (gate && !stopping) await gate.opened;
  };
  async function inFlightDo<T>(send: () => Promise<T>): Promise<T> {
    inFlight++;
    try {
      return await send();
    } finally {
      inFlight--;
      if (inFlight === 0) idle?.();
    }
  }

  const pickPost = (): Post => {
    const [hot, ...rest] = cast.posts as [Post, ...Post[]];
    return rest.length === 0 || Math.random() < options.hotShare ? hot : (rest[Math.floor(Math.random() * rest.length)] as Post);
  };

  async function user(liker: CastUser): Promise<void> {
    while (!stopping) {
      await passGate();
      if (stopping) break;
      const post = pickPost();
      await inFlightDo(() => operate(liker, post));
      // A refused connection answers at once; without a pause the loop would spin while the API is down.
      await sleep(Math.random() * options.thinkMs + (pairs.get(pairKey(liker.id, post.id))?.operations.at(-1)?.outcome.kind === "refused" ? 100 : 0));
    }
  }

  // The schedule of `likesPerSecond`: due times not yet taken, and the users waiting for one.
  const due: number[] = [];
  const waiting: ((dueMs: number | null) => void)[] = [];
  async function schedule(perSecond: number): Promise<void> {
    while (!stopping) {
      await passGate();
      const from = elapsedMs();
      const pausesAtStart = pauses;
      for (let n = 0; !stopping && pauses === pausesAtStart; n++) {
        const at = from + (n * 1000) / perSecond;
        if (at > elapsedMs()) await sleep(at - elapsedMs());
        const taker = waiting.shift();
        if (taker) taker(at);
        else due.push(at);
      }
      due.length = 0;
    }
    for (const taker of waiting.splice(0)) taker(null);
  }
  const takeDue = () => (due.length > 0 ? Promise.resolve(due.shift() as number) : new Promise<number | null>((resolve) => waiting.push(resolve)));
  async function scheduledUser(liker: CastUser): Promise<void> {
    while (!stopping) {
      const dueMs = await takeDue();
      if (dueMs === null) break;
      // Due before a pause ended: its time says nothing about the service.
      if (gate || dueMs < resumedMs) {
        await passGate();
        continue;
      }
      const post = pickPost();
      await inFlightDo(() => operate(liker, post, dueMs));
      if (pairs.get(pairKey(liker.id, post.id))?.operations.at(-1)?.outcome.kind === "refused") await sleep(100);
    }
  }

  const views: ViewReports = { acknowledged: [], unanswered: 0 };
  async function viewer(): Promise<void> {
    const ids = Array.from({ length: options.viewsPerReport }, () => (cast.posts[0] as Post).id);
    while (!stopping) {
      await passGate();
      if (stopping) break;
      let refused = false;
      await inFlightDo(async () => {
        try {
          const answer = await api.call(recordViews, { ids }, undefined, options.requestTimeoutMs);
          const counted = answer.data?.recordViews;
          const code = answer.errors?.[0]?.extensions?.code;
          if (typeof counted === "number" && !answer.errors?.length) views.acknowledged.push({ endMs: elapsedMs(), views: counted });
          else {
            fail(code ?? "no data");
            // Refused before anything ran (a budget spent): those views cannot have counted.
            if (code !== "RATE_LIMITED") views.unanswered += ids.length;
          }
        } catch (error) {
          refused = isRefused(error);
          fail(refused ? "connection refused" : ((error as { cause?: { code?: string } }).cause?.code ?? (error as Error).name));
          // A refused connection never reached a server: those views cannot have counted.
          if (!refused) views.unanswered += ids.length;
        }
      });
      await sleep(Math.random() * options.thinkMs + (refused ? 100 : 0));
    }
  }

  function resume(): void {
    const closed = gate;
    gate = null;
    resumedMs = elapsedMs();
    closed?.open();
  }

  const perSecond = options.likesPerSecond;
  const likers = perSecond === null ? cast.likers.map(user) : [schedule(perSecond), ...cast.likers.map(scheduledUser)];
  const users = Promise.all([...likers, ...Array.from({ length: options.viewers }, viewer)]);
  return {
    pairs,
    views,
    elapsedMs,
    failures,
    maxLatencyMs: () => maxLatencyMs,
    attempted: () => attempted,
    samples,
    async pause() {
      if (gate) return;
      let open = () => {};
      const opened = new Promise<void>((resolve) => (open = resolve));
      gate = { opened, open };
      pauses++;
      if (inFlight > 0) await new Promise<void>((resolve) => (idle = resolve));
      idle = null;
    },
    resume,
    async stop() {
      stopping = true;
      resume();
      await users;
    },
  };
}
