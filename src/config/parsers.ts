// How the settings that are more than a number or a word are read: lists, proxies,
// origins and PostgreSQL's session options (src/config.ts declares each setting).
import { z } from "zod";

export const commaSeparated = (value: string) =>
  value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
/** host:port,… as a frozen list; empty by default. */
export const addresses = () =>
  z
    .string()
    .default("")
    .transform((v): readonly string[] => Object.freeze(commaSeparated(v)));

/** Fastify's `trustProxy`: whether and which proxies' X-Forwarded-For to believe. */
export type TrustProxy = boolean | number | string[];

export function parseTrustProxy(value: string): TrustProxy {
  const v = value.trim().toLowerCase();
  if (v === "" || v === "false" || v === "off") return false;
  if (v === "true" || v === "on") return true;
  if (/^\d+$/.test(v)) return Number(v);
  return commaSeparated(value);
}

/** CORS_ORIGINS as set: "*", or origins as browsers write them; undefined when unset, as that depends on NODE_ENV. */
export function parseCorsOrigins(value: string | undefined, ctx: z.RefinementCtx): "*" | readonly string[] | undefined {
  if (value === undefined) return undefined;
  const origins = commaSeparated(value);
  if (origins.includes("*")) return "*";
  // Browsers send the Origin header as scheme://host[:port], so only that form can ever match.
  const notOrigins = origins.filter((origin) => !/^https?:\/\/[^/\s]+$/.test(origin) || !URL.canParse(origin));
  for (const origin of notOrigins) {
    ctx.issues.push({ code: "custom", input: value, message: `"${origin}" is not an origin such as https://example.com (scheme and host, no path), nor "*".` });
  }
  // As browsers write the Origin header: a lower-case host, no default port.
  return notOrigins.length > 0 ? z.NEVER : Object.freeze(origins.map((origin) => new URL(origin).origin));
}

/** DATABASE_URL with PGOPTIONS as its `options` where it names none, as libpq would take them: the service adds its own to those. */
export function withPgOptions(url: string, pgOptions: string): string {
  const parsed = new URL(url);
  if (pgOptions === "" || parsed.searchParams.has("options")) return url;
  parsed.searchParams.set("options", pgOptions);
  return parsed.toString();
}
