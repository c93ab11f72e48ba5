// The load of a case: likes and unlikes from every user of its cast at once (one request at a time
// per user, so each pair's operations are sequential) for a while, on several
// posts of which one is hot, each answer recorded in the pair's history; and
// anonymous viewers reporting views of the hot post, each answer's count and
// time recorded.
import { setTimeout as sleep } from "node:timers/promises";
import type { Cast, CastUser, Post } from "./cast.js";
import type { Endpoint } from "./endpoint.js";
import { PairHistory, type Kind, type Outcome } from "./history.js";

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

/** A transport failure as the load counts it. */
const failureOf = (error: unknown): string =>
  isRefused(error) ? "connection refused" : ((error as { cause?: { code?: string } }).cause?.code ?? (error as Error).name);

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

/** What the loops of a running load share. */
interface Running {
  readonly api: Endpoint;
  readonly cast: Cast;
  readonly options: LoadOptions;
  readonly elapsedMs: () => number;
  readonly pairs: Map<string, PairHistory>;
  readonly failures: Map<string, number>;
  readonly samples: LatencySample[];
  readonly views: ViewReports;
  stopping: boolean;
  attempted: number;
  maxLatencyMs: number;
  /** Closed while paused; every loop passes it before each request. */
  gate: { readonly opened: Promise<void>; open(): void } | null;
  /** Pauses so far (the schedule starts afresh after one), and when the last ended. */
  pauses: number;
  resumedMs: number;
  inFlight: number;
  idle: (() => void) | null;
}

const fail = (run: Running, what: string) => run.failures.set(what, (run.failures.get(what) ?? 0) + 1);

async function likeOrUnlike(run: Running, kind: Kind, liker: CastUser, post: Post): Promise<Outcome> {
  try {
    const answer = await run.api.call(mutations[kind], { id: post.id }, liker.token, run.options.requestTimeoutMs);
    const payload = (answer.data?.[kind === "like" ? "likePost" : "unlikePost"] ?? null) as { changed: boolean; post: { counts: { likes: number } } } | null;
    if (payload && !answer.errors?.length) return { kind: "acknowledged", changed: payload.changed, count: payload.post.counts.likes };
    const code = answer.errors?.[0]?.extensions?.code ?? "no data";
    fail(run, code);
    return { kind: "unanswered", reason: code };
  } catch (error) {
    const reason = failureOf(error);
    fail(run, reason);
    return isRefused(error) ? { kind: "refused", reason } : { kind: "unanswered", reason };
  }
}

async function operate(run: Running, liker: CastUser, post: Post, dueMs?: number): Promise<void> {
  const pair = run.pairs.get(pairKey(liker.id, post.id)) as PairHistory;
  const believed = pair.certainState() ?? false;
  // Mostly the opposite of the state, so the pair keeps changing; now and then the same, which must answer changed=false.
  const wanted: Kind = Math.random() < 0.85 ? (believed ? "unlike" : "like") : believed ? "like" : "unlike";
  const kind = pair.next(wanted);
  const startMs = run.elapsedMs();
  run.attempted++;
  const outcome = await likeOrUnlike(run, kind, liker, post);
  const endMs = run.elapsedMs();
  run.maxLatencyMs = Math.max(run.maxLatencyMs, endMs - startMs);
  pair.record(kind, startMs, endMs, outcome);
  const due = dueMs ?? startMs;
  run.samples.push({ atMs: due, ms: endMs - due, error: outcome.kind === "acknowledged" ? null : outcome.reason, postId: post.id });
}

async function passGate(run: Running): Promise<void> {
  while (run.gate && !run.stopping) await run.gate.opened;
}

async function inFlightDo<T>(run: Running, send: () => Promise<T>): Promise<T> {
  run.inFlight++;
  try {
    return await send();
  } finally {
    run.inFlight--;
    if (run.inFlight === 0) run.idle?.();
  }
}

function pickPost(run: Running): Post {
  const [hot, ...rest] = run.cast.posts as [Post, ...Post[]];
  return rest.length === 0 || Math.random() < run.options.hotShare ? hot : (rest[Math.floor(Math.random() * rest.length)] as Post);
}

const lastRefused = (run: Running, liker: CastUser, post: Post) => run.pairs.get(pairKey(liker.id, post.id))?.operations.at(-1)?.outcome.kind === "refused";

async function user(run: Running, liker: CastUser): Promise<void> {
  while (!run.stopping) {
    await passGate(run);
    if (run.stopping) break;
    const post = pickPost(run);
    await inFlightDo(run, () => operate(run, liker, post));
    // A refused connection answers at once; without a pause the loop would spin while the API is down.
    await sleep(Math.random() * run.options.thinkMs + (lastRefused(run, liker, post) ? 100 : 0));
  }
}

/** The schedule of `likesPerSecond`: due times not yet taken, and the users waiting for one. */
interface Schedule {
  readonly due: number[];
  readonly waiting: ((dueMs: number | null) => void)[];
}

