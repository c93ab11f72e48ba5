// GraphiQL for browsers at GET /graphql, served from the service's own dependencies, so
// that it works where the machine reaches no CDN and the page asks nothing of any other
// origin. It takes exactly the requests Apollo's landing page took (a GET whose Accept
// prefers HTML); every other GET and POST reaches Apollo as before.
//
// The page is @graphql-yoga/render-graphiql's GraphiQL (React, GraphiQL 5 and Monaco in one
// bundle with no imports), chosen over graphiql 3's UMD build: that is an old major on
// React 18 that adds about a hundred packages, where this bundle is released with every
// graphql-yoga and brings only its peer graphql-yoga (27 packages), which nothing here
// loads. Its stock page inlines some 9 MB into the HTML and sends subscriptions' headers
// as extensions, not as the connectionParams live/live-server.ts reads; so the page is ours, the
// bundle and its Monaco workers are cached assets, and the fetcher (startScript) is our
// own, on graphql-ws's browser build.
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { gzip } from "node:zlib";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
// Apollo Server's own negotiation library (already installed with it), so that the page is
// chosen by the very rule Apollo chose its landing page by.
import Negotiator from "negotiator";
import { RequestErrorCode } from "../errors.js";

export interface ExplorerOptions {
  /** Whether GraphiQL is served (EXPLORER); when off, browsers get a 404 that names the setting. */
  readonly enabled: boolean;
  /** Hears the code an answer carried (the 404 when off), for the request log and the metrics. */
  readonly sent?: (request: FastifyRequest, code: string) => void;
}

/** Where GraphQL is served: the page's own address, which its queries and subscriptions use. */
const graphqlPath = "/graphql";
/** Under GraphQL's path, so that a proxy forwarding /graphql alone serves the explorer whole. */
const assetsPath = `${graphqlPath}/explorer`;

/** What Apollo Server weighs an Accept header against (its prefersHTML): the page goes to those preferring HTML. */
const mediaTypes = [
  "application/json; charset=utf-8",
  "application/graphql-response+json; charset=utf-8",
  "multipart/mixed; deferSpec=20220824",
  "multipart/mixed; incrementalSpec=v0.2",
  "multipart/mixed",
  "text/html",
];
// Most GETs are GraphQL clients' (hashed persisted queries among them): a header naming no HTML is not negotiated.
const prefersHtml = (accept: string | undefined): boolean =>
  accept !== undefined && accept.includes("html") && new Negotiator({ headers: { accept } }).mediaType(mediaTypes) === "text/html";

const explorerOff = {
  errors: [
    {
      message:
        "No explorer is served here: EXPLORER is off (its default in production). Send GraphQL as a POST of application/json, " +
        "or a GET that accepts application/json; set EXPLORER=on to serve GraphiQL at this address (docs/explorer.md).",
      extensions: { code: RequestErrorCode.ROUTE_NOT_FOUND },
    },
  ],
};

const defaultQuery = `# Queries and mutations go as POST to this address, subscriptions over a WebSocket to it.
# To act as a user, put {"Authorization": "Bearer <token>"} in Headers below (npm run token -- <user id>):
# it is sent with each request, and as connectionParams.authorization of each subscription.
query Feed {
  viewer {
    username
  }
  feed(first: 5) {
    edges {
      node {
        id
        title
        counts {
          likes
          comments
        }
        viewerHasLiked
      }
    }
  }
}
`;

const logo = `<svg viewBox="0 0 24 24" width="28" height="28" aria-hidden="true"><path fill="#e5356f" d="M12 21 3.5 12.6A5.2 5.2 0 0 1 12 5.9a5.2 5.2 0 0 1 8.5 6.7Z"/></svg>`;

/**
 * The page's own script (browser JavaScript, run as written): points Monaco at the worker
 * assets, and renders GraphiQL with a fetcher that POSTs queries and mutations with the
 * header editor's headers, and runs subscriptions over graphql-ws with its Authorization
 * as connectionParams.authorization. connectionParams go once per connection, so there is
 * a client per Authorization value; each closes its socket while it has no subscription.
 */
