// The Kubernetes ConfigMap kept in step with src/config.ts: every key it sets, and every
// setting it shows commented out for operators to turn on, is a setting the service reads,
// with a value the service takes. Reads files only; no service is needed.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { loadConfig, settingNames } from "../../src/config.js";

const file = "deploy/kubernetes/config.yaml";
const text = readFileSync(fileURLToPath(new URL(`../../${file}`, import.meta.url)), "utf8");

/** Stands in for the secret the ConfigMap leaves to the Secret, so that NODE_ENV=production would load too. */
const secrets = { JWT_SECRET: "a-stand-in-secret-long-enough" };

/** Why the service would not take `value` for `name`, or null when it would. */
function refusal(name: string, value: unknown): string | null {
  if (!settingNames.includes(name)) return `${name} is no setting of src/config.ts`;
  // Kubernetes refuses a ConfigMap whose data holds anything but strings (quote numbers).
  if (typeof value !== "string") return `${name}: ${JSON.stringify(value)} is not a string`;
  try {
    loadConfig({ ...secrets, [name]: value });
    return null;
  } catch (error) {
    return `${name}: ${(error as Error).message}`;
  }
}

/** The ConfigMap's `data:` block, as Kubernetes reads it. */
function dataOf(manifest: unknown): Record<string, unknown> {
  if (typeof manifest !== "object" || manifest === null || !("data" in manifest)) throw new Error(`${file} has no data: block.`);
  const data = manifest.data;
  if (typeof data !== "object" || data === null) throw new Error(`${file}'s data: is not a map.`);
  return data as Record<string, unknown>;
}

/** Settings shown under `data:` as comments (`# NAME: value`), each with its value as YAML would read it uncommented. */
function commentedOut(): [string, unknown][] {
  const block = /^data:\n((?:[ \t].*\n?|\n)*)/m.exec(text)?.[1] ?? "";
  return [...block.matchAll(/^\s+#\s*([A-Z][A-Z0-9_]*:\s+\S.*)$/gm)].flatMap((match) => Object.entries(parse(match[1] ?? "") as Record<string, unknown>));
}

describe("the Kubernetes ConfigMap", () => {
  it("when deploy/kubernetes/config.yaml sets a key under data:, then it is a setting of src/config.ts and the service takes its value", () => {
    const data = Object.entries(dataOf(parse(text)));
    expect(data.length).toBeGreaterThan(0);
    expect(data.map(([name, value]) => refusal(name, value)).filter((problem) => problem !== null)).toEqual([]);
  });

  it("when it shows a setting commented out, then uncommented that setting would be a real one with a value the service takes", () => {
    expect(
      commentedOut()
        .map(([name, value]) => refusal(name, value))
        .filter((problem) => problem !== null),
    ).toEqual([]);
  });
});
