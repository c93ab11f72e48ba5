// Checks the deployment example, which cannot run where there is no container engine or
// cluster; exits 1 with one line per finding.
//   Dockerfile: the validator of the Dockerfile language server (dockerfile-utils); a
//     runtime stage whose USER is not root; no setting the manifests take from a Secret
//     set by ENV or ARG.
//   deploy/kubernetes/*.yaml: each document parses and fits the Kubernetes API schema of
//     its kind (kubernetes-models; fields the schema does not know are not caught); the
//     ConfigMap holds only settings the service reads, and no secret; each container's
//     environment (the image's, its ConfigMap's, its own) passes the service's loadConfig;
//     every HTTP probe asks a named port of its container for a path that port serves, and
//     each named port is where the process listens.
//   deploy/prometheus/alerts.yaml and deploy/grafana/likes-dashboard.json, where promtool
//     (Debian's prometheus package) is on PATH: `promtool check rules` on the alerts,
//     `promtool test rules` on their unit tests (alerts.test.yaml), and every query of the
//     dashboard checked as PromQL the same way; without promtool, one line says so.
// Usage: tsx scripts/lint-deploy.ts [Dockerfile] [manifest directory]
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Arg, DockerfileParser, Env, From, User } from "dockerfile-ast";
import { validate as validateDockerfile } from "dockerfile-utils";
import { Deployment } from "kubernetes-models/apps/v1";
import { CronJob, Job } from "kubernetes-models/batch/v1";
import { ConfigMap, Service } from "kubernetes-models/v1";
import { LineCounter, parseAllDocuments } from "yaml";
import { loadConfig, type Config } from "../src/config.js";
import { lintPrometheus } from "./lib/lint-prometheus.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const dockerfilePath = path.resolve(process.argv[2] ?? path.join(root, "Dockerfile"));
const manifestsDir = path.resolve(process.argv[3] ?? path.join(root, "deploy/kubernetes"));
const prometheusFiles = {
  alerts: path.join(root, "deploy/prometheus/alerts.yaml"),
  alertTests: path.join(root, "deploy/prometheus/alerts.test.yaml"),
  dashboard: path.join(root, "deploy/grafana/likes-dashboard.json"),
};

const findings: string[] = [];
const report = (file: string, line: number, message: string) => findings.push(`${path.relative(process.cwd(), file)}:${line}: ${message}`);

/** The kinds the manifests may hold, each checked against its schema. */
const models: Record<string, (document: object) => { validate(): void }> = {
  "v1/ConfigMap": (document) => new ConfigMap(document),
  "v1/Service": (document) => new Service(document),
  "apps/v1/Deployment": (document) => new Deployment(document),
  "batch/v1/Job": (document) => new Job(document),
  "batch/v1/CronJob": (document) => new CronJob(document),
};

/**
 * The ports the service listens on, by the name containers must give them: the paths a probe
 * may ask of each (src/graphql/server.ts, src/process/metrics-endpoint.ts), and where it listens.
 */
const servedPorts: Record<string, { readonly probePaths: readonly string[]; readonly port: (config: Config) => number }> = {
  http: { probePaths: ["/health/live", "/health/ready"], port: (config) => config.port },
  metrics: { probePaths: ["/health/live", "/metrics"], port: (config) => config.metricsPort },
};

/** The settings the service reads: every name loadConfig looks up in the environment it is given. */
function settingsRead(): Set<string> {
  const names = new Set<string>();
  const recording = new Proxy(
    {},
    {
      get(_env, name) {
        if (typeof name === "string") names.add(name);
        return undefined;
      },
    },
  );
  loadConfig(recording);
  return names;
}

interface Stage {
  readonly name: string | null;
  /** Where its FROM is, or its USER once it has one. */
  line: number;
  /** Its ENV, those of the stage it is built FROM included. */
  readonly env: Map<string, { value: string; line: number }>;
  readonly args: Map<string, number>;
  user: string | null;
}

/** The Dockerfile's own findings; returns its stages in order. */
async function lintDockerfile(): Promise<Stage[]> {
  const text = await readFile(dockerfilePath, "utf8");
  for (const { range, message } of validateDockerfile(text))
    report(dockerfilePath, range.start.line + 1, typeof message === "string" ? message : message.value);
  const stages: Stage[] = [];
  for (const instruction of DockerfileParser.parse(text).getInstructions()) {
    const line = instruction.getRange().start.line + 1;
    if (instruction instanceof From) {
      const base = stages.find((stage) => stage.name !== null && stage.name === instruction.getImageName());
      stages.push({ name: instruction.getBuildStage(), line, env: new Map(base?.env), args: new Map(), user: base?.user ?? null });
    }
    const stage = stages.at(-1);
    if (!stage) continue;
    if (instruction instanceof Env) {
      for (const property of instruction.getProperties()) stage.env.set(property.getName(), { value: property.getUnescapedValue() ?? "", line });
    } else if (instruction instanceof Arg) {
      const property = instruction.getProperty();
      if (property) stage.args.set(property.getName(), line);
    } else if (instruction instanceof User) {
      stage.user = instruction.getArguments()[0]?.getValue() ?? null;
      stage.line = line;
    }
  }
  const runtime = stages.at(-1);
  if (!runtime) report(dockerfilePath, 1, "no FROM: the Dockerfile builds no image.");
  else if (runtime.user === null || /^(root|0)(:|$)/.test(runtime.user)) {
    report(dockerfilePath, runtime.line, `the runtime stage runs as ${runtime.user ?? "root (no USER)"}; give it USER node.`);
  }
  return stages;
}

