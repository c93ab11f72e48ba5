import { describe, expect, it } from "vitest";
import { addressSubject } from "../../../src/graphql/plugins/rate-limit-plugin.js";

describe("the subject of an address's budgets", () => {
  it("when the client is IPv4, then its budgets are its own address", () => {
    expect(addressSubject("203.0.113.7")).toBe("203.0.113.7");
    expect(addressSubject("::ffff:203.0.113.7")).toBe("203.0.113.7");
  });

  it("when the client is IPv6, then every address of its /64 shares one budget, however written", () => {
    const subject = addressSubject("2001:db8:a:b:1:2:3:4");
    expect(subject).toBe("2001:db8:a:b::/64");
    expect(addressSubject("2001:0db8:000a:000b:ffff::1")).toBe(subject);
    expect(addressSubject("2001:db8:a:b::9%eth0")).toBe(subject);
    expect(addressSubject("2001:db8:a:c::1")).not.toBe(subject);
    expect(addressSubject("2001:db8::1")).toBe("2001:db8:0:0::/64");
    expect(addressSubject("::1")).toBe("0:0:0:0::/64");
  });
});
