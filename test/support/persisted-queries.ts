// Persisted queries as a client that opens a new connection for every request sends
// them (Apollo's protocol), for tests of one process and of npm start's several.
import { createHash } from "node:crypto";
import { request as httpRequest } from "node:http";
import { codesOf, type GraphQLResponse } from "./env.js";

export const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

/** One request on a connection of its own, closed after the answer: no keep-alive agent. */
export function postOnce(url: string, body: unknown): Promise<{ status: number; body: GraphQLResponse<unknown> }> {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      new URL("graphql", url),
      { method: "POST", agent: false, headers: { "content-type": "application/json", connection: "close", "content-length": Buffer.byteLength(payload) } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (text += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as GraphQLResponse<unknown> }));
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

/** Apollo's protocol: the hash alone, then the text with it when the hash is unknown. */
export async function persistedQuery(url: string, query: string): Promise<{ hit: boolean; response: GraphQLResponse<unknown> }> {
  const extensions = { persistedQuery: { version: 1, sha256Hash: sha256(query) } };
  const first = await postOnce(url, { extensions });
  if (!codesOf(first.body).includes("PERSISTED_QUERY_NOT_FOUND")) return { hit: true, response: first.body };
  return { hit: false, response: (await postOnce(url, { query, extensions })).body };
}
