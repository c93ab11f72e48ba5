// Every ```ts snippet of docs/clients.md as a reader copies it: type-checked by strict
// TypeScript as an ES module, then run against a real service, with the endpoint and token
// the guide's convention lets a test set, and checked for what its section says it does.
import type { ApolloClient, TypedDocumentNode } from "@apollo/client";
import { gql, type Client as UrqlClient, type TypedDocumentNode as UrqlDocument } from "@urql/core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Database } from "../../../src/stores/postgres/database.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import {
  createSnippetDirectory,
  docSnippets,
  importLiveCountsSnippet,
  liveCountsHeading,
  typeErrorsOf,
  withSettings,
  type SnippetDirectory,
  type SnippetSettings,
} from "../../support/doc-snippets.js";
import { createUsers, dataOf, openDatabase, type TestUser } from "../../support/env.js";
import { startTcpProxy } from "../../support/tcp-proxy.js";

const guide = "docs/clients.md";
const snippets = docSnippets(guide);
/** The headings of the snippets this file runs, in the guide's order: a new snippet needs a check here. */
const checked = ["Apollo Client 4", "urql", "graphql-request", liveCountsHeading, "Apollo Client: persisted queries", "urql: persisted queries"];

const likePost = `mutation($id: ID!) { likePost(postId: $id) { changed } }`;

interface Counts {
  likes: number;
  reads: number;
  comments: number;
  collects: number;
}
interface FeedData {
  feed: { edges: { node: { id: string; counts: Counts; viewerHasLiked: boolean } }[] };
}

let api: TestApi;
let db: Database;
let author: TestUser;
let viewer: TestUser;
let other: TestUser;
let directory: SnippetDirectory;
let endpoint: string;

beforeAll(async () => {
  api = await startTestApi();
  db = openDatabase(api.config);
  [author, viewer, other] = (await createUsers(db, api.config, 3)) as [TestUser, TestUser, TestUser];
  directory = createSnippetDirectory();
  endpoint = new URL("graphql", api.url).toString();
});
afterAll(async () => {
  directory.remove();
  await api.close();
  await db.$disconnect();
});

async function newPost(): Promise<string> {
  return (await api.services.content.createPost(author.id, "snippet", "b")).id.toString();
}

/** The snippet under `heading`, with these settings, imported; `T` names the exports the check uses. */
async function run<T>(heading: string, settings: SnippetSettings): Promise<T> {
  const snippet = snippets.find((s) => s.heading === heading);
  if (!snippet) throw new Error(`${guide} has no \`\`\`ts block under the heading "${heading}".`);
  return (await directory.load(directory.write(snippet.name, withSettings(snippet, settings)))) as T;
}

/** Values as they arrive, and waits for the moment they satisfy a condition. */
function arrivals<T>() {
  const values: T[] = [];
  const listeners = new Set<() => void>();
  return {
    values,
    push(value: T) {
      values.push(value);
      for (const listener of [...listeners]) listener();
    },
    until(done: (seen: readonly T[]) => boolean, what: string, timeoutMs = 10_000): Promise<void> {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          listeners.delete(check);
          reject(new Error(`${what}: not within ${timeoutMs / 1000} s, after ${JSON.stringify(values)}`));
        }, timeoutMs);
        const check = () => {
          if (!done(values)) return;
          listeners.delete(check);
          clearTimeout(timer);
          resolve();
        };
        listeners.add(check);
        check();
      });
    },
  };
}