const startScript = String.raw`"use strict";
(() => {
  const assets = new URL("./", document.currentScript.src);
  const endpoint = new URL(location.pathname, location.href);
  const workers = { editorWorkerService: "editor.worker.js", json: "json.worker.js", graphql: "graphql.worker.js" };
  self.MonacoEnvironment = { globalAPI: false, getWorkerUrl: (_moduleId, label) => new URL(workers[label], assets).href };

  const authorizationOf = (headers) => {
    const name = Object.keys(headers).find((key) => key.toLowerCase() === "authorization");
    return name === undefined ? undefined : String(headers[name]);
  };
  const clients = new Map();
  const clientFor = (authorization) => {
    if (!clients.has(authorization)) {
      const url = endpoint.href.replace(/^http/, "ws");
      clients.set(authorization, graphqlWs.createClient({ url, connectionParams: authorization === undefined ? {} : { authorization } }));
    }
    return clients.get(authorization);
  };
  // The operation's type, read from the text sent: GraphiQL's parsed documentAST lags the
  // editor by 100 ms, so a subscription run right after an edit would go over HTTP. Top-level
  // "{" opens a definition: the keyword and name before it say which; strings and comments
  // are blanked first, and parentheses (arguments, variables' defaults) skipped.
  const operationTypeOf = (query, operationName) => {
    const source = query.replace(/"""[\s\S]*?"""|"(?:[^"\\\n\r]|\\.)*"|#[^\n\r]*/g, " ");
    const definitions = [];
    let braces = 0;
    let parens = 0;
    let pending = null;
    for (const [token] of source.matchAll(/[{}()]|[_A-Za-z][_0-9A-Za-z]*/g)) {
      if (token === "(") parens++;
      else if (token === ")") parens--;
      else if (parens > 0) continue;
      else if (token === "}") braces--;
      else if (token === "{" && braces++ === 0) {
        definitions.push(pending || { type: "query" });
        pending = null;
      } else if (token !== "{" && braces === 0) {
        if (pending === null) pending = { type: token };
        else if (pending.name === undefined) pending.name = token;
      }
    }
    const operations = definitions.filter((definition) => definition.type !== "fragment");
    const operation = operationName ? operations.find((definition) => definition.name === operationName) : operations[0];
    return operation && operation.type;
  };
  // A socket the server closed (4401 for a token it refused) ends the subscription with the
  // CloseEvent itself, which GraphiQL would show as {}.
  const asError = (error) =>
    error && typeof error.code === "number" && "reason" in error ? new Error("The WebSocket closed with " + error.code + ": " + (error.reason || "no reason given")) : error;
  // Not an async generator: its return() would wait for the next message, so Stop would not
  // end a quiet subscription; graphql-ws's own iterator completes it at once.
  const subscribe = (client, request) => {
    const messages = client.iterate(request);
    return {
      [Symbol.asyncIterator]() {
        return this;
      },
      next: () => messages.next().catch((error) => Promise.reject(asError(error))),
      return: () => messages.return(),
    };
  };
  async function post(params, headers) {
    const response = await fetch(endpoint, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json", accept: "application/graphql-response+json, application/json" },
      body: JSON.stringify(params),
    });
    const text = await response.text();
    try {
      return JSON.parse(text);
    } catch {
      return { errors: [{ message: "HTTP " + response.status + ": " + text.slice(0, 500) }] };
    }
  }
  const fetcher = (params, options) => {
    const headers = (options && options.headers) || {};
    if (operationTypeOf(params.query, params.operationName) !== "subscription") return post(params, headers);
    const { query, variables, operationName } = params;
    return subscribe(clientFor(authorizationOf(headers)), { query, variables: variables || undefined, operationName: operationName || undefined });
  };
  YogaGraphiQL.renderYogaGraphiQL(document.getElementById("explorer"), {
    fetcher,
    title: "Like counter service",
    logo: ${JSON.stringify(logo)},
    defaultQuery: ${JSON.stringify(defaultQuery)},
    // A token kept in localStorage would outlive the tab; GraphiQL's own default.
    shouldPersistHeaders: false,
  });
})();
`;

interface Asset {
  readonly type: string;
  readonly body: Buffer;
  /** Compressed on its first request, once, off the event loop: gzip takes the bundle to about a quarter. */
  gzipped?: Promise<Buffer>;
}

const javascript = "text/javascript; charset=utf-8";

/** The bundle's files and ours by name: some 20 MB of memory. */
async function loadAssets(): Promise<Map<string, Asset>> {
  const bundle = await import("@graphql-yoga/render-graphiql/graphiql");
  // graphql-ws exports no path to its browser build, only its package.json.
  const graphqlWs = join(dirname(createRequire(import.meta.url).resolve("graphql-ws/package.json")), "umd", "graphql-ws.min.js");
  const text = (type: string, body: string): Asset => ({ type, body: Buffer.from(body) });
  return new Map<string, Asset>([
    ["graphiql.css", text("text/css; charset=utf-8", bundle.css)],
    ["graphiql.js", text(javascript, bundle.js)],
    ["editor.worker.js", text(javascript, bundle.editorWorkerService)],
    ["json.worker.js", text(javascript, bundle.jsonWorker)],
    ["graphql.worker.js", text(javascript, bundle.graphqlWorker)],
    ["graphql-ws.js", { type: javascript, body: await readFile(graphqlWs) }],
    ["start.js", text(javascript, startScript)],
    ["favicon.ico", { type: "image/x-icon", body: Buffer.from(bundle.favicon.replace(/^data:[^,]*;base64,/, ""), "base64") }],
  ]);
}

