// redis-unreachable: Redis refuses every connection for 20 s while signed-in
// users read feeds, sign in and like. Degraded service, not an outage: feeds keep
// answering with counts and the viewer's state from PostgreSQL, sign-ins work,
// likes answer SERVICE_UNAVAILABLE with HTTP 503 and Retry-After within the
// request deadline, readiness says "degraded", and Redis serves again within
// seconds of its return. The suite's check then finds nothing lost or doubled.
import { at, type ChaosCase, type FaultContext } from "./case.js";
import { castPassword, type CastUser } from "./cast.js";
import { countsText, ms, percentile } from "./figures.js";
import { gqlAt } from "./gql-at.js";

const outageMs = 20_000;
const refuseAtMs = 3_000;
const readsPerSecond = 20;
const signInsPerSecond = 4;
const likesPerSecond = 10;

const feedQuery = "{ feed(first: 20) { edges { node { id counts { likes reads comments } viewerHasLiked } } } }";
const loginMutation = "mutation($u: String!, $p: String!) { login(username: $u, password: $p) { token } }";
const likeMutation = "mutation($id: ID!) { likePost(postId: $id) { changed } }";

interface Probe {
  readonly atMs: number;
  readonly ms: number;
  readonly status: number;
  readonly retryAfter: string | null;
  readonly errors: readonly string[];
  /** Answered with data and no error (a feed: every item with its counts). */
  readonly answered: boolean;
}

let probePosts: readonly string[] = [];

/** Sends `send` `perSecond` times a second until `untilMs` (ms into the load), each answer a probe. */
async function paced(ctx: FaultContext, perSecond: number, untilMs: number, send: (n: number) => Promise<Omit<Probe, "atMs" | "ms">>): Promise<Probe[]> {
  const probes: Probe[] = [];
  const inFlight: Promise<void>[] = [];
  const from = ctx.elapsedMs();
  for (let n = 0; ; n++) {
    const dueMs = from + (n * 1000) / perSecond;
    if (dueMs >= untilMs) break;
    if (dueMs > ctx.elapsedMs()) await new Promise((resolve) => setTimeout(resolve, dueMs - ctx.elapsedMs()));
    inFlight.push(send(n).then((answer) => void probes.push({ ...answer, atMs: dueMs, ms: ctx.elapsedMs() - dueMs })));
  }
  await Promise.all(inFlight);
  return probes;
}

const codes = (probes: readonly Probe[]) => {
  const counted = new Map<string, number>();
  for (const p of probes) for (const code of new Set(p.errors)) counted.set(code, (counted.get(code) ?? 0) + 1);
  return countsText(counted);
};
const share = (probes: readonly Probe[]) => (probes.length === 0 ? 0 : (100 * probes.filter((p) => p.answered).length) / probes.length);
const latencies = (probes: readonly Probe[]) =>
  `p50 / p99 ${ms(
    percentile(
      probes.map((p) => p.ms),
      50,
    ),
  )} / ${ms(
    percentile(
      probes.map((p) => p.ms),
      99,
    ),
  )}`;

