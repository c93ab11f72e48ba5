// Settings that start but are likely wrong where they run: said once at start,
// never refused, since each can be right (an API only servers call needs no CORS).
import type { Config } from "../config.js";

const loopback = (host: string) => host === "localhost" || host === "::1" || /^127\./.test(host);

/** Sentences for the start-up log, one per setting that needs a look; none when all is well. */
export function configWarnings(config: Config): string[] {
  const warnings: string[] = [];
  if (config.production && config.corsOrigins !== "*" && config.corsOrigins.length === 0) {
    warnings.push(
      "CORS_ORIGINS is empty: pages at other origins can neither call the API nor open its WebSocket. Set it to your web apps' origins, unless only servers and apps call.",
    );
  }
  const { rateLimits } = config;
  const perAddress = rateLimits.enabled && (rateLimits.ipMutations > 0 || rateLimits.ipSignIns > 0 || rateLimits.ipQueryCost > 0);
  // TRUST_PROXY=0 trusts no hop: as off.
  if (perAddress && !config.trustProxy && !loopback(config.host)) {
    warnings.push(
      "TRUST_PROXY is off while per-address rate budgets are on: behind a proxy or load balancer every client spends the proxy's address's budget (RATE_LIMIT_IP_*). Set TRUST_PROXY to the proxies' hop count or addresses.",
    );
  }
  return warnings;
}
