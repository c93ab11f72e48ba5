// Which web pages may call the API: CORS_ORIGINS, applied alike to HTTP (CORS)
// and to WebSocket upgrades, which browsers send from any page without CORS.

/** Whether a page at `origin` (an Origin header) may call: "*" allows any; a list allows exactly its entries. */
export function originPolicy(origins: "*" | readonly string[]): (origin: string) => boolean {
  if (origins === "*") return () => true;
  const allowed = new Set(origins);
  return (origin) => allowed.has(origin);
}
