// Which web pages may call the API: CORS_ORIGINS, applied alike to HTTP (CORS)
// and to WebSocket upgrades, which browsers send from any page without CORS.

/** Whether a page at `origin` (an Origin header) may call: "*" allows any; a list allows exactly its entries. */
export function originPolicy(origins: "*" | readonly string[]): (origin: string) => boolean {
  if (origins === "*") return () => true;
  const allowed = new Set(origins);
  return (origin) => allowed.has(origin);
}

/**
 * Whether a page's `origin` is the host it connects to (`host`, the Host header): a page
 * served by the API's own host, which browsers let call it without CORS, and whose
 * WebSocket must then be let in as well. An origin that does not parse is not.
 */
export function isSameHost(origin: string, host: string | undefined): boolean {
  if (host === undefined || !URL.canParse(origin)) return false;
  return new URL(origin).host === host.toLowerCase();
}
