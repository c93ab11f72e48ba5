// A running API like startTestApi's, with what limit and input tests need besides:
// the server options they vary (introspection, a cost hook) and a count of use-case
// calls, which shows whether any resolver got as far as the domain.
import { compose } from "../../src/compose.js";
import { preparePersistedQueries } from "../../src/compose/persisted-queries.js";
import type { Config } from "../../src/config.js";
import type { Services } from "../../src/domain/services.js";
import { serveGraphQL, type GraphQLServerOptions } from "../../src/graphql/server.js";
import { openClients } from "../../src/stores/clients.js";
import { graphqlClient, silentLogger, testConfig } from "./env.js";

export interface CustomApiOptions {
  readonly overrides?: Record<string, string>;
  readonly introspection?: boolean;
  readonly onCost?: GraphQLServerOptions["onCost"];
}

export interface CustomApi {
  readonly config: Config;
  /** The GraphQL endpoint. */
  readonly endpoint: string;
  readonly url: string;
  readonly gql: ReturnType<typeof graphqlClient>;
  sqlQueries(): number;
  /** Use-case methods called since start, by path ("content.feed", "users.authenticate", …). */
  serviceCalls(): readonly string[];
  close(): Promise<void>;
}

/** The same object graph, every function in it recording its path when called. */
function recording<T extends object>(target: T, calls: string[], prefix = ""): T {
  return new Proxy(target, {
    get(object, key) {
      const value: unknown = Reflect.get(object, key);
      const path = `${prefix}${String(key)}`;
      if (typeof value === "function") {
        return (...args: unknown[]) => {
          calls.push(path);
          return (value as (...a: unknown[]) => unknown).apply(object, args);
        };
      }
      return typeof value === "object" && value !== null ? recording(value, calls, `${path}.`) : value;
    },
  });
}

export async function startCustomApi(options: CustomApiOptions = {}): Promise<CustomApi> {
  const config = testConfig(options.overrides ?? {});
  let queries = 0;
  const calls: string[] = [];
  const clients = await openClients(config, silentLogger, { onSqlQuery: () => queries++ });
  const app = compose(config, clients, silentLogger);
  const services: Services = recording(app.services, calls);
  const api = await serveGraphQL(services, {
    logger: silentLogger,
    isUnavailable: app.isUnavailable,
    requestDeadlineMs: config.requestDeadlineMs,
    contentDeadlineMs: config.contentDeadlineMs,
    readiness: app.readiness,
    limits: config.limits,
    onCost: options.onCost,
    introspection: options.introspection ?? true,
    persistedQueries: preparePersistedQueries(config)(clients.redis, silentLogger),
    host: config.host,
    port: config.port,
  });
  return {
    config,
    url: api.url,
    endpoint: `${api.url}graphql`,
    gql: graphqlClient(api.url),
    sqlQueries: () => queries,
    serviceCalls: () => [...calls],
    async close() {
      await api.close();
      await clients.close();
    },
  };
}
