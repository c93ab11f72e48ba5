// The ```ts blocks of a markdown file as modules a reader would write: type-checked by strict
// TypeScript and imported with the endpoint and token a test gives them. docs/clients.md
// states the convention that makes them runnable: each declares `const endpoint = "…";`
// and `let token: string | undefined;` at the top of a line.
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { Client } from "graphql-ws";
import ts from "typescript";

const root = fileURLToPath(new URL("../../", import.meta.url));

export interface Snippet {
  /** The markdown file, relative to the repository. */
  readonly source: string;
  /** The heading the block sits under, as written. */
  readonly heading: string;
  /** The heading's anchor, numbered when one heading holds several blocks: a file name. */
  readonly name: string;
  /** The line of the opening fence, from 1. */
  readonly line: number;
  readonly code: string;
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
const slugOf = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, "")
    .replace(/\s/g, "-");

/** Every ```ts (or ```typescript) block of `source`, in order. */
export function docSnippets(source: string): Snippet[] {
  const snippets: Snippet[] = [];
  let heading = "";
  let open: { line: number; lines: string[] } | null = null;
  let otherFence = false;
  readFileSync(path.join(root, source), "utf8")
    .split("\n")
    .forEach((text, index) => {
      if (open) {
        if (/^\s*```\s*$/.test(text)) {
          const slug = slugOf(heading);
          const taken = snippets.filter((s) => s.name === slug || s.name.startsWith(`${slug}-`)).length;
          snippets.push({ source, heading, name: taken === 0 ? slug : `${slug}-${taken + 1}`, line: open.line, code: `${open.lines.join("\n")}\n` });
          open = null;
        } else open.lines.push(text);
      } else if (/^\s*(```|~~~)/.test(text)) {
        if (!otherFence && /^\s*```(ts|typescript)\s*$/.test(text)) open = { line: index + 1, lines: [] };
        else otherFence = !otherFence;
      } else if (!otherFence) {
        heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(text)?.[1] ?? heading;
      }
    });
  return snippets;
}

export interface SnippetSettings {
  /** The service's URL the snippet is to use (ws:// for a WebSocket client). */
  readonly endpoint: string;
  /** A token of a signed-in user; the snippet's own `undefined` when not given. */
  readonly token?: string;
}

const endpointDeclaration = /^const endpoint = "[^"\n]*";/m;
const tokenDeclaration = /^let token: string \| undefined;/m;

/** The snippet's code with its `endpoint` and `token` set; fails when it does not declare them as the guide's convention says. */
export function withSettings(snippet: Snippet, settings: SnippetSettings): string {
  if (!endpointDeclaration.test(snippet.code) || !tokenDeclaration.test(snippet.code)) {
    throw new Error(
      `The snippet of ${snippet.source} at line ${snippet.line} ("${snippet.heading}") does not declare \`const endpoint = "…";\` and ` +
        "`let token: string | undefined;` at the start of a line, as the guide's snippets do: declare both, so that a test can point it at a service.",
    );
  }
  const { endpoint, token } = settings;
  return snippet.code
    .replace(endpointDeclaration, () => `const endpoint = ${JSON.stringify(endpoint)};`)
    .replace(tokenDeclaration, (declaration) => (token === undefined ? declaration : `let token: string | undefined = ${JSON.stringify(token)};`));
}

export interface SnippetDirectory {
  /**
   * Writes `code` as `<name>.ts` and answers its path. Every call writes a new file, since
   * a module once imported stays cached under its path.
   */
  write(name: string, code: string): string;
  /** Imports a module written here. */
  load(file: string): Promise<Record<string, unknown>>;
  remove(): void;
}

/**
 * A temporary directory outside the repository, so that nothing the linters read is left
 * behind, whose packages resolve as the repository's do: its node_modules is the
 * repository's, and it is an ES module package, as NodeNext needs for top-level await.
 */
export function createSnippetDirectory(): SnippetDirectory {
  const directory = mkdtempSync(path.join(tmpdir(), "doc-snippets-"));
  symlinkSync(path.join(root, "node_modules"), path.join(directory, "node_modules"), "dir");
  writeFileSync(path.join(directory, "package.json"), `${JSON.stringify({ private: true, type: "module" })}\n`);
  let written = 0;
  return {
    write(name, code) {
      written++;
      const file = path.join(directory, written === 1 ? `${name}.ts` : `${name}.${written}.ts`);
      writeFileSync(file, code);
      return file;
    },
    load: (file) => import(/* @vite-ignore */ pathToFileURL(file).href) as Promise<Record<string, unknown>>,
    remove: () => rmSync(directory, { recursive: true, force: true }),
  };
}

/**
 * Strict TypeScript's errors in the written snippets, as a reader's ES module project
 * compiles them (one program over all), each named by its line in the markdown file;
 * empty when every snippet type-checks.
 */
export function typeErrorsOf(written: readonly { readonly snippet: Snippet; readonly file: string }[]): string[] {
  const options: ts.CompilerOptions = {
    strict: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2023,
    lib: ["lib.es2023.d.ts"],
    types: ["node"],
    typeRoots: [path.join(root, "node_modules", "@types")],
    skipLibCheck: true,
    noEmit: true,
  };
  const program = ts.createProgram(
    written.map((w) => w.file),
    options,
  );
  return ts.getPreEmitDiagnostics(program).map((diagnostic) => {
    const message = `TS${diagnostic.code}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n")}`;
    const at = written.find((w) => path.resolve(w.file) === path.resolve(diagnostic.file?.fileName ?? ""));
    if (!at || !diagnostic.file || diagnostic.start === undefined) return message;
    // Settings replace text within a line, so a line of the written file is the same line of the block.
    const { line, character } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
    return `${at.snippet.source}:${at.snippet.line + 1 + line}:${character + 1} ("${at.snippet.heading}"): ${message}`;
  });
}

/** What tests use of the graphql-ws snippet of docs/clients.md. */
export interface LiveCountsSnippet {
  readonly client: Client;
  readonly watchCounts: (
    postIds: string[],
    onCounts: (post: { id: string; counts: { likes: number; reads: number; comments: number; collects: number } }) => void,
    onEnd: (error: unknown) => void,
  ) => () => void;
}

export const liveCountsHeading = "graphql-ws: subscriptions and reconnecting";

/** The graphql-ws snippet of docs/clients.md, written to `directory` with these settings and imported. */
export async function importLiveCountsSnippet(directory: SnippetDirectory, settings: SnippetSettings): Promise<LiveCountsSnippet & { readonly file: string }> {
  const snippet = docSnippets("docs/clients.md").find((s) => s.heading === liveCountsHeading);
  if (!snippet) throw new Error(`docs/clients.md has no \`\`\`ts block under the heading "${liveCountsHeading}".`);
  const file = directory.write(snippet.name, withSettings(snippet, settings));
  const { client, watchCounts } = await directory.load(file);
  if (typeof client !== "object" || client === null || typeof watchCounts !== "function") {
    throw new Error(`The snippet under "${liveCountsHeading}" in docs/clients.md no longer exports \`client\` and \`watchCounts\`, which tests use.`);
  }
  return { client: client as Client, watchCounts: watchCounts as LiveCountsSnippet["watchCounts"], file };
}