async function schedule(run: Running, s: Schedule, perSecond: number): Promise<void> {
  while (!run.stopping) {
    await passGate(run);
    const from = run.elapsedMs();
    const pausesAtStart = run.pauses;
    for (let n = 0; !run.stopping && run.pauses === pausesAtStart; n++) {
      const at = from + (n * 1000) / perSecond;
      if (at > run.elapsedMs()) await sleep(at - run.elapsedMs());
      const taker = s.waiting.shift();
      if (taker) taker(at);
      else s.due.push(at);
    }
    s.due.length = 0;
  }
  for (const taker of s.waiting.splice(0)) taker(null);
}

const takeDue = (s: Schedule) =>
  s.due.length > 0 ? Promise.resolve(s.due.shift() as number) : new Promise<number | null>((resolve) => s.waiting.push(resolve));

async function scheduledUser(run: Running, s: Schedule, liker: CastUser): Promise<void> {
  while (!run.stopping) {
    const dueMs = await takeDue(s);
    if (dueMs === null) break;
    // Due before a pause ended: its time says nothing about the service.
    if (run.gate || dueMs < run.resumedMs) {
      await passGate(run);
      continue;
    }
    const post = pickPost(run);
    await inFlightDo(run, () => operate(run, liker, post, dueMs));
    if (lastRefused(run, liker, post)) await sleep(100);
  }
}

/** Reports `ids` viewed once; answers whether the connection was refused. */
async function reportViews(run: Running, ids: string[]): Promise<boolean> {
  try {
    const answer = await run.api.call(recordViews, { ids }, undefined, run.options.requestTimeoutMs);
    const counted = answer.data?.recordViews;
    const code = answer.errors?.[0]?.extensions?.code;
    if (typeof counted === "number" && !answer.errors?.length) run.views.acknowledged.push({ endMs: run.elapsedMs(), views: counted });
    else {
      fail(run, code ?? "no data");
      // Refused before anything ran (a budget spent): those views cannot have counted.
      if (code !== "RATE_LIMITED") run.views.unanswered += ids.length;
    }
    return false;
  } catch (error) {
    const refused = isRefused(error);
    fail(run, failureOf(error));
    // A refused connection never reached a server: those views cannot have counted.
    if (!refused) run.views.unanswered += ids.length;
    return refused;
  }
}

async function viewer(run: Running): Promise<void> {
  const ids = Array.from({ length: run.options.viewsPerReport }, () => (run.cast.posts[0] as Post).id);
  while (!run.stopping) {
    await passGate(run);
    if (run.stopping) break;
    const refused = await inFlightDo(run, () => reportViews(run, ids));
    await sleep(Math.random() * run.options.thinkMs + (refused ? 100 : 0));
  }
}

async function pause(run: Running): Promise<void> {
  if (run.gate) return;
  let open = () => {};
  const opened = new Promise<void>((resolve) => (open = resolve));
  run.gate = { opened, open };
  run.pauses++;
  if (run.inFlight > 0) await new Promise<void>((resolve) => (run.idle = resolve));
  run.idle = null;
}

function resume(run: Running): void {
  const closed = run.gate;
  run.gate = null;
  run.resumedMs = run.elapsedMs();
  closed?.open();
}

/** Starts every liker's loop; `stop` ends them after the operation in flight. */
export function startLoad(api: Endpoint, cast: Cast, options: LoadOptions): LoadRun {
  const started = Date.now();
  const pairs = new Map<string, PairHistory>();
  for (const liker of cast.likers) for (const post of cast.posts) pairs.set(pairKey(liker.id, post.id), new PairHistory(liker.id, post.id));
  const run: Running = {
    api,
    cast,
    options,
    elapsedMs: () => Date.now() - started,
    pairs,
    failures: new Map(),
    samples: [],
    views: { acknowledged: [], unanswered: 0 },
    stopping: false,
    attempted: 0,
    maxLatencyMs: 0,
    gate: null,
    pauses: 0,
    resumedMs: 0,
    inFlight: 0,
    idle: null,
  };
  const perSecond = options.likesPerSecond;
  const s: Schedule = { due: [], waiting: [] };
  const likers =
    perSecond === null
      ? cast.likers.map((liker) => user(run, liker))
      : [schedule(run, s, perSecond), ...cast.likers.map((liker) => scheduledUser(run, s, liker))];
  const users = Promise.all([...likers, ...Array.from({ length: options.viewers }, () => viewer(run))]);
  return {
    pairs,
    views: run.views,
    elapsedMs: run.elapsedMs,
    failures: run.failures,
    maxLatencyMs: () => run.maxLatencyMs,
    attempted: () => run.attempted,
    samples: run.samples,
    pause: () => pause(run),
    resume: () => resume(run),
    async stop() {
      run.stopping = true;
      resume(run);
      await users;
    },
  };
}
