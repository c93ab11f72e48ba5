// Whose per-address budgets a client's requests spend (rate-limit-plugin.ts, cold-reads.ts).
import { isIPv6 } from "node:net";

/** Subjects of the addresses seen lately: working one out runs regular expressions, on every like. */
const subjectsByAddress = new Map<string, string>();
const maxRememberedAddresses = 10_000;

/**
 * The subject of an address's budgets. An IPv6 client is usually given a whole /64
 * and can pick any address in it, so its budgets are the /64's; an IPv4-mapped
 * IPv6 address is its IPv4 address.
 */
export function addressSubject(ip: string): string {
  let subject = subjectsByAddress.get(ip);
  if (subject === undefined) {
    if (subjectsByAddress.size >= maxRememberedAddresses) subjectsByAddress.clear();
    subject = subjectOf(ip);
    subjectsByAddress.set(ip, subject);
  }
  return subject;
}

function subjectOf(ip: string): string {
  const address = ip.replace(/%.*$/, "");
  if (!isIPv6(address)) return address;
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (mapped?.[1]) return mapped[1];
  const [head = "", tail] = address.split("::");
  const front = head ? head.split(":") : [];
  const back = tail ? tail.split(":") : [];
  const groups = tail === undefined ? front : [...front, ...Array<string>(Math.max(0, 8 - front.length - back.length)).fill("0"), ...back];
  return `${groups
    .slice(0, 4)
    .map((g) => parseInt(g, 16).toString(16))
    .join(":")}::/64`;
}