/** One name for this set of assets: their URLs change when any of them does, so browsers may keep them for good. */
function versionOf(assets: ReadonlyMap<string, Asset>): string {
  const hash = createHash("sha256");
  for (const [name, asset] of assets) hash.update(name).update(asset.body);
  return hash.digest("base64url").slice(0, 16);
}

/** The page: relative asset URLs (graphql/explorer/…), so that it works under a proxy's path prefix too. */
function renderPage(version: string): string {
  const asset = (name: string) => `${assetsPath.slice(1)}/${version}/${name}`;
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>GraphiQL · like counter service</title>
    <link rel="icon" href="${asset("favicon.ico")}" />
    <link rel="stylesheet" href="${asset("graphiql.css")}" />
  </head>
  <body style="margin: 0">
    <noscript>GraphiQL needs JavaScript.</noscript>
    <div id="explorer" style="height: 100vh"></div>
    <script src="${asset("graphql-ws.js")}"></script>
    <script src="${asset("graphiql.js")}"></script>
    <script src="${asset("start.js")}"></script>
  </body>
</html>
`;
}

/**
 * Nothing but this origin: scripts only from files (no inline script), queries and
 * WebSockets only to the page's own host ('self' covers ws: and wss: of it). Styles may be
 * inline because Monaco and React write them; images and fonts may be data: URLs, which is
 * how the bundle carries its icons.
 */
const contentSecurityPolicy = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "worker-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

interface Explorer {
  readonly assets: ReadonlyMap<string, Asset>;
  readonly version: string;
  readonly page: string;
}

/** The assets and the page, made on the first request for either: a process nobody explores holds none of their 20 MB. */
function lazyExplorer(): () => Promise<Explorer> {
  let made: Promise<Explorer> | null = null;
  const make = async (): Promise<Explorer> => {
    const assets = await loadAssets();
    const version = versionOf(assets);
    return { assets, version, page: renderPage(version) };
  };
  return () => {
    made ??= make();
    // A failed load (a missing package file) is tried again by the next request.
    made.catch(() => (made = null));
    return made;
  };
}

/**
 * Serves the assets under /graphql/explorer/<version>/, and returns what answers a browser
 * asking /graphql for the page. The page is rendered once: nothing in it depends on the request.
 */
function servePage(http: FastifyInstance): (reply: FastifyReply) => void {
  const explorer = lazyExplorer();
  http.get<{ Params: { version: string; name: string } }>(`${assetsPath}/:version/:name`, async (request, reply) => {
    const { assets, version } = await explorer();
    const asset = assets.get(request.params.name);
    // Assets of another version (a page from before a deploy) are not kept.
    if (request.params.version !== version || !asset) return reply.callNotFound();
    void reply.headers({
      "content-type": asset.type,
      "cache-control": "public, max-age=31536000, immutable",
      "x-content-type-options": "nosniff",
      vary: "Accept-Encoding",
    });
    if (new Negotiator({ headers: { "accept-encoding": request.headers["accept-encoding"] } }).encoding(["gzip", "identity"]) !== "gzip") return asset.body;
    asset.gzipped ??= promisify(gzip)(asset.body).catch((error: unknown) => {
      // Compressed again on the next request rather than failing every one after.
      asset.gzipped = undefined;
      throw error;
    });
    void reply.header("content-encoding", "gzip");
    return asset.gzipped;
  });
  return (reply) => {
    // The same URL answers JSON to other Accept headers: caches must keep the two apart.
    const vary = reply.getHeader("vary");
    explorer().then(
      ({ page }) =>
        void reply
          .headers({
            "content-type": "text/html; charset=utf-8",
            "cache-control": "no-cache",
            vary: vary === undefined ? "Accept" : `${String(vary)}, Accept`,
            "content-security-policy": contentSecurityPolicy,
            "x-content-type-options": "nosniff",
          })
          .send(page),
      (error: unknown) => void reply.send(error),
    );
  };
}

/** Serves GraphiQL to the browsers that ask GET /graphql for HTML, or, when it is off, a 404 naming EXPLORER. */
export function registerExplorer(http: FastifyInstance, options: ExplorerOptions): void {
  const off = (reply: FastifyReply) => {
    options.sent?.(reply.request, RequestErrorCode.ROUTE_NOT_FOUND);
    void reply.code(404).send(explorerOff);
  };
  const answer = options.enabled ? servePage(http) : off;
  // In callback style, as server.ts's hooks: this one runs on every request, GraphQL's POSTs included.
  http.addHook("onRequest", (request, reply, done) => {
    if (request.method !== "GET" || request.routeOptions.url !== graphqlPath || !prefersHtml(request.headers.accept)) return done();
    answer(reply);
  });
}
