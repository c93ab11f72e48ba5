// Each Lua script's header is its contract: the KEYS and ARGV it takes, in order,
// each named as its TypeScript wrapper declares it (scripts.ts). These checks hold
// the header to the script's own code, to that declaration and to itself, so a
// list that drifts (a new argument inserted, a reference left pointing at the old
// position, a caller's argument moved on one side only) fails here.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { scriptContracts, scriptFiles, scriptKeyCounts } from "../../../../src/stores/redis/scripts.js";

const scriptsDir = path.join("src", "stores", "redis", "scripts");
const scripts = readdirSync(scriptsDir).filter((file) => file.endsWith(".lua"));

type Kind = "KEYS" | "ARGV";

interface Header {
  /** Per kind, the single positions listed (KEYS[3]), in the order listed. */
  readonly fixed: Record<Kind, number[]>;
  /** Per kind, where the first listed range starts (ARGV[12..], KEYS[5..n]), if any; a range at a computed position is not counted. */
  readonly restFrom: Record<Kind, number | null>;
  /** Ranges named anywhere in the header's text (`one of ARGV[12..]`). */
  readonly rangesNamed: { kind: Kind; from: number }[];
  /** Per kind, every line listed, in order: its position as written (`12..`) and the name its description starts with. */
  readonly lines: Record<Kind, { position: string; name: string | null }[]>;
}

function headerOf(source: string): { header: Header; body: string } {
  const end = source.indexOf("]]");
  const text = source.slice(0, end);
  const fixed: Record<Kind, number[]> = { KEYS: [], ARGV: [] };
  const restFrom: Record<Kind, number | null> = { KEYS: null, ARGV: null };
  const lines: Record<Kind, { position: string; name: string | null }[]> = { KEYS: [], ARGV: [] };
  for (const [, kind, position, name] of text.matchAll(/^\s+(KEYS|ARGV)\[([^\]]+)\]\s+(?:([a-z][A-Za-z0-9]*):\s)?/gm)) {
    lines[kind as Kind].push({ position: position as string, name: name ?? null });
    const single = /^\d+$/.exec(position as string);
    // KEYS[2..4]: three single positions; KEYS[5..], KEYS[5..n]: the rest.
    const bounded = /^(\d+)\.\.(\d+)$/.exec(position as string);
    const range = /^(\d+)\.\./.exec(position as string);
    if (single) fixed[kind as Kind].push(Number(position));
    else if (bounded) for (let p = Number(bounded[1]); p <= Number(bounded[2]); p++) fixed[kind as Kind].push(p);
    else if (range && restFrom[kind as Kind] === null) restFrom[kind as Kind] = Number(range[1]);
  }
  const rangesNamed = [...text.matchAll(/(KEYS|ARGV)\[(\d+)\.\.\]/g)].map(([, kind, from]) => ({ kind: kind as Kind, from: Number(from) }));
  return { header: { fixed, restFrom, rangesNamed, lines }, body: source.slice(end) };
}

/**
 * Where the header's lines differ from the names scripts.ts declares: a declared
 * name `n` is KEYS[i] or ARGV[i] at its place i, and a trailing `...n` the range
 * from there (ARGV[12..], KEYS[5..n], ARGV[3..2+n]). A line at a computed
 * position (ARGV[4+f]) is inside some range, so it differs from any declaration:
 * the header describes such a part of a range in the range's own line, or as `then`.
 */
function differencesOf(kind: Kind, lines: readonly { position: string; name: string | null }[], declared: readonly string[]): string[] {
  const quoted = (name: string | null): string => (name === null ? "no name" : `"${name}"`);
  const differences: string[] = [];
  for (let i = 0; i < Math.max(lines.length, declared.length); i++) {
    const line = lines[i];
    const name = declared[i];
    const rest = name?.startsWith("...") === true;
    const expected = { position: rest ? `${i + 1}..` : `${i + 1}`, name: name === undefined ? null : name.replace(/^\.\.\./, "") };
    if (line === undefined) {
      differences.push(`scripts.ts declares ${kind}[${expected.position}] ${quoted(expected.name)}, the header lists no ${kind}[${expected.position}]`);
    } else if (name === undefined) {
      differences.push(`the header lists ${kind}[${line.position}] ${quoted(line.name)}, scripts.ts declares no ${kind} there`);
    } else if (rest ? !line.position.startsWith(expected.position) : line.position !== expected.position) {
      differences.push(
        `the header lists ${kind}[${line.position}] ${quoted(line.name)} where scripts.ts declares ${kind}[${expected.position}] ${quoted(expected.name)}`,
      );
    } else if (line.name !== expected.name) {
      differences.push(`${kind}[${line.position}] is ${quoted(line.name)} in the header, ${quoted(expected.name)} in scripts.ts`);
    }
  }
  return differences;
}

