// A live-counts subscriber across a restart of the service, with graphql-ws set
// up as docs/clients.md tells clients to: it gets the current counts on
// subscribe, each change after, and the current counts again once the service is
// back, changes made while it was away included, without refetching anything.
import type { Client } from "graphql-ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../../scripts/lib/ports.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { createSnippetDirectory, importLiveCountsSnippet } from "../../support/doc-snippets.js";
import { createUsers, dataOf, graphqlClient, openDatabase, type TestUser } from "../../support/env.js";
import { eventually } from "../../support/pipeline.js";
import { startServiceProcess, type ServiceProcess } from "../../support/service-process.js";

const postCounts = `subscription($ids: [ID!]!) { postCounts(postIds: $ids) { id counts { likes } } }`;
const likePost = `mutation($id: ID!) { likePost(postId: $id) { changed } }`;

let other: TestApi;
let db: Database;
let users: TestUser[];

beforeAll(async () => {
  // Another API on the same stores: it takes the like made while the service is down.
  other = await startTestApi();
  db = openDatabase(other.config);
  users = await createUsers(db, other.config, 4);
});
afterAll(async () => {
  await other.close();
  await db.$disconnect();
});

/**
 * graphql-ws as docs/clients.md sets it up: the guide's own snippet, imported, so that what this
 * test proves is what the guide tells clients to write.
 */
async function reconnectingClient(url: string, onConnected: () => void): Promise<Client> {
  const directory = createSnippetDirectory();
  try {
    const { client } = await importLiveCountsSnippet(directory, { endpoint: `${url.replace(/^http/, "ws")}graphql` });
    client.on("connected", onConnected);
    return client;
  } finally {
    // Imported, the module no longer needs its file.
    directory.remove();
  }
}

describe("live counts across a restart", () => {
  it("when the service restarts under a subscriber, then it gets the current counts on subscribe, a change live, and the current counts again after the restart, the change made meanwhile included", async () => {
    const port = String(await freePort());
    const env = { PORT: port, WEB_CONCURRENCY: "1", PIPELINE: "off" };
    let service: ServiceProcess = await startServiceProcess(other.config, env);
    const [author, ...likers] = users as [TestUser, ...TestUser[]];
    const post = (await other.services.content.createPost(author.id, "restart", "b")).id.toString();
    dataOf(await other.gql(likePost, { id: post }, likers[0]?.token));

    let connections = 0;
    const likesSeen: number[] = [];
    const client = await reconnectingClient(service.url, () => connections++);
    const stop = client.subscribe<{ postCounts: { id: string; counts: { likes: number } } }>(
      { query: postCounts, variables: { ids: [post] } },
      { next: ({ data }) => data && likesSeen.push(data.postCounts.counts.likes), error: () => {}, complete: () => {} },
    );
    // A count may come twice (an announcement racing the first read); what matters is each value, in order.
    const distinct = () => likesSeen.filter((likes, i) => likes !== likesSeen[i - 1]).join();
    const seen = (likes: readonly number[]) =>
      eventually(
        async () => distinct() === likes.join(),
        15_000,
        () => `saw ${likesSeen.join()}`,
      );
    try {
      await seen([1]);
      dataOf(await graphqlClient(service.url)(likePost, { id: post }, likers[1]?.token));
      await seen([1, 2]);

      expect(await service.stop("SIGTERM")).toBe(0);
      dataOf(await other.gql(likePost, { id: post }, likers[2]?.token));
      service = await startServiceProcess(other.config, env);

      await seen([1, 2, 3]);
      expect(connections).toBe(2);
    } finally {
      stop();
      await client.dispose();
      await service.stop("SIGTERM");
    }
  });
});