export const redisUnreachable: ChaosCase = {
  name: "redis-unreachable",
  summary: `Redis refuses every connection (API and pipeline) for ${outageMs / 1000} s while signed-in users read feeds (${readsPerSecond}/s), sign in (${signInsPerSecond}/s) and like (the load, and ${likesPerSecond}/s more)`,
  layout: "npm start",
  redisAppendOnly: true,
  // Every request comes from 127.0.0.1: the per-address sign-in budget would refuse the sign-ins, not test the outage.
  env: { RATE_LIMIT_IP_SIGN_INS: "0", RATE_LIMIT_USERNAME_LOGINS: "0" },
  loadSeconds: 30,
  async prepare(ctx) {
    // The probe posts' author is the case's own: the check holds the load's authors' likes received to the load's posts.
    const name = `${ctx.tag}_probe`;
    const { register: author } = await ctx.api.must<{ register: { token: string } }>(
      `mutation($u: String!, $e: String!, $p: String!) { register(username: $u, email: $e, password: $p) { token } }`,
      { u: name, e: `${name}@chaos.example`, p: castPassword },
    );
    const posts: string[] = [];
    for (let i = 0; i < 4; i++) {
      posts.push(
        (await ctx.api.must<{ createPost: { id: string } }>(`mutation { createPost(title: "probe ${i}", body: "b") { id } }`, {}, author.token)).createPost.id,
      );
    }
    probePosts = posts;
    ctx.ownPosts(probePosts);
  },
  async inject(ctx) {
    const users = [...ctx.cast.likers, ...ctx.cast.authors];
    const endMs = refuseAtMs + outageMs + 6_000;
    let refusedAt = Number.POSITIVE_INFINITY;
    let resumedAt = Number.POSITIVE_INFINITY;
    const readiness: { status: number; body: string }[] = [];
    const outage = (async () => {
      await at(ctx, refuseAtMs);
      ctx.note("Redis refused (every connection reset, new ones too)");
      ctx.redisProxy.refuse();
      refusedAt = ctx.elapsedMs();
      for (let probe = 0; probe < 3; probe++) {
        await at(ctx, refuseAtMs + 5_000 + probe * 5_000);
        const response = await fetch(`${ctx.httpBase}/health/ready`);
        readiness.push({ status: response.status, body: await response.text() });
      }
      await at(ctx, refuseAtMs + outageMs);
      ctx.redisProxy.resume();
      resumedAt = ctx.elapsedMs();
      ctx.note("Redis reachable again");
    })();
    const ask = async (query: string, variables: Record<string, unknown>, token?: string) => {
      const answer = await gqlAt<Record<string, unknown>>(ctx.api.url, query, variables, token ? { token } : {});
      return { status: answer.status, retryAfter: answer.retryAfter, errors: answer.errors, answered: answer.errors.length === 0 && answer.data !== null };
    };
    const [reads, signIns, likes] = await Promise.all([
      paced(ctx, readsPerSecond, endMs, (n) => ask(feedQuery, {}, (users[n % users.length] as CastUser).token)),
      paced(ctx, signInsPerSecond, endMs, (n) => ask(loginMutation, { u: (users[n % users.length] as CastUser).username, p: castPassword })),
      paced(ctx, likesPerSecond, endMs, (n) => ask(likeMutation, { id: probePosts[n % probePosts.length] }, (users[n % users.length] as CastUser).token)),
      outage,
    ]);

    const inOutage = (probes: readonly Probe[]) => probes.filter((p) => p.atMs >= refusedAt && p.atMs < resumedAt);
    const outageReads = inOutage(reads);
    ctx.figure({
      name: "feed reads answered with counts while Redis refused",
      value: `${share(outageReads).toFixed(1)} % of ${outageReads.length}; ${latencies(outageReads)}; errors ${codes(outageReads)}`,
      target: { text: "100 %", met: outageReads.length > 0 && share(outageReads) === 100 },
    });
    const outageSignIns = inOutage(signIns);
    ctx.figure({
      name: "sign-ins while Redis refused",
      value: `${share(outageSignIns).toFixed(1)} % of ${outageSignIns.length}; ${latencies(outageSignIns)}; errors ${codes(outageSignIns)}`,
      target: { text: "100 %", met: outageSignIns.length > 0 && share(outageSignIns) === 100 },
    });
    const outageLikes = inOutage(likes);
    // Within the deadline, as a client measures it: the deadline runs from the request's arrival, its answer takes a little more.
    const refusedWell = outageLikes.filter((p) => p.errors.includes("SERVICE_UNAVAILABLE") && p.status === 503 && Number(p.retryAfter) >= 1 && p.ms <= 1_100);
    ctx.figure({
      name: "likes while Redis refused: SERVICE_UNAVAILABLE, HTTP 503 with Retry-After, within the 1 s deadline (+100 ms to the client)",
      value: `${refusedWell.length} of ${outageLikes.length}; ${latencies(outageLikes)}; answers ${codes(outageLikes)}`,
      target: { text: "all", met: outageLikes.length > 0 && refusedWell.length === outageLikes.length },
    });
    ctx.figure({
      name: "readiness while Redis refused",
      value: readiness.map((r) => `${r.status} ${/"status":"(\w+)"/.exec(r.body)?.[1] ?? "?"}`).join(", "),
      target: { text: "200 degraded", met: readiness.length > 0 && readiness.every((r) => r.status === 200 && r.body.includes('"degraded"')) },
    });
    const back = likes.filter((p) => p.atMs >= resumedAt && p.answered).map((p) => p.atMs + p.ms - resumedAt);
    const backMs = back.length > 0 ? Math.min(...back) : Number.NaN;
    ctx.figure({
      name: "likes served by Redis again after its return",
      value: Number.isNaN(backMs) ? "not within the case" : `${ms(backMs)} after`,
      target: { text: "≤ 5 s", met: !Number.isNaN(backMs) && backMs <= 5_000 },
    });
  },
};
