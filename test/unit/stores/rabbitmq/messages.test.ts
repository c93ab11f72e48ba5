import { describe, expect, it } from "vitest";
import type { LikeChange, OutboxEntry, Repair } from "../../../../src/domain/model.js";
import { parseLikeChange, parseRepair, toLikeChangeMessage, toRepairMessage } from "../../../../src/stores/rabbitmq/messages.js";
import { likeChange as change } from "../../../support/changes.js";

const entry = (c: LikeChange): OutboxEntry => ({ partition: 7, entryId: "1-0", change: c });

describe("like change messages", () => {
  it("when a change goes to the wire and back, then nothing is lost", () => {
    const original = change(42n, 1795343997282123n, true);
    const message = toLikeChangeMessage(entry(original));
    expect(message.eventId).toBe("7-1-0");
    expect(parseLikeChange(JSON.stringify(message))).toEqual({ kind: "valid", value: original });
  });

  it.each([
    ["not JSON", "{", /not JSON/],
    ["an unknown target type", { ...toLikeChangeMessage(entry(change(1n, 1n, true))), target: { type: "planet", id: "1" } }, /target\.type/],
    ["a non-decimal user", { ...toLikeChangeMessage(entry(change(1n, 1n, true))), userId: "01" }, /userId/],
    ["a missing version", { ...toLikeChangeMessage(entry(change(1n, 1n, true))), version: undefined }, /version/],
  ])("when a message has %s, then it is refused with a reason", (_, body, reason) => {
    const parsed = parseLikeChange(typeof body === "string" ? body : JSON.stringify(body));
    expect(parsed.kind === "invalid" && parsed.reason).toMatch(reason);
  });
});

describe("repair messages", () => {
  it.each<Repair>([
    { kind: "alignDatabase", target: { type: "comment", id: 9n }, observedVersion: 1795343997282123n, add: [1n, 2n], remove: [3n] },
    { kind: "recountDatabase", target: { type: "post", id: 4n } },
    { kind: "recountRedis", target: { type: "post", id: 5n }, observedVersion: 0n },
  ])("when a $kind repair goes to the wire and back, then nothing is lost", (repair) => {
    expect(parseRepair(Buffer.from(JSON.stringify(toRepairMessage(repair))))).toEqual({ kind: "valid", value: repair });
  });

  it("when a repair names an id that is not decimal, then it is refused with a reason", () => {
    const body = { ...toRepairMessage({ kind: "recountDatabase", target: { type: "post", id: 4n } }), target: { type: "post", id: "4x" } };
    const parsed = parseRepair(JSON.stringify(body));
    expect(parsed.kind === "invalid" && parsed.reason).toMatch(/target\.id/);
  });
});
