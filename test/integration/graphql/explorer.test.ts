// The explorer in a real browser: Debian's Chromium, driven by playwright-core, loads
// GraphiQL from the API alone (requests to any other host are blocked, and none may be
// tried), runs a query over HTTP with the header editor's token, and shows a subscription's
// messages over WebSocket, moving when a like is made through the API meanwhile.
import { existsSync } from "node:fs";
import { chromium, type Browser, type Locator, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../../src/stores/postgres/database.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { createUsers, dataOf, openDatabase, testConfig, type TestUser } from "../../support/env.js";

const chromiumPath = "/usr/bin/chromium";
// Without the background-networking flags Chromium calls Google's hosts at start.
const chromiumFlags = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
const browserWaitMs = 20_000;

interface BrowserRecord {
  /** Every request the page or its workers tried to a host other than the API's (each was aborted). */
  readonly offOrigin: string[];
  /** The WebSockets the page opened. */
  readonly sockets: string[];
  /** Script errors and console errors (a refused Content-Security-Policy shows there). */
  readonly errors: string[];
}

/** A page in a fresh context whose every request to another host than 127.0.0.1 is aborted and recorded. */
async function openPage(browser: Browser): Promise<{ page: Page; record: BrowserRecord }> {
  const record: BrowserRecord = { offOrigin: [], sockets: [], errors: [] };
  const context = await browser.newContext();
  await context.route("**/*", (route) => {
    const url = new URL(route.request().url());
    if (url.hostname === "127.0.0.1") return route.continue();
    record.offOrigin.push(url.href);
    return route.abort("blockedbyclient");
  });
  const page = await context.newPage();
  page.on("websocket", (socket) => record.sockets.push(socket.url()));
  page.on("pageerror", (error) => record.errors.push(error.message));
  page.on("console", (message) => {
    if (message.type() === "error") record.errors.push(message.text());
  });
  return { page, record };
}

/** The text a Monaco editor shows (it draws spaces as no-break spaces, and only the lines in view). */
const shownText = async (editor: Locator) => (await editor.locator(".view-lines").innerText()).replace(/\s+/g, " ");

/** Replaces the text of a Monaco editor as a paste would: typing would meet its auto-closed brackets. */
async function setEditor(page: Page, editor: Locator, text: string): Promise<void> {
  await editor.click();
  await page.keyboard.press("ControlOrMeta+A");
  // Emptied first: Monaco would wrap a selection in a bracket or quote inserted over it.
  await page.keyboard.press("Delete");
  await page.keyboard.insertText(text);
  await expect.poll(async () => (await shownText(editor)).replace(/\s/g, ""), { timeout: browserWaitMs }).toBe(text.replace(/\s/g, ""));
}

let api: TestApi;
let db: Database;
let browser: Browser;
let viewer: TestUser;

beforeAll(async () => {
  if (!existsSync(chromiumPath)) throw new Error(`${chromiumPath} is missing: run bash scripts/services.sh, which installs Debian's chromium.`);
  api = await startTestApi();
  db = openDatabase(api.config);
  [viewer] = (await createUsers(db, api.config, 1)) as [TestUser];
  browser = await chromium.launch({ executablePath: chromiumPath, args: chromiumFlags });
});
afterAll(async () => {
  await browser?.close();
  await api?.close();
  await db?.$disconnect();
});

describe("the explorer at GET /graphql", () => {
  it("when a browser opens /graphql, then GraphiQL runs a query with the header editor's token over HTTP, a subscription over WebSocket shows a like made meanwhile, and a refused token is said, with nothing asked of any other host", async () => {
    const post = (await api.services.content.createPost(viewer.id, "explored", "b")).id.toString();
    const { page, record } = await openPage(browser);
    const endpoint = `${api.url}graphql`;
    await page.goto(`${endpoint}?query=${encodeURIComponent("{ viewer { username } }")}`);
    await page.getByRole("button", { name: "Headers" }).click();
    const headers = page.getByRole("region", { name: "Headers" }).getByRole("code");
    await setEditor(page, headers, JSON.stringify({ Authorization: `Bearer ${viewer.token}` }));
    const run = page.locator(".graphiql-execute-button");
    const response = page.locator(".graphiql-response .monaco-editor");
    await run.click();
    await expect.poll(() => shownText(response), { timeout: browserWaitMs }).toContain(`"username": "${viewer.username}"`);

    await setEditor(
      page,
      page.locator(".graphiql-query-editor .monaco-editor"),
      `subscription { postCounts(postIds: ["${post}"]) { id counts { likes } viewerHasLiked } }`,
    );
    await run.click();
    await expect.poll(() => shownText(response), { timeout: browserWaitMs }).toMatch(/"likes": 0 \} ?, "viewerHasLiked": false/);
    dataOf(await api.gql(`mutation($id: ID!) { likePost(postId: $id) { changed } }`, { id: post }, viewer.token));
    // viewerHasLiked turns true only for the token's user: the header reached connectionParams.
    await expect.poll(() => shownText(response), { timeout: browserWaitMs }).toMatch(/"likes": 1 \} ?, "viewerHasLiked": true/);
    await run.click();
    await expect.poll(() => api.services.live?.stats().posts, { timeout: browserWaitMs }).toBe(0);

    // A token the service refuses closes the subscription's connection, and the explorer says why.
    await setEditor(page, headers, JSON.stringify({ Authorization: "Bearer not-a-token" }));
    await run.click();
    await expect.poll(() => shownText(response), { timeout: browserWaitMs }).toContain("The WebSocket closed with 4401: UNAUTHENTICATED");

    const socket = endpoint.replace(/^http/, "ws");
    expect(record).toEqual({ offOrigin: [], sockets: [socket, socket], errors: [] });
    await page.context().close();
  });

  it("when the explorer is on, then a browser's GET answers the page with its assets cached for good, while GraphQL GETs still answer JSON", async () => {
    const endpoint = `${api.url}graphql`;
    const page = await fetch(endpoint, { headers: { accept: "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8" } });
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(page.headers.get("content-security-policy")).toContain("connect-src 'self'");
    const html = await page.text();
    const script = /src="(graphql\/explorer\/[^"]+\/graphiql\.js)"/.exec(html)?.[1];
    expect(script).toBeDefined();
    const asset = await fetch(new URL(script ?? "", api.url), { headers: { "accept-encoding": "gzip" } });
    expect(asset.status).toBe(200);
    expect(asset.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect(asset.headers.get("content-encoding")).toBe("gzip");
    expect((await asset.text()).length).toBeGreaterThan(1_000_000);

    for (const accept of ["application/json", "application/graphql-response+json", "*/*"]) {
      const query = await fetch(`${endpoint}?query=${encodeURIComponent("{ __typename }")}`, { headers: { accept } });
      expect({ accept, status: query.status, body: await query.json() }).toEqual({ accept, status: 200, body: { data: { __typename: "Query" } } });
    }
  });
});

