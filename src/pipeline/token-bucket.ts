import { TokenBucket as Bucket } from "limiter";

/** Caps how many events per second reach PostgreSQL. */
export interface TokenBucket {
  /** Waits until `count` tokens are available and takes them. */
  take(count: number): Promise<void>;
}

export const unlimited: TokenBucket = { take: async () => {} };

/**
 * `ratePerSecond` tokens a second; 0 means no cap. The bucket holds at least one
 * batch, since the library refuses a request larger than the bucket.
 */
export function createTokenBucket(ratePerSecond: number, largestRequest: number): TokenBucket {
  if (ratePerSecond <= 0) return unlimited;
  const bucket = new Bucket({ bucketSize: Math.max(ratePerSecond, largestRequest), tokensPerInterval: ratePerSecond, interval: "second" });
  return {
    async take(count) {
      await bucket.removeTokens(count);
    },
  };
}