interface Manifest {
  readonly file: string;
  readonly line: number;
  readonly document: Record<string, unknown>;
}

async function readManifests(): Promise<Manifest[]> {
  const files = (await readdir(manifestsDir)).filter((name) => /\.ya?ml$/.test(name)).sort();
  if (files.length === 0) report(manifestsDir, 0, "no .yaml files: nothing to check.");
  const manifests: Manifest[] = [];
  for (const name of files) {
    const file = path.join(manifestsDir, name);
    const lines = new LineCounter();
    const lineOf = (offset: number) => lines.linePos(offset).line;
    for (const parsed of parseAllDocuments(await readFile(file, "utf8"), { lineCounter: lines })) {
      for (const error of [...parsed.errors, ...parsed.warnings]) report(file, lineOf(error.pos[0]), error.message.split("\n")[0] ?? "");
      const document: unknown = parsed.toJS();
      const line = lineOf(parsed.contents?.range?.[0] ?? 0);
      if (document === null || parsed.errors.length > 0) continue;
      if (typeof document !== "object" || Array.isArray(document)) {
        report(file, line, "a document that is not a Kubernetes object.");
        continue;
      }
      manifests.push({ file, line, document: document as Record<string, unknown> });
    }
  }
  return manifests;
}

// The shapes the checks below walk; each document fits its schema before they do.
interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { key: string } };
}
interface Probe {
  httpGet?: { path?: string; port: number | string };
}
interface Container {
  name: string;
  env?: EnvVar[];
  envFrom?: { configMapRef?: { name: string } }[];
  ports?: { name?: string; containerPort: number }[];
  startupProbe?: Probe;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
}
interface PodSpec {
  containers: Container[];
  initContainers?: Container[];
}
interface Workload {
  kind: string;
  spec?: { template?: { spec?: PodSpec }; jobTemplate?: { spec?: { template?: { spec?: PodSpec } } } };
}

function podSpecOf(document: Workload): PodSpec | undefined {
  return document.kind === "CronJob" ? document.spec?.jobTemplate?.spec?.template?.spec : document.spec?.template?.spec;
}

