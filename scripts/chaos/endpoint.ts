// The API as the chaos load and checks call it: one GraphQL request over HTTP,
// or a call that must succeed, retried while the service is not ready.
import { setTimeout as sleep } from "node:timers/promises";

export interface GraphQLAnswer {
  data?: Record<string, unknown> | null;
  errors?: { message: string; extensions?: { code?: string } }[];
}

/** The API's endpoint, changeable while the load runs (a restarted API keeps its port, but a case may move it). */
export class Endpoint {
  constructor(public url: string) {}

  async call(query: string, variables: Record<string, unknown>, token?: string, timeoutMs = 10_000): Promise<GraphQLAnswer> {
    const response = await fetch(this.url, {
      method: "POST",
      headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify({ query, variables }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    return (await response.json()) as GraphQLAnswer;
  }

  /** The data of a call that must succeed (setup and final reads), retried while the service is not ready. */
  async must<T>(query: string, variables: Record<string, unknown>, token?: string): Promise<T> {
    let last = "";
    for (let attempt = 0; attempt < 20; attempt++) {
      try {
        const answer = await this.call(query, variables, token);
        if (answer.data && !answer.errors?.length) return answer.data as T;
        last = JSON.stringify(answer.errors);
      } catch (error) {
        last = (error as Error).message;
      }
      await sleep(500);
    }
    throw new Error(`the API kept failing ${query.trim().split("\n")[0]}: ${last}`);
  }
}
