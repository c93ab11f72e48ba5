// live-hot: subscribers of one hot post over graphql-ws while it takes likes at
// a steady rate. Measures the lag from each like's acknowledgement to the first
// message each subscriber got that includes it, the messages each subscriber
// got a second, and the CPU of the API processes.
import autocannon from "autocannon";
import { createClient, type Client } from "graphql-ws";
import WebSocket from "ws";
import type { RunningService } from "./harness.js";
import type { ScenarioContext } from "./scenarios.js";

export interface LiveFigures {
  readonly mode: string;
  readonly subscribers: number;
  readonly likesPerSecond: number;
  readonly likes: number;
  readonly failures: number;
  /** The likes' own latency while subscribers are served. */
  readonly likeP50Ms: number;
  readonly likeP99Ms: number;
  readonly lagP50Ms: number;
  readonly lagP99Ms: number;
  readonly lagMaxMs: number;
  readonly messagesPerSubscriberSecond: number;
  /** The shortest time between two messages to one subscriber. */
  readonly minGapMs: number;
  /** Likes no subscriber message ever included (each subscriber's last message should hold them all). */
  readonly missedBySubscribers: number;
  /** CPU of the API processes during the run, in cores (1 = one core busy). */
  readonly apiCores: number;
  readonly loadCores: number;
}

const likeQuery = "mutation($id: ID!) { likePost(postId: $id) { changed post { counts { likes } } } }";
const subscription = "subscription($ids: [ID!]!) { postCounts(postIds: $ids) { id counts { likes reads comments collects } } }";

interface Message {
  readonly at: number;
  readonly likes: number;
}

/** Milliseconds at quantile `q` of `samples` counted per whole millisecond. */
function quantile(histogram: Uint32Array, total: number, q: number): number {
  let seen = 0;
  for (let ms = 0; ms < histogram.length; ms++) {
    seen += histogram[ms] as number;
    if (seen >= q * total) return ms;
  }
  return histogram.length;
}

async function subscribe(service: RunningService, postId: bigint, count: number): Promise<{ clients: Client[]; messages: Message[][] }> {
  const url = service.url.replace(/^http/, "ws");
  const clients: Client[] = [];
  const messages: Message[][] = [];
  const connected: Promise<void>[] = [];
  for (let i = 0; i < count; i++) {
    const received: Message[] = [];
    messages.push(received);
    let onConnected: () => void = () => {};
    let onClosed: (event: unknown) => void = () => {};
    connected.push(
      new Promise((resolve, reject) => {
        onConnected = resolve;
        onClosed = (event) => reject(new Error(`subscriber ${i} could not connect: ${(event as { code?: number }).code ?? String(event)}`));
      }),
    );
    const client = createClient({ url, webSocketImpl: WebSocket, lazy: false, retryAttempts: 0, on: { connected: () => onConnected(), closed: (event) => onClosed(event) }, onNonLazyError: () => {} });
    client.subscribe<{ postCounts: { counts: { likes: number } } }>(
      { query: subscription, variables: { ids: [String(postId)] } },
      {
        next: (result) => {
          if (result.data) received.push({ at: performance.now(), likes: result.data.postCounts.counts.likes });
        },
        error: () => {},
        complete: () => {},
      },
    );
    clients.push(client);
    // Connections open a few at a time, as clients arrive, not as one burst of upgrades.
    if (i % 50 === 49) await Promise.all(connected.slice(-50));
  }
  await Promise.all(connected);
  return { clients, messages };
}

