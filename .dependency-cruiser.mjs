// The layers of src/ and the way runtime imports may point between them
// (README, "Layout"). Run by `npm run lint`, and so by `npm test`.
const layer = {
  domain: "^src/domain/",
  graphql: "^src/graphql/",
  pipeline: "^src/pipeline/",
  stores: "^src/stores/",
  entries: "^src/main/",
  compose: "^src/compose(\\.ts$|/)",
};
const typeOnly = ["type-only"];

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    {
      name: "no-cycles",
      severity: "error",
      comment: "Import cycles make load order matter and layers blur.",
      from: { path: "^(src|scripts|test)/" },
      to: { circular: true },
    },
    {
      name: "no-importing-entries",
      severity: "error",
      comment: "Entry points start a process; nothing imports one.",
      from: {},
      to: { path: layer.entries },
    },
    {
      name: "compose-only-from-entries",
      severity: "error",
      comment: "The composition root is used by entry points, scripts and tests, not by the layers it builds.",
      from: { path: "^src/(domain|graphql|pipeline|stores)/" },
      to: { path: layer.compose },
    },
    {
      name: "domain-imports-domain",
      severity: "error",
      comment: "The domain knows no layer above it, no store and no client library.",
      from: { path: layer.domain },
      to: {
        pathNot: [layer.domain, "^src/errors\\.ts$", "^node_modules/(lru-cache|p-limit)/", "^node:"],
        dependencyTypesNot: ["core"],
      },
    },
    {
      name: "graphql-imports-domain",
      severity: "error",
      comment: "GraphQL speaks to the use cases, never to a store or the pipeline.",
      from: { path: layer.graphql },
      to: { path: `${layer.stores}|${layer.pipeline}` },
    },
    {
      name: "pipeline-imports-domain",
      severity: "error",
      comment: "Pipeline loops speak domain changes through ports; stores are handed in by compose().",
      from: { path: layer.pipeline },
      to: { path: `${layer.stores}|${layer.graphql}` },
    },
    {
      name: "stores-implement-ports",
      severity: "error",
      comment: "Stores know the domain only through model/ and the types of ports/.",
      from: { path: layer.stores },
      to: { path: layer.domain, pathNot: "^src/domain/(model|ports)/" },
    },
    {
      name: "stores-import-domain-types-only",
      severity: "error",
      comment:
        "Stores may import types from the domain, never run its use cases. model/ is the exception: its values are the model's own definitions " +
        "(the counters and relations of each target type, which counter a relation moves and whom it credits), which a store needs to write " +
        "what the domain means; copying them into each store would let the two drift.",
      from: { path: layer.stores },
      to: { path: layer.domain, pathNot: "^src/domain/model/", dependencyTypesNot: typeOnly },
    },
    {
      name: "stores-below-the-layers",
      severity: "error",
      comment: "Stores are the bottom layer: nothing of GraphQL or the pipeline.",
      from: { path: layer.stores },
      to: { path: `${layer.graphql}|${layer.pipeline}` },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^src/generated/" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default"], extensions: [".ts", ".js"] },
  },
};
