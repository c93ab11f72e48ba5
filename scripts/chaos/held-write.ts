// held-write: a write answered "unavailable" must never apply later. A second API
// process reaches Redis through a proxy that holds its bytes (a network that
// delivers late, not one that refuses). Users like a post through it and are
// answered with an error; half of them then like and unlike the same post
// through the other API process, both answered changed. Then the proxy delivers
// what it held (round 1), or drops the connections so the client library would
// send again (round 2). A held like that runs then is a write applied after its
// error answer, and for the users who unliked since, an acknowledged unlike undone.
// clock-ahead and clock-behind run the same with the service's clock 2 s off
// Redis's (libfaketime): deadlines must hold, and likes must still work.
import { existsSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import type pg from "pg";
import { startTcpProxy, type TcpProxy } from "../lib/tcp-proxy.js";
import type { ChaosCase, FaultContext } from "./case.js";
import { createCast, type CastUser } from "./cast.js";
import { readRedisPost } from "./check.js";
import type { Endpoint } from "./endpoint.js";
import { countsText, ms, window } from "./figures.js";
import { defaultLoad, mutations } from "./load.js";

/** How long the proxy holds the bytes; held likes were seen to apply after 5 s and after 70 s alike. */
const holdMs = 5_000;
/**
 * Under a skewed clock, bytes are delivered 0.5 s after the error answer (the
 * request's deadline is 1 s), well within the skew: a deadline set on the
 * service's clock 2 s ahead of Redis's would still let them apply.
 */
const skewedHoldMs = 1_500;
/** Users per group and round: those who only like through the held process, and those who then like and unlike through the other. */
const perGroup = 4;

type Ending = "released" | "dropped";

interface HeldAnswer {
  readonly user: CastUser;
  /** The error code, or null when it answered data. */
  readonly error: string | null;
  readonly ms: number;
}

interface Round {
  readonly ending: Ending;
  readonly postId: string;
  readonly heldOnly: HeldAnswer[];
  readonly followedUp: HeldAnswer[];
  /** Users of `followedUp` whose like and unlike through the other process both answered changed: true. */
  readonly confirmed: CastUser[];
  /** Follow-ups that did not answer changed: true, described. */
  readonly unconfirmed: string[];
  /** Users Redis held as likers of the post a few seconds after the proxy let go. */
  likedInRedis: Set<string>;
  /** How long after the last held like's error answer the proxy let go, and the bytes it held towards Redis meanwhile. */
  releasedAfterMs: number;
  heldBytes: number;
}

interface State {
  readonly proxy: TcpProxy;
  readonly held: Endpoint;
  readonly users: readonly CastUser[];
  readonly postIds: readonly string[];
  readonly rounds: Round[];
}

let state: State | null = null;
const current = (): State => {
  if (!state) throw new Error("held-write ran without its preparation");
  return state;
};

async function like(
  api: Endpoint,
  kind: "like" | "unlike",
  postId: string,
  user: CastUser,
): Promise<{ error: string | null; changed: boolean | null; ms: number }> {
  const started = Date.now();
  try {
    const answer = await api.call(mutations[kind], { id: postId }, user.token, 15_000);
    const payload = answer.data?.[kind === "like" ? "likePost" : "unlikePost"] as { changed: boolean } | null | undefined;
    if (payload && !answer.errors?.length) return { error: null, changed: payload.changed, ms: Date.now() - started };
    return { error: answer.errors?.[0]?.extensions?.code ?? "no data", changed: null, ms: Date.now() - started };
  } catch (error) {
    return { error: (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).name, changed: null, ms: Date.now() - started };
  }
}

async function likers(ctx: FaultContext, postId: string): Promise<Set<string>> {
  const post = await readRedisPost(ctx.redisClient, ctx.partitions, postId);
  return new Set(post.members.keys());
}

async function round(ctx: FaultContext, ending: Ending, index: number, holdFor: number): Promise<Round> {
  const { proxy, held, users, postIds } = current();
  const postId = postIds[index] as string;
  const mine = users.slice(index * 2 * perGroup, (index + 1) * 2 * perGroup);
  const r: Round = { ending, postId, heldOnly: [], followedUp: [], confirmed: [], unconfirmed: [], likedInRedis: new Set(), releasedAfterMs: 0, heldBytes: 0 };
  ctx.note(`round ${index + 1}: api-held's Redis bytes held`);
  const bytesBefore = proxy.held.toServer;
  proxy.hold();
  const holdStarted = Date.now();
  let lastErrorAt = holdStarted;
  await Promise.all(
    mine.map(async (user, i) => {
      const answer = await like(held, "like", postId, user);
      if (answer.error !== null) lastErrorAt = Math.max(lastErrorAt, Date.now());
      const heldAnswer = { user, error: answer.error, ms: answer.ms };
      if (i < perGroup) return void r.heldOnly.push(heldAnswer);
      r.followedUp.push(heldAnswer);
      if (answer.error === null) return void r.unconfirmed.push(`user ${user.id}: the held like answered data (changed ${String(answer.changed)})`);
      const liked = await like(ctx.api, "like", postId, user);
      const unliked = liked.error === null ? await like(ctx.api, "unlike", postId, user) : null;
      if (liked.changed === true && unliked?.changed === true) r.confirmed.push(user);
      else
        r.unconfirmed.push(
          `user ${user.id}: like ${liked.error ?? `changed ${String(liked.changed)}`}, unlike ${unliked ? (unliked.error ?? `changed ${String(unliked.changed)}`) : "not sent"}`,
        );
    }),
  );
  ctx.note(`round ${index + 1}: held likes answered, follow-ups done (${r.confirmed.length} of ${perGroup} confirmed)`);
  await sleep(Math.max(0, holdStarted + holdFor - Date.now()));
  r.releasedAfterMs = Date.now() - lastErrorAt;
  r.heldBytes = proxy.held.toServer - bytesBefore;
  if (ending === "released") proxy.resume();
  else proxy.reset();
  ctx.note(
    `round ${index + 1}: the proxy ${ending === "released" ? `delivered what it held (${proxy.held.toServer} bytes to Redis so far)` : "dropped its connections and what it held"}`,
  );
  // Long enough for a delivered or re-sent like to run, and for api-held to connect again.
  await sleep(3_000);
  r.likedInRedis = await likers(ctx, postId);
  return r;
}

/** Debian's libfaketime, which shifts the clock of the processes it is preloaded into, where this machine's architecture keeps it. */
const libfaketime =
  ["x86_64-linux-gnu", "aarch64-linux-gnu"].map((arch) => `/usr/lib/${arch}/faketime/libfaketime.so.1`).find((file) => existsSync(file)) ??
  "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

interface Skew {
  readonly name: string;
  /** How far the service's clock is set off Redis's, in seconds (FAKETIME's offset). */
  readonly seconds: number;
}

/** The held likes' answers and what became of them, once the pipeline has settled. */
async function reportRounds(ctx: FaultContext, sql: pg.Client, skew: Skew | null): Promise<void> {
  const { rounds, postIds } = current();
  state = null;
  const rows = await sql.query<{ target_id: string; user_id: string }>(
    "SELECT target_id::text, user_id::text FROM likes WHERE target_type = 'post' AND target_id = ANY($1::bigint[])",
    [postIds],
  );
  const heldAnswers = rounds.flatMap((r) => [...r.heldOnly, ...r.followedUp]);
  const errors = heldAnswers.filter((a) => a.error !== null);
  const codes = new Map<string, number>();
  for (const a of errors) codes.set(a.error as string, (codes.get(a.error as string) ?? 0) + 1);
  const times = errors.map((a) => a.ms);
  ctx.figure({
    name: "held likes answered with an error",
    value: `${errors.length} of ${heldAnswers.length} (${countsText(codes)})${times.length ? `, in ${ms(Math.min(...times))}–${ms(Math.max(...times))}` : ""}`,
    target: { text: `${heldAnswers.length} of ${heldAnswers.length}`, met: errors.length === heldAnswers.length },
  });
  const followUps = rounds.flatMap((r) => r.followedUp.filter((a) => a.error !== null));
  const confirmed = rounds.reduce((n, r) => n + r.confirmed.length, 0);
  const unconfirmed = rounds.flatMap((r) => r.unconfirmed);
  ctx.figure({
    name: "then like and unlike through the other process, both changed",
    value: `${confirmed} of ${followUps.length}${unconfirmed.length ? `; ${unconfirmed.slice(0, 3).join("; ")}` : ""}`,
    target: { text: "all", met: confirmed === followUps.length && unconfirmed.length === 0 },
  });

  // Liked now in either store: Redis a few seconds after the proxy let go or now, PostgreSQL once settled.
  const finalRedis = await Promise.all(rounds.map((r) => likers(ctx, r.postId)));
  const likedAnywhere = (r: Round, i: number, user: CastUser) =>
    r.likedInRedis.has(user.id) ||
    (finalRedis[i] as Set<string>).has(user.id) ||
    rows.rows.some((row) => row.target_id === r.postId && row.user_id === user.id);
  const perRound = (count: (r: Round, i: number) => number) => rounds.map((r, i) => `${r.ending} ${count(r, i)}`).join(", ");
  const lateCount = (r: Round, i: number) => r.heldOnly.filter((a) => a.error !== null && likedAnywhere(r, i, a.user)).length;
  const late = rounds.reduce((n, r, i) => n + lateCount(r, i), 0);
  const heldOnlyErrors = rounds.reduce((n, r) => n + r.heldOnly.filter((a) => a.error !== null).length, 0);
  ctx.figure({
    name: "held likes applied after their error answer",
    value: `${late} of ${heldOnlyErrors} (${perRound(lateCount)})`,
    target: { text: "0", met: late === 0 },
  });
  const undoneCount = (r: Round, i: number) => r.confirmed.filter((user) => likedAnywhere(r, i, user)).length;
  const undone = rounds.reduce((n, r, i) => n + undoneCount(r, i), 0);
  ctx.figure({
    name: "acknowledged unlikes undone",
    value: `${undone} of ${confirmed} (${perRound(undoneCount)}; checked in Redis and PostgreSQL after settling)`,
    target: { text: "0", met: undone === 0 },
  });
  if (skew) reportSkew(ctx, rounds, skew);
}

function reportSkew(ctx: FaultContext, rounds: readonly Round[], skew: Skew): void {
  // Vacuous unless the held likes were sent (bytes held towards Redis) and released within the skew,
  // where a deadline set on the service's own clock would still have let them apply.
  const limitMs = Math.abs(skew.seconds) * 1000 - 500;
  ctx.figure({
    name: "held bytes towards Redis, released after the last error answer",
    value: rounds.map((r) => `${r.ending}: ${r.heldBytes} bytes, ${ms(r.releasedAfterMs)}`).join("; "),
    target: { text: `bytes held, released within ${limitMs} ms`, met: rounds.every((r) => r.heldBytes > 0 && r.releasedAfterMs < limitMs) },
  });
  // The load's likes and unlikes go through the process whose Redis is not held.
  const load = window(ctx.load.samples, 0, Number.POSITIVE_INFINITY);
  const share = load.count === 0 ? 0 : (100 * (load.count - load.errorCount)) / load.count;
  ctx.figure({
    name: "the load's likes and unlikes answered",
    value: `${share.toFixed(2)} % of ${load.count}; errors ${countsText(load.errors)}`,
    target: { text: "≥ 99 %", met: share >= 99 },
  });
}

function heldWriteCase(skew: Skew | null): ChaosCase {
  return {
    name: skew?.name ?? "held-write",
    summary: `${skew ? `the service's clock ${Math.abs(skew.seconds)} s ${skew.seconds < 0 ? "behind" : "ahead of"} Redis's (libfaketime), and ` : ""}a second API process reaches Redis through a proxy that holds its bytes for ${(skew ? skewedHoldMs : holdMs) / 1000} s: ${perGroup * 2} users like a post through it (answered unavailable), ${perGroup} of them then like and unlike it through the other process; the proxy then delivers what it held (round 1) or drops the connections (round 2)`,
    layout: "api + worker",
    redisAppendOnly: true,
    loadSeconds: 4,
    // Timers keep the real pace: only the wall clock, which dates and deadlines read, is shifted.
    ...(skew && { env: { LD_PRELOAD: libfaketime, FAKETIME: `${skew.seconds > 0 ? "+" : ""}${skew.seconds}s`, FAKETIME_DONT_FAKE_MONOTONIC: "1" } }),
    unavailable: () => (skew && !existsSync(libfaketime) ? `${libfaketime} is missing: install Debian's faketime package` : null),
    async prepare(ctx) {
      const proxy = await startTcpProxy({ host: "127.0.0.1", port: ctx.redis.port });
      ctx.defer(() => proxy.close());
      const { api: held } = await ctx.startApi("api-held", { REDIS_URL: proxy.url });
      const cast = await createCast(ctx.api, `${ctx.tag}h`, { ...defaultLoad, authors: 1, likers: 4 * perGroup, posts: 2 });
      const postIds = cast.posts.map((p) => p.id);
      ctx.ownPosts(postIds);
      state = { proxy, held, users: cast.likers, postIds, rounds: [] };
    },
    async inject(ctx) {
      await sleep(1_000);
      const s = current();
      s.rounds.push(await round(ctx, "released", 0, skew ? skewedHoldMs : holdMs));
      s.rounds.push(await round(ctx, "dropped", 1, skew ? skewedHoldMs : holdMs));
    },
    afterSettled: (ctx, sql) => reportRounds(ctx, sql, skew),
  };
}

export const heldWrite = heldWriteCase(null);
/** Redis's clock 2 s ahead of the service's. */
export const clockAhead = heldWriteCase({ name: "clock-ahead", seconds: -2 });
/** Redis's clock 2 s behind the service's. */
export const clockBehind = heldWriteCase({ name: "clock-behind", seconds: 2 });