/** The manifests of a kind this lint knows whose document fits that kind's schema. */
function fitSchemas(manifests: readonly Manifest[]): Manifest[] {
  const valid: Manifest[] = [];
  for (const manifest of manifests) {
    const { apiVersion, kind } = manifest.document;
    const model = models[`${String(apiVersion)}/${String(kind)}`];
    if (!model) {
      report(manifest.file, manifest.line, `${String(apiVersion)} ${String(kind)} is not a kind this lint knows (${Object.keys(models).join(", ")}).`);
      continue;
    }
    try {
      model(manifest.document).validate();
      valid.push(manifest);
    } catch (error) {
      report(manifest.file, manifest.line, `${String(kind)} does not fit the Kubernetes schema: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  return valid;
}

/** A manifest that runs a pod, with the pod's containers, init containers first. */
interface WorkloadContainers {
  readonly manifest: Manifest;
  readonly containers: readonly Container[];
}

function workloadsOf(valid: readonly Manifest[]): WorkloadContainers[] {
  return valid.flatMap((manifest) => {
    const pod = podSpecOf(manifest.document as unknown as Workload);
    return pod ? [{ manifest, containers: [...(pod.initContainers ?? []), ...pod.containers] }] : [];
  });
}

/** No setting the manifests take from a Secret may be set by the Dockerfile's ENV or ARG. */
function lintImageSecrets(stages: readonly Stage[], secretSettings: ReadonlySet<string>): void {
  for (const stage of stages) {
    for (const [name, { line }] of stage.env)
      if (secretSettings.has(name)) report(dockerfilePath, line, `ENV ${name}: the manifests take it from a Secret; an image must not carry it.`);
    for (const [name, line] of stage.args)
      if (secretSettings.has(name))
        report(dockerfilePath, line, `ARG ${name}: the manifests take it from a Secret; build arguments stay in the image's history.`);
  }
}

/** Each ConfigMap's keys against the settings the service reads; returns their data by name. */
function lintConfigMaps(valid: readonly Manifest[], secretSettings: ReadonlySet<string>): Map<string, Record<string, string>> {
  const known = settingsRead();
  const configMaps = new Map<string, Record<string, string>>();
  for (const manifest of valid.filter((m) => m.document.kind === "ConfigMap")) {
    const name = String((manifest.document.metadata as { name?: unknown } | undefined)?.name);
    const data = (manifest.document.data ?? {}) as Record<string, string>;
    configMaps.set(name, data);
    for (const key of Object.keys(data)) {
      if (!known.has(key)) report(manifest.file, manifest.line, `ConfigMap ${name}: ${key} is no setting the service reads (src/config.ts).`);
      if (secretSettings.has(key)) report(manifest.file, manifest.line, `ConfigMap ${name}: ${key} is a secret; it belongs in the Secret.`);
    }
  }
  return configMaps;
}

// Stand-ins for secrets loadConfig checks beyond their defaults; other secrets keep the defaults.
const secretStandIns: Record<string, string> = { JWT_SECRET: "a-stand-in-of-thirty-two-chars!!" };

/** What a container's environment takes besides its own `env`: the image's ENV, and the ConfigMaps by name. */
interface EnvSources {
  readonly image: Record<string, string>;
  readonly configMaps: ReadonlyMap<string, Record<string, string>>;
}

/** Reports a finding about one container, at its manifest. */
type Say = (message: string) => void;

function environmentOf(container: Container, sources: EnvSources, say: Say): Record<string, string> {
  // The process's environment: the image's, the ConfigMap's, then the container's own.
  const env: Record<string, string> = { ...sources.image };
  for (const source of container.envFrom ?? []) {
    const name = source.configMapRef?.name;
    if (name === undefined) continue;
    const data = sources.configMaps.get(name);
    if (data) Object.assign(env, data);
    else say(`ConfigMap ${name} is not among the manifests.`);
  }
  for (const variable of container.env ?? []) {
    const value = variable.valueFrom?.secretKeyRef ? secretStandIns[variable.name] : variable.value;
    if (value !== undefined) env[variable.name] = value;
  }
  return env;
}

/** Each named port is one the service serves, where its process listens (when it would start). */
function lintPorts(container: Container, config: Config | null, say: Say): void {
  for (const port of container.ports ?? []) {
    const served = port.name === undefined ? undefined : servedPorts[port.name];
    if (!served) say(`port ${port.containerPort} is named ${port.name ?? "nothing"}; name it ${Object.keys(servedPorts).join(" or ")}.`);
    else if (config && served.port(config) !== port.containerPort) {
      say(`port ${port.name ?? ""} is ${port.containerPort}, but the process listens on ${served.port(config)}.`);
    }
  }
}

/** Each HTTP probe asks a named port the container declares for a path that port serves. */
function lintProbes(container: Container, say: Say): void {
  for (const kind of ["startupProbe", "livenessProbe", "readinessProbe"] as const) {
    const probe = container[kind]?.httpGet;
    if (!probe) continue;
    const served = typeof probe.port === "string" ? servedPorts[probe.port] : undefined;
    if (typeof probe.port !== "string" || !served) {
      say(`${kind} asks port ${probe.port}; ask one of the service's named ports (${Object.keys(servedPorts).join(", ")}).`);
    } else if (!container.ports?.some((port) => port.name === probe.port)) {
      say(`${kind} asks port ${probe.port}, which the container does not declare.`);
    } else if (!served.probePaths.includes(probe.path ?? "/")) {
      say(`${kind} asks ${probe.path ?? "/"} of port ${probe.port}, which answers probes at ${served.probePaths.join(", ")}.`);
    }
  }
}

/** Whether the container's process would start with the environment it gets, and its ports and probes. */
function lintContainer(manifest: Manifest, container: Container, sources: EnvSources): void {
  const where = `${String(manifest.document.kind)} ${String((manifest.document.metadata as { name?: unknown } | undefined)?.name)}, container ${container.name}`;
  const say: Say = (message) => report(manifest.file, manifest.line, `${where}: ${message}`);
  let config: Config | null = null;
  try {
    config = loadConfig(environmentOf(container, sources, say));
  } catch (error) {
    say(`the process would not start: ${error instanceof Error ? error.message : String(error)}`);
  }
  lintPorts(container, config, say);
  lintProbes(container, say);
}

async function main(): Promise<void> {
  const prometheusChecked = await lintPrometheus(prometheusFiles, report);
  const stages = await lintDockerfile();
  const imageEnv = Object.fromEntries([...(stages.at(-1)?.env ?? [])].map(([name, { value }]) => [name, value]));
  const manifests = await readManifests();
  const valid = fitSchemas(manifests);
  const workloads = workloadsOf(valid);
  const secretSettings = new Set(
    workloads.flatMap(({ containers }) => containers.flatMap((c) => (c.env ?? []).filter((e) => e.valueFrom?.secretKeyRef).map((e) => e.name))),
  );
  lintImageSecrets(stages, secretSettings);
  const sources: EnvSources = { image: imageEnv, configMaps: lintConfigMaps(valid, secretSettings) };
  for (const { manifest, containers } of workloads) for (const container of containers) lintContainer(manifest, container, sources);

  if (findings.length > 0) {
    console.error(findings.join("\n"));
    process.exit(1);
  }
  const prometheus = prometheusChecked ? ", alert rules and dashboard queries" : "";
  console.log(`deployment example: Dockerfile, ${manifests.length} Kubernetes objects${prometheus} checked, no findings`);
}

await main();
