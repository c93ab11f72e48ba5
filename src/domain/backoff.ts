/**
 * How long to wait before the next try after `failures` failures in a row (0 for the
 * first retry): `firstMs` doubling each time, at most `maxMs`. With `jitter`, a random
 * share of up to that much is taken off, so that processes failing together do not
 * retry together.
 */
export function backoffMs(failures: number, { firstMs, maxMs, jitter = 0 }: { firstMs: number; maxMs: number; jitter?: number }): number {
  const ceilingMs = Math.min(maxMs, firstMs * 2 ** failures);
  return jitter === 0 ? ceilingMs : Math.round(ceilingMs * (1 - jitter + Math.random() * jitter));
}
