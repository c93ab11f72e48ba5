// A running API on an ephemeral port, wired to the test database and private Redis.
import { startApi } from "../../src/server.js";
import type { Config } from "../../src/config.js";
import { graphqlClient, silentLogger, testConfig } from "./env.js";

export interface TestApi {
  readonly config: Config;
  readonly url: string;
  readonly gql: ReturnType<typeof graphqlClient>;
  /** SQL statements the API has sent since it started. */
  sqlQueries(): number;
  close(): Promise<void>;
}

export async function startTestApi(overrides: Record<string, string> = {}): Promise<TestApi> {
  const config = testConfig(overrides);
  let queries = 0;
  const api = await startApi(config, silentLogger, { onSqlQuery: () => queries++ });
  return { config, url: api.url, gql: graphqlClient(api.url), sqlQueries: () => queries, close: () => api.close() };
}
