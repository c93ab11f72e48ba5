// A GraphQL request on a connection of its own, closed after the answer. Under
// npm start the supervisor hands each new connection to the next API process in
// turn, so requests made this way reach every API process, where a kept-alive
// connection would keep asking the same one.
import http from "node:http";

/** Resolves with null when the request was answered with data and no error, else with what went wrong. */
export function freshRequest(url: string, query: string, variables: Record<string, unknown>, token?: string, timeoutMs = 2_000): Promise<string | null> {
  return new Promise((resolve) => {
    const body = JSON.stringify({ query, variables });
    const request = http.request(
      url,
      {
        method: "POST",
        agent: false,
        timeout: timeoutMs,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body), ...(token ? { authorization: `Bearer ${token}` } : {}) },
      },
      (response) => {
        let text = "";
        response.setEncoding("utf8");
        response.on("data", (chunk: string) => (text += chunk));
        response.on("end", () => {
          try {
            const answer = JSON.parse(text) as { data?: unknown; errors?: { extensions?: { code?: string } }[] };
            resolve(answer.errors?.length ? (answer.errors[0]?.extensions?.code ?? "error") : answer.data ? null : "no data");
          } catch {
            resolve(`HTTP ${response.statusCode ?? "?"}`);
          }
        });
      },
    );
    request.on("timeout", () => request.destroy(new Error("timeout")));
    request.on("error", (error) => resolve((error as { code?: string }).code ?? error.message));
    request.end(body);
  });
}
