// The documentation kept in step with the code: the settings table against
// src/config.ts, the error table against src/errors.ts, the README's length, and
// every relative link. Reads files only; no service is needed.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ApolloServerErrorCode } from "@apollo/server/errors";
import { describe, expect, it } from "vitest";
import { settingNames } from "../../src/config.js";
import { ErrorCode, RequestErrorCode } from "../../src/errors.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const docFiles = readdirSync(path.join(root, "docs"))
  .filter((name) => name.endsWith(".md"))
  .map((name) => `docs/${name}`);
const markdownFiles = ["README.md", ...docFiles];
const read = (file: string) => readFileSync(path.join(root, file), "utf8");

interface Line {
  readonly number: number;
  readonly text: string;
}

/** The lines of a markdown file outside fenced code blocks, numbered from 1. */
function proseLines(text: string): Line[] {
  const lines: Line[] = [];
  let fenced = false;
  text.split("\n").forEach((line, index) => {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    else if (!fenced) lines.push({ number: index + 1, text: line });
  });
  return lines;
}

/** A table's cells, split on pipes that are not escaped (`a\|b` stays one cell). */
function cellsOf(row: string): string[] {
  return row
    .trim()
    .replace(/^\|/, "")
    .replace(/\|$/, "")
    .split(/(?<!\\)\|/)
    .map((cell) => cell.trim());
}

interface Table {
  readonly file: string;
  /** The heading the table sits under, as written. */
  readonly heading: string | null;
  /** Rows after the header and its separator, with their line numbers. */
  readonly rows: readonly { readonly number: number; readonly cells: string[] }[];
  /** The header row too. */
  readonly allRows: readonly { readonly number: number; readonly cells: string[] }[];
}

/** Every table of a markdown file (indented ones too), with the heading each sits under. */
function tablesOf(file: string): Table[] {
  const tables: Table[] = [];
  let heading: string | null = null;
  let current: { number: number; cells: string[] }[] | null = null;
  const close = () => {
    if (current) tables.push({ file, heading, rows: current.slice(2), allRows: current.filter((_, i) => i !== 1) });
    current = null;
  };
  for (const { number, text } of proseLines(read(file))) {
    const headingMatch = /^#{1,6}\s+(.*)$/.exec(text);
    if (headingMatch) {
      close();
      heading = headingMatch[1]?.trim() ?? null;
    } else if (/^\s*\|/.test(text)) {
      current ??= [];
      current.push({ number, cells: cellsOf(text) });
    } else {
      close();
    }
  }
  close();
  return tables;
}

/** The one table under `heading` in `file`; fails the test when there is none. */
function tableUnder(file: string, heading: string): Table {
  const table = tablesOf(file).find((t) => t.heading === heading);
  if (!table) throw new Error(`${file} has no table under the heading "${heading}".`);
  return table;
}

/** Names written in backticks in a cell. */
const backticked = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? "");

const duplicatesOf = (names: readonly string[]) => [...new Set(names.filter((name, i) => names.indexOf(name) !== i))];

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
function slugOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

/** The anchors a markdown file's headings get, repeated ones numbered as GitHub numbers them. */
function anchorsOf(file: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const { text } of proseLines(read(file))) {
    const match = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(text);
    if (!match) continue;
    const slug = slugOf(match[1] ?? "");
    const times = seen.get(slug) ?? 0;
    seen.set(slug, times + 1);
    anchors.add(times === 0 ? slug : `${slug}-${times}`);
  }
  return anchors;
}

describe("the documentation", () => {
  it("when docs/operations.md lists the settings, then its table names every setting of src/config.ts exactly once, one per row", () => {
    const table = tableUnder("docs/operations.md", "Configuration");
    const notOneVariable = table.rows.filter((row) => !/^`[A-Z][A-Z0-9_]*`$/.test(row.cells[0] ?? "")).map((row) => `line ${row.number}: ${row.cells[0]}`);
    const listed = table.rows.flatMap((row) => backticked(row.cells[0] ?? ""));
    expect({
      rowsNotOneVariable: notOneVariable,
      missing: settingNames.filter((name) => !listed.includes(name)),
      extra: listed.filter((name) => !settingNames.includes(name)),
      duplicates: duplicatesOf(listed),
    }).toEqual({ rowsNotOneVariable: [], missing: [], extra: [], duplicates: [] });
  });

  it("when docs/clients.md lists the errors, then every code of src/errors.ts is there and every code there is the service's or Apollo's", () => {
    const table = tableUnder("docs/clients.md", "Errors");
    const listed = table.rows.flatMap((row) => backticked(row.cells[0] ?? ""));
    const ours = [...Object.values(ErrorCode), ...Object.values(RequestErrorCode)] as string[];
    const known = new Set<string>([...ours, ...(Object.values(ApolloServerErrorCode) as string[])]);
    expect({
      missing: ours.filter((code) => !listed.includes(code)),
      unknown: listed.filter((code) => !known.has(code)),
      duplicates: duplicatesOf(listed),
    }).toEqual({ missing: [], unknown: [], duplicates: [] });
  });

  it("when any other table of the README or docs/ starts a row with a setting, then it is reported: settings are listed in one place", () => {
    const settingsTable = tableUnder("docs/operations.md", "Configuration");
    const settingRows = markdownFiles
      .flatMap((file) => tablesOf(file))
      .filter((table) => !(table.file === settingsTable.file && table.heading === settingsTable.heading))
      .flatMap((table) =>
        table.allRows
          .filter((row) => {
            const first = /^`([^`]+)`/.exec(row.cells[0] ?? "")?.[1];
            return first !== undefined && settingNames.includes(first);
          })
          .map((row) => `${table.file}:${row.number}: ${row.cells[0]}`),
      );
    expect(settingRows).toEqual([]);
  });

  it("when the README is read, then it holds at most 150 lines", () => {
    const lines = read("README.md").replace(/\n$/, "").split("\n").length;
    expect(lines).toBeLessThanOrEqual(150);
  });

  it("when the README and docs/ link to a file of the repository, then the file exists and any #anchor names one of its headings", () => {
    const broken: string[] = [];
    for (const file of markdownFiles) {
      for (const { number, text } of proseLines(read(file))) {
        // Inline code may show link syntax without being a link.
        const prose = text.replace(/`[^`]*`/g, "``");
        for (const match of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
          const target = match[1] ?? "";
          if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
          const [pathPart = "", anchor] = target.split("#");
          const linked = pathPart === "" ? file : path.posix.normalize(path.posix.join(path.posix.dirname(file), pathPart));
          if (!existsSync(path.join(root, linked))) {
            broken.push(`${file}:${number}: ${target} (no such file)`);
          } else if (anchor !== undefined && linked.endsWith(".md") && !anchorsOf(linked).has(anchor)) {
            broken.push(`${file}:${number}: ${target} (no heading with this anchor)`);
          }
        }
      }
    }
    expect(broken).toEqual([]);
  });
});
