// ESLint over sources, scripts and tests, with typescript-eslint's type-checked rules.
import js from "@eslint/js";
import { defineConfig } from "eslint/config";
import tseslint from "typescript-eslint";

export default defineConfig(
  { ignores: ["node_modules/", "src/generated/", "dist/"] },
  js.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // `_` names what a destructuring or a signature must hold but the code does not use.
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", destructuredArrayIgnorePattern: "^_" }],
      // An async function without await is how a function that must return a promise
      // turns its throws into rejections; the ports and hooks are full of them.
      "@typescript-eslint/require-await": "off",
    },
  },
  {
    // Small modules and functions that read as named steps, in the service and in the scripts
    // that run, measure and break it. A function over the bound says why in its disable comment,
    // naming the shared mutable state that keeps it whole.
    files: ["src/**/*.ts", "scripts/**/*.ts"],
    rules: {
      "max-lines": ["error", { max: 350 }],
      "max-lines-per-function": ["error", { max: 80, skipBlankLines: true, skipComments: true }],
    },
  },
  {
    files: ["test/**/*.ts"],
    rules: {
      // vitest's asymmetric matchers (expect.stringMatching, expect.objectContaining) are typed `any`.
      "@typescript-eslint/no-unsafe-assignment": "off",
    },
  },
  {
    files: ["**/*.js", "**/*.mjs"],
    extends: [tseslint.configs.disableTypeChecked],
  },
);
