import { describe, expect, it } from "vitest";
import type { LikeChange, OutboxEntry, Repair } from "../../../../src/domain/model.js";
import { parseLikeChange, parseLikeChanges, parseRepair, toLikeChangeBatchMessage, toLikeChangeMessage, toRepairMessage } from "../../../../src/stores/rabbitmq/messages.js";
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

describe("batches of like changes", () => {
  it("when a batch goes to the wire and back, then its changes come back in order", () => {
    const changes = [change(1n, 10n, true), change(2n, 11n, false), change(1n, 12n, false)];
    const body = JSON.stringify(toLikeChangeBatchMessage(changes.map(entry)));
    expect(parseLikeChanges(Buffer.from(body)).map((c) => c.delivery)).toEqual(changes.map((value) => ({ kind: "valid", value })));
  });

  it("when one change of a batch is malformed, then only it is refused, with its own body", () => {
    const good = toLikeChangeMessage(entry(change(1n, 10n, true)));
    const bad = { ...good, userId: "x" };
    const parsed = parseLikeChanges({ changes: [good, bad, good] });
    expect(parsed.map((c) => c.delivery.kind)).toEqual(["valid", "invalid", "valid"]);
    expect(parsed[1]?.body).toEqual(bad);
    expect(parsed[1]?.delivery.kind === "invalid" && parsed[1].delivery.reason).toMatch(/userId/);
  });

  it("when a single change arrives, as an older relay sends it, then it is read as one", () => {
    const original = change(3n, 13n, true);
    expect(parseLikeChanges(JSON.stringify(toLikeChangeMessage(entry(original))))).toEqual([{ delivery: { kind: "valid", value: original }, body: toLikeChangeMessage(entry(original)) }]);
  });

  it("when a body is not JSON, then the whole message is one refused delivery", () => {
    expect(parseLikeChanges("{").map((c) => c.delivery)).toEqual([{ kind: "invalid", reason: "body is not JSON" }]);
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
