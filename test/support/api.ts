// A running API on an ephemeral port, wired to the test database and private Redis.
import { compose } from "../../src/compose.js";
import type { Config } from "../../src/config.js";
import { serveGraphQL } from "../../src/graphql/server.js";
import { openClients } from "../../src/stores/clients.js";
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
  const clients = await openClients(config, silentLogger, { onSqlQuery: () => queries++ });
  const app = compose(config, clients, silentLogger);
  const api = await serveGraphQL(app.services, { logger: silentLogger, isUnavailable: app.isUnavailable, readiness: app.readiness, limits: config.limits, introspection: true, host: config.host, port: config.port, trustProxy: config.trustProxy });
  return {
    config,
    url: api.url,
    gql: graphqlClient(api.url),
    sqlQueries: () => queries,
    async close() {
      await api.close();
      await clients.close();
    },
  };
}
