// What a process makes of its TIME samples: pure arithmetic on the two clocks.
import { describe, expect, it } from "vitest";
import { bestBounds, keptSamples, sampleOf, type ClockSample } from "../../../../src/stores/redis/redis-clock.js";

const sample = (offsetMs: number, errorMs: number, takenAtMs: number): ClockSample => ({ offsetMs, errorMs, takenAtMs });

describe("Redis's clock from TIME samples", () => {
  it("when TIME comes back, then the offset is Redis's clock against the middle of the round trip, off by at most half of it", () => {
    expect(sampleOf(1_000, ["1", "500000"], 1_000, 0)).toEqual({ offsetMs: 500, errorMs: 1, takenAtMs: 0 });
    expect(sampleOf(1_000, ["0", "900000"], 1_200, 7)).toEqual({ offsetMs: -200, errorMs: 101, takenAtMs: 7 });
  });

  it("when samples differ in round trip, then the tightest bound counts, widened by the drift since it was taken", () => {
    const bounds = bestBounds([sample(2_000, 150, 0), sample(2_003, 2, 0), sample(1_990, 40, 0)], 10_000);
    // 500 ppm over 10 s widens ±2 ms by 5 ms.
    expect(bounds).toEqual({ lowerMs: 2_003 - 7, upperMs: 2_003 + 7 });
    expect(bestBounds([], 0)).toBeNull();
  });

  it("when samples age past the window, then they go, but the newest stays for Redis's silence", () => {
    const samples = [sample(10, 1, 0), sample(11, 1, 30_000), sample(12, 5, 50_000)];
    expect(keptSamples(samples, 85_000, 60_000)).toEqual(samples.slice(1));
    expect(keptSamples(samples, 200_000, 60_000)).toEqual(samples.slice(2));
  });

  it("when a sample's bound and older ones' do not meet (a clock was stepped), then the older ones are void", () => {
    const stepped = [sample(10, 1, 0), sample(12, 3, 5_000), sample(2_010, 1, 10_000), sample(2_011, 2, 15_000)];
    expect(keptSamples(stepped, 16_000, 60_000)).toEqual(stepped.slice(2));
    // A slow sample's wide bound meets every other: it voids nothing.
    const slow = [sample(10, 1, 0), sample(400, 500, 5_000)];
    expect(keptSamples(slow, 6_000, 60_000)).toEqual(slow);
  });
});
