// Prints a bearer token for a user id, signed with JWT_SECRET: for trying the API by hand.
// Usage: npm run token -- <user id>
import { loadConfig } from "../src/config.js";
import { createTokenService } from "../src/graphql/tokens.js";
import { parseId } from "../src/graphql/arguments.js";

const raw = process.argv[2];
if (!raw) {
  console.error("Usage: npm run token -- <user id>");
  process.exit(2);
}
const config = loadConfig();
let userId: bigint;
try {
  userId = parseId(raw, "user id");
} catch (error) {
  console.error((error as Error).message);
  process.exit(2);
}
const tokens = createTokenService({ secret: config.jwtSecret, ttlSeconds: config.tokenTtlSeconds, issuer: config.jwt.issuer, audience: config.jwt.audience });
console.log(await tokens.issue(userId));
