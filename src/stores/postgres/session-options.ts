// Session settings (`-c name=value`) the service gives its PostgreSQL connections. pg takes
// a connection string's parameters over its config object: given as the config's `options`,
// they would be dropped when DATABASE_URL carries `?options=…` (where the configuration puts
// PGOPTIONS too, src/config.ts). They are added to those, in the URL.

/** `url` with `settings` (such as "jit=off") added to the session options it already gives. */
export function withSessionOptions(url: string, settings: readonly string[]): string {
  if (settings.length === 0) return url;
  const parsed = new URL(url);
  const given = parsed.searchParams.get("options") ?? "";
  const own = settings.map((setting) => `-c ${setting}`).join(" ");
  parsed.searchParams.set("options", given ? `${given} ${own}` : own);
  return parsed.toString();
}