describe("the snippets of docs/clients.md", () => {
  it("when every ts snippet is compiled by strict TypeScript as an ES module against the repository's packages, then none has a type error", () => {
    const written = snippets.map((snippet) => ({ snippet, file: directory.write(snippet.name, snippet.code) }));
    expect(typeErrorsOf(written)).toEqual([]);
  });

  it("when the guide's ts snippets are listed, then each is one this file runs, under its heading", () => {
    expect(snippets.map((s) => s.heading)).toEqual(checked);
  });

  it("when the Apollo Client snippet reads the feed and likes a post with a payload of its likes alone, then the feed shows the post, and the cached feed still reads whole, the like counted", async () => {
    const post = await newPost();
    dataOf(await api.gql(likePost, { id: post }, other.token));
    const { client, FEED, LIKE_POST } = await run<{
      client: ApolloClient;
      FEED: TypedDocumentNode<FeedData>;
      LIKE_POST: TypedDocumentNode<unknown, { id: string }>;
    }>("Apollo Client 4", { endpoint, token: viewer.token });
    const postIn = (data: FeedData | null | undefined) => data?.feed.edges.find(({ node }) => node.id === post)?.node;

    const { data } = await client.query({ query: FEED });
    expect(postIn(data)).toMatchObject({ counts: { likes: 1, reads: 0, comments: 0, collects: 0 }, viewerHasLiked: false });
    await client.mutate({ mutation: LIKE_POST, variables: { id: post } });

    // Without the type policies the payload's `counts { likes }` replaces the cached counts, and the feed no longer reads from the cache.
    expect(postIn(client.readQuery({ query: FEED }))).toMatchObject({ counts: { likes: 2, reads: 0, comments: 0, collects: 0 }, viewerHasLiked: true });
  });

  it("when the urql snippet asks for a post's counts and sends a mutation, then the query goes as GET with the token and answers the viewer's like, and the mutation goes as a JSON POST", async () => {
    const post = await newPost();
    dataOf(await api.gql(likePost, { id: post }, viewer.token));
    const { client, POST_COUNTS } = await run<{
      client: UrqlClient;
      POST_COUNTS: UrqlDocument<{ posts: ({ id: string; counts: Counts; viewerHasLiked: boolean } | null)[] }, { ids: string[] }>;
    }>("urql", { endpoint, token: viewer.token });
    const sent = vi.spyOn(globalThis, "fetch");
    try {
      const counts = await client.query(POST_COUNTS, { ids: [post] }).toPromise();
      const unlike = await client
        .mutation(
          gql`
            mutation ($id: ID!) {
              unlikePost(postId: $id) {
                changed
              }
            }
          `,
          { id: post },
        )
        .toPromise();

      expect(counts.error).toBeUndefined();
      expect(counts.data?.posts).toMatchObject([{ id: post, counts: { likes: 1, reads: 0, comments: 0, collects: 0 }, viewerHasLiked: true }]);
      expect(unlike.error).toBeUndefined();
      expect(unlike.data).toMatchObject({ unlikePost: { changed: true } });
      expect(
        sent.mock.calls.map(([input, init]) => ({
          method: init?.method,
          query: new URL(input instanceof Request ? input.url : input).searchParams.has("query"),
          authorization: new Headers(init?.headers).get("authorization"),
          contentType: init?.method === "POST" ? new Headers(init.headers).get("content-type") : null,
        })),
      ).toEqual([
        { method: "GET", query: true, authorization: `Bearer ${viewer.token}`, contentType: null },
        { method: "POST", query: false, authorization: `Bearer ${viewer.token}`, contentType: "application/json" },
      ]);
    } finally {
      sent.mockRestore();
    }
  });

  it("when the graphql-request snippet likes a post, then it answers the like count; when the service refuses the like (an unknown post), then it logs the status and the code and answers undefined", async () => {
    const post = await newPost();
    const { like } = await run<{ like: (postId: string) => Promise<number | undefined> }>("graphql-request", { endpoint, token: viewer.token });
    const warned = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      expect(await like(post)).toBe(1);
      expect(await like("9000000000000000000")).toBeUndefined();
      expect(warned.mock.calls).toEqual([[200, "NOT_FOUND"]]);
    } finally {
      warned.mockRestore();
    }
  });

  it("when the graphql-ws snippet watches a post, then it gets the post's counts, then a like's change", async () => {
    const post = await newPost();
    const { client, watchCounts } = await importLiveCountsSnippet(directory, { endpoint: endpoint.replace(/^http/, "ws"), token: viewer.token });
    const likes = arrivals<number>();
    const ended: unknown[] = [];
    const stop = watchCounts(
      [post],
      (counted) => likes.push(counted.counts.likes),
      (error) => ended.push(error),
    );
    try {
      await likes.until((seen) => seen.length > 0, "the post's counts");
      dataOf(await api.gql(likePost, { id: post }, other.token));
      await likes.until((seen) => seen.at(-1) === 1, "the like's change");
      expect({ first: likes.values[0], ended }).toEqual({ first: 0, ended: [] });
    } finally {
      stop();
      await client.dispose();
    }
  });

  it("when connections are refused, then the graphql-ws snippet gives up after 10 retries in a row that never connect, each after a longer backoff, and a connection in between starts the count again", async () => {
    const post = await newPost();
    const proxy = await startTcpProxy({ host: "127.0.0.1", port: Number(new URL(api.url).port) }, "ws");
    const { client, watchCounts, file } = await importLiveCountsSnippet(directory, { endpoint: `${proxy.url}/graphql`, token: viewer.token });
    // The snippet's retry waits (up to 30 s each) are held until the test lets each pass: twenty
    // attempts take milliseconds, and each starts once the test has arranged its refusal or success.
    const waits = arrivals<{ delayMs: number; pass: () => void }>();
    const realSetTimeout = globalThis.setTimeout;
    const timers = vi.spyOn(globalThis, "setTimeout").mockImplementation(((handler: (...args: unknown[]) => void, delayMs?: number, ...args: unknown[]) => {
      if (!new Error().stack?.includes(file)) return realSetTimeout(handler, delayMs, ...args);
      waits.push({ delayMs: delayMs ?? 0, pass: () => handler(...args) });
      return realSetTimeout(() => {}, 0);
    }) as typeof setTimeout);
    /** Lets the next `count` retry waits pass, each once the snippet asks for it; answers how long each was to be. */
    const passWaits = async (count: number): Promise<number[]> => {
      const first = waits.values.length;
      for (let i = first; i < first + count; i++) {
        await waits.until((seen) => seen.length > i, `retry wait ${i + 1}`);
        waits.values[i]?.pass();
      }
      return waits.values.slice(first, first + count).map((wait) => wait.delayMs);
    };
    /** The waits not between half and all of the backoff's ceiling for their retry (0.5 s doubling, at most 30 s); none, as the guide says. */
    const offBackoff = (delaysMs: readonly number[]) =>
      delaysMs.flatMap((delayMs, retry) => {
        const ceilingMs = Math.min(30_000, 500 * 2 ** retry);
        return delayMs >= ceilingMs / 2 && delayMs <= ceilingMs ? [] : [`retry ${retry + 1}: ${delayMs} ms, not within ${ceilingMs / 2}–${ceilingMs} ms`];
      });
    const closeCodes = arrivals<number>();
    client.on("closed", (event) => closeCodes.push((event as { code: number }).code));
    const counts = arrivals<number>();
    const ended = arrivals<unknown>();
    const stop = watchCounts(
      [post],
      (counted) => counts.push(counted.counts.likes),
      (error) => ended.push(error),
    );
    try {
      await counts.until((seen) => seen.length > 0, "the first counts");

      proxy.refuse();
      const firstOutage = await passWaits(9);
      await waits.until((seen) => seen.length === 10, "the 10th retry wait");
      const countsBefore = counts.values.length;
      proxy.resume();
      waits.values[9]?.pass();
      await counts.until((seen) => seen.length > countsBefore, "the counts again, after the 10th attempt connected");

      const acceptedBefore = proxy.accepted;
      proxy.refuse();
      const secondOutage = await passWaits(10);
      await ended.until((seen) => seen.length === 1, "the subscription's end");

      expect({
        offBackoff: [...offBackoff([...firstOutage, waits.values[9]?.delayMs ?? 0]), ...offBackoff(secondOutage)],
        waits: waits.values.length,
        attemptsRefusedInARow: proxy.accepted - acceptedBefore,
        closeCodes: [...new Set(closeCodes.values)],
        endedByGraphQLErrors: Array.isArray(ended.values[0]),
      }).toEqual({ offBackoff: [], waits: 20, attemptsRefusedInARow: 10, closeCodes: [1006], endedByGraphQLErrors: false });
    } finally {
      stop();
      // A wait still held keeps the client connecting, and dispose waiting for that, forever. Let go, the
      // connect ends for want of subscriptions, rejecting the dispose that waited for it.
      for (const wait of waits.values) wait.pass();
      timers.mockRestore();
      await Promise.resolve(client.dispose()).catch(() => {});
      await proxy.close();
    }
  });
});