describe("the explorer turned off", () => {
  it("when NODE_ENV=production and EXPLORER is unset, then the explorer is off, and a browser's GET answers 404 naming EXPLORER while GraphQL GETs still answer", async () => {
    expect(testConfig({ NODE_ENV: "production" }).explorer).toBe(false);
    expect(testConfig({ NODE_ENV: "production", EXPLORER: "on" }).explorer).toBe(true);
    expect(testConfig({ NODE_ENV: "development" }).explorer).toBe(true);
    // Production's default, on an API the test's Redis can serve (production refuses a Redis that keeps nothing).
    const off = await startTestApi({ EXPLORER: "off" });
    try {
      const endpoint = `${off.url}graphql`;
      const page = await fetch(endpoint, { headers: { accept: "text/html,application/xhtml+xml,*/*;q=0.8" } });
      expect(page.status).toBe(404);
      const body = (await page.json()) as { errors: { message: string; extensions: { code: string } }[] };
      expect(body.errors[0]?.extensions.code).toBe("ROUTE_NOT_FOUND");
      expect(body.errors[0]?.message).toContain("EXPLORER=on");
      expect((await fetch(`${endpoint}/explorer/any/graphiql.js`)).status).toBe(404);
      const query = await fetch(`${endpoint}?query=${encodeURIComponent("{ __typename }")}`, { headers: { accept: "application/json" } });
      expect(await query.json()).toEqual({ data: { __typename: "Query" } });
    } finally {
      await off.close();
    }
  });
});