/** What a script's code reads: single positions, and where it unpacks the rest. */
function usesOf(body: string): { single: Record<Kind, number[]>; unpacked: Record<Kind, number[]> } {
  const code = body.replace(/--.*$/gm, "");
  const single: Record<Kind, number[]> = { KEYS: [], ARGV: [] };
  const unpacked: Record<Kind, number[]> = { KEYS: [], ARGV: [] };
  for (const [, kind, position] of code.matchAll(/\b(KEYS|ARGV)\[(\d+)\]/g)) single[kind as Kind].push(Number(position));
  for (const [, kind, from] of code.matchAll(/unpack\((KEYS|ARGV),\s*(\d+)/g)) unpacked[kind as Kind].push(Number(from));
  return { single, unpacked };
}

const problemsOf = (file: string, source = readFileSync(path.join(scriptsDir, file), "utf8")): string[] => {
  const { header, body } = headerOf(source);
  const uses = usesOf(body);
  const problems: string[] = [];
  for (const kind of ["KEYS", "ARGV"] as const) {
    const listed = header.fixed[kind];
    const positions = listed.filter((p) => header.restFrom[kind] === null || p < header.restFrom[kind]);
    if (positions.some((p, i) => p !== i + 1)) problems.push(`${kind} are listed as ${positions.join(", ")}, not 1 to ${positions.length} in order`);
    const rest = header.restFrom[kind];
    if (rest !== null && rest !== positions.length + 1) problems.push(`${kind}[${rest}..] follows ${kind}[${positions.length}]`);
    for (const named of header.rangesNamed.filter((r) => r.kind === kind)) {
      if (named.from !== rest) problems.push(`the header names ${kind}[${named.from}..], but lists ${rest === null ? "no range" : `${kind}[${rest}..]`}`);
    }
    for (const from of uses.unpacked[kind]) {
      if (from !== rest) problems.push(`the code unpacks ${kind} from ${from}, the header lists ${rest === null ? "no range" : `${kind}[${rest}..]`}`);
    }
    for (const position of new Set(uses.single[kind])) {
      if (!listed.includes(position) && (rest === null || position < rest))
        problems.push(`the code reads ${kind}[${position}], which the header does not list`);
    }
  }
  const command = [...scriptFiles].find(([, name]) => `${name}.lua` === file)?.[0];
  const declaredKeys = command === undefined ? undefined : scriptKeyCounts.get(command);
  const keysListed = header.fixed.KEYS.length;
  if (declaredKeys !== undefined && header.restFrom.KEYS === null && declaredKeys !== keysListed) {
    problems.push(`scripts.ts declares ${declaredKeys} keys, the header lists ${keysListed}`);
  }
  if (declaredKeys !== undefined && header.restFrom.KEYS !== null && declaredKeys < header.restFrom.KEYS - 1) {
    problems.push(`scripts.ts declares ${declaredKeys} keys, fewer than the header's ${header.restFrom.KEYS - 1} before its range`);
  }
  const contract = command === undefined ? undefined : scriptContracts.get(command);
  if (contract !== undefined)
    problems.push(...differencesOf("KEYS", header.lines.KEYS, contract.keys), ...differencesOf("ARGV", header.lines.ARGV, contract.argv));
  if (command === undefined) problems.push("no command of scripts.ts runs it");
  return problems;
};

describe("the Lua scripts' headers", () => {
  it("when each script's KEYS and ARGV lists are read, then they agree with the script's code, with scripts.ts's declarations and with themselves", () => {
    const problems = Object.fromEntries(scripts.map((file) => [file, problemsOf(file)]).filter(([, found]) => (found as string[]).length > 0));
    expect(problems).toEqual({});
  });

  it("when a header or its code drifts from the rest, then the check says how", () => {
    const script = "remove-member.lua";
    const source = readFileSync(path.join(scriptsDir, script), "utf8");
    expect(problemsOf(script, source)).toEqual([]);
    // The header once named the counters ARGV[7..] where they start at ARGV[8].
    expect(problemsOf(script, source.replace("one of ARGV[8..]", "one of ARGV[7..]"))).toEqual(["the header names ARGV[7..], but lists ARGV[8..]"]);
    expect(problemsOf(script, source.replace("unpack(ARGV, 8)", "unpack(ARGV, 9)"))).toContain("the code unpacks ARGV from 9, the header lists ARGV[8..]");
    expect(problemsOf(script, source.replace("    ARGV[3]       targetType:", "    ARGV[4]       targetType:"))).toContain(
      "ARGV are listed as 1, 2, 4, 4, 5, 6, 7, not 1 to 7 in order",
    );
    // Two arguments swapped in the header but not in the wrapper that passes them.
    const swapped = source
      .replace("    ARGV[3]       targetType: target type", "    ARGV[3]       targetId: target type")
      .replace("    ARGV[4]       targetId: target id", "    ARGV[4]       targetType: target id");
    expect(problemsOf(script, swapped)).toEqual([
      'ARGV[3] is "targetId" in the header, "targetType" in scripts.ts',
      'ARGV[4] is "targetType" in the header, "targetId" in scripts.ts',
    ]);
    expect(problemsOf(script, source.replace("    ARGV[8..]     answerCounters:", "    ARGV[8..]     counters:"))).toEqual([
      'ARGV[8..] is "counters" in the header, "answerCounters" in scripts.ts',
    ]);
    expect(problemsOf(script, source.replace("    KEYS[4]       receipt: ", "    KEYS[4]       "))).toEqual([
      'KEYS[4] is no name in the header, "receipt" in scripts.ts',
    ]);
  });
});