interface HotPosts {
  hotPosts: { id: string; counts: { likes: number } }[];
}

/** What each request a client sent carried: its method, and whether it held the query's text or a hash. */
function requestsOf(sent: { mock: { calls: Parameters<typeof fetch>[] } }) {
  return sent.mock.calls.map(([input, init]) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const body = typeof init?.body === "string" ? (JSON.parse(init.body) as { query?: string; extensions?: unknown }) : {};
    return {
      method: init?.method ?? "GET",
      text: url.searchParams.has("query") || typeof body.query === "string",
      hash: (url.searchParams.get("extensions") ?? JSON.stringify(body.extensions ?? null)).includes("sha256Hash"),
    };
  });
}

describe("the persisted-query snippets of docs/clients.md", () => {
  it("when one Apollo client registered a query, then another client's first request of it is the hash alone, by GET, and answers", async () => {
    type Snippet = { client: ApolloClient; HOT_POSTS: TypedDocumentNode<HotPosts> };
    const first = await run<Snippet>("Apollo Client: persisted queries", { endpoint, token: viewer.token });
    expect((await first.client.query({ query: first.HOT_POSTS })).data?.hotPosts).toBeInstanceOf(Array);
    // Another app instance: a client of its own, as on another device or after a restart.
    const second = await run<Snippet>("Apollo Client: persisted queries", { endpoint, token: viewer.token });
    const sent = vi.spyOn(globalThis, "fetch");
    try {
      const { data } = await second.client.query({ query: second.HOT_POSTS, fetchPolicy: "network-only" });
      expect(data?.hotPosts).toBeInstanceOf(Array);
      expect(requestsOf(sent)).toEqual([{ method: "GET", text: false, hash: true }]);
    } finally {
      sent.mockRestore();
    }
  });

  it("when one urql client registered a query, then another client's first request of it is the hash alone, by GET, and answers", async () => {
    type Snippet = { client: UrqlClient; HOT_POSTS: UrqlDocument<HotPosts> };
    const first = await run<Snippet>("urql: persisted queries", { endpoint, token: viewer.token });
    expect((await first.client.query(first.HOT_POSTS, {}).toPromise()).data?.hotPosts).toBeInstanceOf(Array);
    const second = await run<Snippet>("urql: persisted queries", { endpoint, token: viewer.token });
    const sent = vi.spyOn(globalThis, "fetch");
    try {
      const answer = await second.client.query(second.HOT_POSTS, {}, { requestPolicy: "network-only" }).toPromise();
      expect(answer.error).toBeUndefined();
      expect(answer.data?.hotPosts).toBeInstanceOf(Array);
      expect(requestsOf(sent)).toEqual([{ method: "GET", text: false, hash: true }]);
    } finally {
      sent.mockRestore();
    }
  });
});
