// The Lua side of the Redis stores: includes expand once each, and the names
// Lua and TypeScript both use (hash fields, status codes) agree.
import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  authorField,
  epochField,
  epochViewsField,
  rebuiltAtField,
  historyField,
  seqFieldPrefix,
  snapshotMarkField,
  versionField,
} from "../../../../src/stores/redis/keys.js";
import { memberIndexIdleMs } from "../../../../src/stores/redis/member-index-store.js";
import { loadScript } from "../../../../src/stores/redis/scripts.js";
import { ScriptStatus } from "../../../../src/stores/redis/statuses.js";

const scriptsDir = new URL("../../../../src/stores/redis/scripts/", import.meta.url);
const scripts = readdirSync(scriptsDir)
  .filter((f) => f.endsWith(".lua"))
  .map((f) => f.replace(/\.lua$/, ""));
const include = (name: string) => readFileSync(new URL(`includes/${name}.lua`, scriptsDir), "utf8");
const luaLocals = (text: string) =>
  Object.fromEntries(
    [...text.matchAll(/^local (\w+) = (-?\d+|'[^']*')$/gm)].map((m): [string, string] => [m[1] as string, (m[2] as string).replaceAll("'", "")]),
  );

describe("Lua scripts", () => {
  it.each(scripts)("when %s is loaded, then every include is inlined once and no function is defined twice", (name) => {
    const text = loadScript(name);
    expect(text).not.toMatch(/--@include/);
    const functions = [...text.matchAll(/^local function (\w+)/gm)].map((m) => m[1]);
    expect(new Set(functions).size).toBe(functions.length);
  });

  it.each(scripts)("when %s is loaded, then it holds no comment line and stays under the 16 KB Redis reads at once", (name) => {
    const text = loadScript(name);
    expect(text).not.toMatch(/^\s*--/m);
    expect(Buffer.byteLength(text)).toBeLessThan(16 * 1024);
  });

  it("when an include uses a hash field, then it names it as keys.ts does", () => {
    expect(luaLocals(include("hash-fields"))).toEqual({
      authorField,
      versionField,
      epochField,
      rebuiltAtField,
      snapshotMarkField,
      epochViewsField,
      historyField,
      seqFieldPrefix,
    });
  });

  it("when a script returns a status, then the code means what statuses.ts says", () => {
    const lua = luaLocals(include("statuses"));
    const snake = (name: string) => name.replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
    expect(lua).toEqual(Object.fromEntries(Object.entries(ScriptStatus).map(([name, code]) => [snake(name), String(code)])));
  });

  it("when a member index's expiry is set, then Lua and the refresh of reads use the same idle time", () => {
    expect(Number(luaLocals(include("member-index")).indexIdleMs)).toBe(memberIndexIdleMs);
  });
});