export async function liveHot(ctx: ScenarioContext, options: { subscribers: number; likesPerSecond: number; seconds: number }): Promise<LiveFigures> {
  const post = ctx.data.postIds[0] as bigint;
  const { clients, messages } = await subscribe(ctx.service, post, options.subscribers);
  try {
    // One like first: once every subscriber got its message, every subscription is in place.
    const probe = ctx.fresh.hotLiker();
    await fetch(ctx.service.url, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${ctx.token(probe)}` },
      body: JSON.stringify({ query: likeQuery, variables: { id: String(post) } }),
    });
    const deadline = Date.now() + 30_000;
    while (messages.some((m) => m.length === 0) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    const ready = messages.filter((m) => m.length > 0).length;
    if (ready < options.subscribers) throw new Error(`only ${ready} of ${options.subscribers} subscribers got the first message within 30 s`);
    // Settle past the probe's message interval, then start afresh.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    for (const m of messages) m.length = 0;

    const likes = Math.min(options.likesPerSecond * options.seconds, ctx.fresh.hotLeft);
    /** When the like that took the count to each value was acknowledged. */
    const ackedAt = new Map<number, number>();
    let failures = 0;
    const cpuBefore = ctx.service.cpu();
    const ownBefore = process.cpuUsage();
    const startedAt = performance.now();
    const result = await new Promise<autocannon.Result>((resolve, reject) => {
      autocannon(
        {
          url: ctx.service.url,
          // Enough connections that a slow answer does not hold the offered rate back (each has one request in flight).
          connections: 256,
          amount: likes,
          overallRate: options.likesPerSecond,
          requests: [
            {
              method: "POST",
              setupRequest: (req) => {
                const user = ctx.fresh.hotLiker();
                return {
                  ...req,
                  body: JSON.stringify({ query: likeQuery, variables: { id: String(post) } }),
                  headers: { "content-type": "application/json", authorization: `Bearer ${ctx.token(user)}` },
                };
              },
              onResponse: (status, body) => {
                const count = status === 200 ? /"likes":(\d+)/.exec(body)?.[1] : undefined;
                if (count === undefined || body.includes('"errors"')) failures++;
                else ackedAt.set(Number(count), performance.now());
              },
            },
          ],
        },
        (error: Error | null, done) => (error ? reject(error) : resolve(done)),
      );
    });
    const endedAt = performance.now();
    const apiSeconds = ctx.service.cpu().api - cpuBefore.api;
    const own = process.cpuUsage(ownBefore);
    // The last changes' messages arrive up to an interval later.
    await new Promise((resolve) => setTimeout(resolve, 2_500));

    const histogram = new Uint32Array(60_000);
    let samples = 0;
    let maxLag = 0;
    let missed = 0;
    let minGap = Infinity;
    const counts = [...ackedAt.keys()];
    const first = Math.min(...counts);
    const last = Math.max(...counts);
    for (const received of messages) {
      let upTo = first - 1;
      received.forEach((message, i) => {
        if (i > 0) minGap = Math.min(minGap, message.at - (received[i - 1] as Message).at);
        for (let count = upTo + 1; count <= Math.min(message.likes, last); count++) {
          const acked = ackedAt.get(count);
          if (acked === undefined) continue;
          // A message can leave before the like's answer: Redis announces the change in the like's own script.
          const lag = Math.max(0, Math.round(message.at - acked));
          const bucket = Math.min(lag, histogram.length - 1);
          histogram[bucket] = (histogram[bucket] as number) + 1;
          samples++;
          maxLag = Math.max(maxLag, lag);
        }
        upTo = Math.max(upTo, message.likes);
      });
      if (upTo < last) missed += last - upTo;
    }
    const runSeconds = (endedAt - startedAt) / 1000;
    const inRun = messages.reduce((sum, received) => sum + received.filter((m) => m.at <= endedAt).length, 0);
    return {
      mode: ctx.mode,
      subscribers: options.subscribers,
      likesPerSecond: Math.round(ackedAt.size / runSeconds),
      likes: ackedAt.size,
      failures,
      likeP50Ms: result.latency.p50,
      likeP99Ms: result.latency.p99,
      lagP50Ms: quantile(histogram, samples, 0.5),
      lagP99Ms: quantile(histogram, samples, 0.99),
      lagMaxMs: maxLag,
      messagesPerSubscriberSecond: Number((inRun / options.subscribers / runSeconds).toFixed(2)),
      minGapMs: Math.round(minGap),
      missedBySubscribers: missed,
      apiCores: Number((apiSeconds / runSeconds).toFixed(2)),
      loadCores: Number(((own.user + own.system) / 1e6 / runSeconds).toFixed(2)),
    };
  } finally {
    await Promise.all(clients.map((client) => Promise.resolve(client.dispose())));
  }
}
