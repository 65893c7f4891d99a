#!/usr/bin/env node
// Checks Kubernetes objects against the Kubernetes API schemas, as the API server's strict field
// validation (kubectl's default) does: wrong types, missing required fields, values outside an
// enum or a format (quantities, int32 ...), and unknown fields. The API server's own checks go
// further (name formats, ranges, rules across fields): those are not made here.
//
//   node validate.mjs FILE...              multi-document YAML or JSON files ("-" is stdin)
//   node validate.mjs < objects.yaml       the same, from stdin
//   node validate.mjs --batches < b.json   stdin is JSON [{"where": "...", "objects": [...]}, ...]
//
// Prints one line per problem, `<where>: <kind> <namespace>/<name>: <JSON path>: <message>`
// (cluster-scoped objects: `<kind> <name>`), where <where> is the file, "-" for stdin, or the
// batch's "where". Exit 0: every object valid; 1: problems; 2: usage or parse error.
//
// The models come from the npm packages kubernetes-models (the built-in API groups, generated
// from the Kubernetes OpenAPI), @kubernetes-models/cert-manager and
// @kubernetes-models/prometheus-operator (generated from their CRDs). An object of an
// apiVersion/kind none of them has is a problem, so nothing goes unchecked, unless the kind is
// in ALLOWED_UNCHECKED with the reason. Only GA versions (v1, v2, ...) are accepted: Kubernetes
// 1.29 and later have removed, or do not serve by default, the alpha and beta versions the
// packages still carry, and cert-manager serves only v1.
//
// The packages' validators do not reject unknown fields (their schemas have no
// additionalProperties: false), so this script adds that check: it runs each validator on a
// Proxy of the object and records which fields the validator looks up at every path. A field
// it never looks up is unknown to the schema. An object whose keys the validator enumerates
// (a map: labels, annotations, data, resources.limits ...) or whose fields it never reads (a
// free-form object such as a RawExtension) has no fixed set of fields and is not checked.
// The packages' generator drops the schema keywords `description` and `x-kubernetes-*` from
// their schemas, also where they are fields (PriorityClass.description, a CRD's
// openAPIV3Schema), so fields of those names are never reported as unknown (SCHEMA_DROPS_FIELD).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

// The model packages, in lookup order. Each serves the API groups listed in its package.json
// "exports" ("./apps/v1", "./v1", "./cert-manager.io/v1", ...).
const PACKAGES = [
  "kubernetes-models",
  "@kubernetes-models/cert-manager",
  "@kubernetes-models/prometheus-operator",
];

// Kinds that no package has a model of, checked against a JSON Schema of crds/ written from the
// kind's published CRD (every object in it refuses unknown fields), with ajv (the validator the
// model packages use, pinned by package-lock.json), and the CRD's rules across fields (its
// x-kubernetes-validations), which a JSON Schema cannot say, as a function of the object.
const LOCAL_SCHEMAS = {
  "monitoring.googleapis.com/v1 PodMonitoring": {
    file: "crds/podmonitoring.monitoring.googleapis.com-v1.json",
    rules: podMonitoringRules,
  },
};

// A Prometheus duration (1h30m, 15s, 500ms) in milliseconds; NaN when it is not one.
function prometheusMillis(text) {
  const m = /^(?:([0-9]+)y)?(?:([0-9]+)w)?(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?(?:([0-9]+)ms)?$/
    .exec(String(text));
  if (!m || text === "") return NaN;
  const unit = [365 * 86400e3, 7 * 86400e3, 86400e3, 3600e3, 60e3, 1e3, 1];
  return m.slice(1).reduce((sum, n, i) => sum + (n ? Number(n) * unit[i] : 0), 0);
}

// The PodMonitoring CRD's rule on each endpoint: its scrape timeout is at most its interval.
function podMonitoringRules(obj) {
  const out = [];
  const endpoints = obj.spec && Array.isArray(obj.spec.endpoints) ? obj.spec.endpoints : [];
  endpoints.forEach((ep, i) => {
    if (!ep || ep.timeout === undefined) return;
    const timeout = prometheusMillis(ep.timeout);
    const interval = prometheusMillis(ep.interval);
    if (timeout > interval) {
      out.push({ segments: ["spec", "endpoints", i, "timeout"],
        msg: `scrape timeout (${ep.timeout}) must not be greater than scrape interval ` +
          `(${ep.interval})` });
    }
  });
  return out;
}

// "<apiVersion> <kind>" -> why objects of that kind may go unchecked. Keep it empty unless a
// kind has no model in any package; every entry is a hole in the check.
const ALLOWED_UNCHECKED = {};

// Pre-GA group versions that the cluster does serve, with the reason.
const PRE_GA_SERVED = {
  "monitoring.coreos.com/v1alpha1": "prometheus-operator's CRDs serve AlertmanagerConfig, " +
    "PrometheusAgent and ScrapeConfig at v1alpha1",
};

function usage(msg) {
  if (msg) process.stderr.write(`validate.mjs: ${msg}\n`);
  process.stderr.write(
    "usage: node validate.mjs [FILE|-]...  |  node validate.mjs --batches < batches.json\n");
  process.exit(2);
}

// groupVersion ("apps/v1", "v1") -> package name.
const groupVersions = new Map();
let parseAllDocuments;
try {
  ({ parseAllDocuments } = require("yaml"));
  for (const pkg of PACKAGES) {
    const exportsMap = require(`${pkg}/package.json`).exports || {};
    for (const key of Object.keys(exportsMap)) {
      const m = /^\.\/((?:[a-z0-9.-]+\/)?v[0-9]+(?:(?:alpha|beta)[0-9]+)?)$/.exec(key);
      if (m && !groupVersions.has(m[1])) groupVersions.set(m[1], pkg);
    }
  }
} catch (e) {
  if (e.code !== "MODULE_NOT_FOUND") throw e;
  process.stderr.write(`validate.mjs: ${e.message.split("\n")[0]}: its npm packages are not ` +
    "installed; run scripts/setup.sh (npm ci --prefix test/deploy/schema)\n");
  process.exit(2);
}

const modelCache = new Map();
let ajv;

// The validator of a LOCAL_SCHEMAS entry: {validate, rules}.
function localModel(entry) {
  if (!ajv) {
    const Ajv = require("ajv");
    ajv = new (Ajv.default || Ajv)({ allErrors: true, strict: true });
  }
  const url = new URL(entry.file, import.meta.url);
  return { local: ajv.compile(JSON.parse(readFileSync(url, "utf8"))), rules: entry.rules };
}

// The model class of an apiVersion/kind, or a string saying why there is none.
function modelFor(apiVersion, kind) {
  const key = `${apiVersion} ${kind}`;
  if (modelCache.has(key)) return modelCache.get(key);
  let result;
  const pkg = groupVersions.get(apiVersion);
  const version = String(apiVersion).split("/").pop();
  if (typeof apiVersion !== "string" || typeof kind !== "string") {
    result = "apiVersion and kind must be strings";
  } else if (LOCAL_SCHEMAS[key]) {
    result = localModel(LOCAL_SCHEMAS[key]);
  } else if (!pkg) {
    result = `no schema for apiVersion ${apiVersion} (known groups: the built-in API, ` +
      "cert-manager.io, monitoring.coreos.com, and PodMonitoring of monitoring.googleapis.com)";
  } else if (!/^v[0-9]+$/.test(version) && !PRE_GA_SERVED[apiVersion]) {
    result = `${apiVersion} is not a GA version: Kubernetes 1.29 and later have removed it or ` +
      "do not serve it by default";
  } else if (!/^[A-Z][A-Za-z0-9]*$/.test(kind)) {
    result = `no ${apiVersion} kind ${JSON.stringify(kind)}`;
  } else {
    let mod;
    try {
      mod = require(`${pkg}/${apiVersion}/${kind}`);
    } catch (e) {
      if (e.code !== "MODULE_NOT_FOUND" && e.code !== "ERR_PACKAGE_PATH_NOT_EXPORTED") throw e;
    }
    const cls = mod && mod[kind];
    // Only top-level kinds carry apiVersion and kind: DeploymentSpec is not an object kind.
    result = cls && cls.apiVersion === apiVersion && cls.kind === kind &&
      typeof cls.prototype.validate === "function"
      ? cls : `no ${apiVersion} kind ${kind} in ${pkg}`;
  }
  modelCache.set(key, result);
  return result;
}

// `.spec.containers[0].name`, `.metadata.labels["app.kubernetes.io/name"]`, `.` for the root.
function formatPath(segments) {
  if (!segments.length) return ".";
  return segments.map((s) => typeof s === "number" ? `[${s}]`
    : /^[A-Za-z_$][A-Za-z0-9_$-]*$/.test(s) ? `.${s}` : `[${JSON.stringify(s)}]`).join("");
}

// An ajv instancePath (JSON Pointer) as path segments, array indexes as numbers.
function pointerSegments(pointer, data) {
  const out = [];
  let node = data;
  for (const raw of pointer.split("/").slice(1)) {
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    const seg = Array.isArray(node) && /^[0-9]+$/.test(key) ? Number(key) : key;
    out.push(seg);
    node = node != null && typeof node === "object" ? node[seg] : undefined;
  }
  return { segments: out, value: node };
}

// Field names the packages' schemas cannot know (see the header).
const SCHEMA_DROPS_FIELD = (key) => key === "description" || key.startsWith("x-kubernetes-");

function shown(value) {
  let s;
  try {
    s = JSON.stringify(value);
  } catch {
    s = String(value);
  }
  if (s === undefined) s = String(value);
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
}

// Wraps obj so that every field a validator looks up is recorded, per path.
function tracer(obj) {
  const records = new Map(); // JSON of segments -> {target, segments, read, enumerated}
  const has = Object.prototype.hasOwnProperty;
  function wrap(target, segments) {
    const id = JSON.stringify(segments);
    let rec = records.get(id);
    if (!rec) {
      rec = { target, segments, read: new Set(), enumerated: false };
      records.set(id, rec);
    }
    const isArray = Array.isArray(target);
    const note = (key) => {
      if (!isArray && typeof key === "string") rec.read.add(key);
    };
    return new Proxy(target, {
      get(t, key, receiver) {
        note(key);
        const v = Reflect.get(t, key, receiver);
        if (typeof key === "string" && v !== null && typeof v === "object" && has.call(t, key)) {
          return wrap(v, segments.concat(isArray && /^[0-9]+$/.test(key) ? Number(key) : key));
        }
        return v;
      },
      has(t, key) {
        note(key);
        return Reflect.has(t, key);
      },
      getOwnPropertyDescriptor(t, key) {
        note(key);
        return Reflect.getOwnPropertyDescriptor(t, key);
      },
      ownKeys(t) {
        rec.enumerated = true;
        return Reflect.ownKeys(t);
      },
    });
  }
  return {
    proxy: wrap(obj, []),
    unknown() {
      const out = [];
      for (const rec of records.values()) {
        if (Array.isArray(rec.target) || rec.enumerated || rec.read.size === 0) continue;
        for (const key of Object.keys(rec.target)) {
          if (!rec.read.has(key) && !SCHEMA_DROPS_FIELD(key)) out.push(rec.segments.concat(key));
        }
      }
      return out;
    },
  };
}

// ajv errors as one message per path.
function describeErrors(errors, data) {
  const byPath = new Map();
  for (const err of errors) {
    let { segments, value } = pointerSegments(err.instancePath || "", data);
    let msg;
    switch (err.keyword) {
      case "required":
        segments = segments.concat(err.params.missingProperty);
        msg = "required field is missing";
        value = undefined;
        break;
      case "enum":
        msg = `must be one of ${err.params.allowedValues.map((v) => JSON.stringify(v)).join(", ")}`;
        break;
      case "additionalProperties":
        segments = segments.concat(err.params.additionalProperty);
        msg = "unknown field";
        value = undefined;
        break;
      default:
        msg = err.message || err.keyword;
    }
    const id = JSON.stringify(segments);
    if (!byPath.has(id)) byPath.set(id, { segments, value, msgs: [], alternatives: false });
    const entry = byPath.get(id);
    if (err.keyword === "oneOf" || err.keyword === "anyOf") entry.alternatives = true;
    else if (!entry.msgs.includes(msg)) entry.msgs.push(msg);
  }
  const out = [];
  for (const { segments, value, msgs, alternatives } of byPath.values()) {
    let msg = alternatives ? `matches none of its forms: ${msgs.join(", or ")}` : msgs.join("; ");
    if (value !== undefined) msg += ` (got ${shown(value)})`;
    out.push({ segments, msg });
  }
  return out;
}

// Problems of one object, each {segments, msg}.
function checkObject(obj) {
  const { apiVersion, kind } = obj;
  if (apiVersion === "v1" && kind === "List") {
    const out = [];
    for (const key of Object.keys(obj)) {
      if (!["apiVersion", "kind", "metadata", "items"].includes(key)) {
        out.push({ segments: [key], msg: "unknown field" });
      }
    }
    if (!Array.isArray(obj.items)) return out.concat({ segments: ["items"], msg: "must be array" });
    obj.items.forEach((item, i) => {
      const problems = item !== null && typeof item === "object" && !Array.isArray(item)
        ? checkObject(item) : [{ segments: [], msg: `not an object (got ${shown(item)})` }];
      for (const p of problems) out.push({ segments: ["items", i, ...p.segments], msg: p.msg });
    });
    return out;
  }
  const unchecked = ALLOWED_UNCHECKED[`${apiVersion} ${kind}`];
  if (unchecked) {
    process.stderr.write(`validate.mjs: ${label(obj)} not checked: ${unchecked}\n`);
    return [];
  }
  const model = modelFor(apiVersion, kind);
  if (typeof model === "string") return [{ segments: [], msg: model }];
  if (model.local) {
    const ok = model.local(obj);
    return (ok ? [] : describeErrors(model.local.errors, obj)).concat(model.rules(obj));
  }
  const out = [];
  const meta = obj.metadata;
  if (!meta || typeof meta !== "object" || (!meta.name && !meta.generateName)) {
    out.push({ segments: ["metadata", "name"], msg: "required field is missing" });
  }
  const trace = tracer(obj);
  let errors = [];
  try {
    model.prototype.validate.call(trace.proxy);
  } catch (e) {
    if (!Array.isArray(e.errors)) throw e;
    errors = e.errors;
  }
  out.push(...describeErrors(errors, obj));
  for (const segments of trace.unknown()) out.push({ segments, msg: "unknown field" });
  return out;
}

function label(obj) {
  const kind = typeof obj.kind === "string" && obj.kind ? obj.kind : "(no kind)";
  const meta = obj.metadata && typeof obj.metadata === "object" ? obj.metadata : {};
  const name = meta.name || meta.generateName || "(no name)";
  return meta.namespace ? `${kind} ${meta.namespace}/${name}` : `${kind} ${name}`;
}

// Problem lines for the objects of one source; emptyOk: null is an empty YAML document.
function check(where, objects, lines, emptyOk) {
  objects.forEach((obj, i) => {
    if (emptyOk && (obj === null || obj === undefined)) return;
    if (typeof obj !== "object" || Array.isArray(obj)) {
      lines.push(`${where}: document ${i + 1}: .: not an object (got ${shown(obj)})`);
      return;
    }
    for (const p of checkObject(obj)) {
      lines.push(`${where}: ${label(obj)}: ${formatPath(p.segments)}: ${p.msg}`);
    }
  });
}

// Kubernetes reads YAML as YAML 1.1 (on/yes are booleans, 0777 is octal) and keeps timestamps
// as strings; a duplicate key is an error.
const YAML_OPTIONS = {
  version: "1.1",
  uniqueKeys: true,
  customTags: (tags) => tags.filter((t) => !/:(timestamp|binary)$/.test(t.tag || "")),
};

// The objects of a YAML or JSON text; throws with a message on a parse error.
function parse(text, where) {
  const trimmed = text.trimStart();
  if (trimmed.startsWith("{") || trimmed.startsWith("[")) {
    try {
      const v = JSON.parse(text);
      return Array.isArray(v) ? v : [v];
    } catch {
      // Flow-style YAML also starts with { or [: fall through.
    }
  }
  const objects = [];
  for (const doc of parseAllDocuments(text, YAML_OPTIONS)) {
    if (doc.errors && doc.errors.length) {
      throw new Error(`${where}: not valid YAML: ${doc.errors[0].message.split("\n")[0]}`);
    }
    objects.push(doc.toJS({ maxAliasCount: 1000 }));
  }
  return objects;
}

// A file's text, or stdin's for "-" (read as a stream: a synchronous read of a pipe can fail
// with EAGAIN while the writer is still writing).
async function readSource(name) {
  try {
    if (name !== "-") return readFileSync(name, "utf8");
    const chunks = [];
    for await (const chunk of process.stdin) chunks.push(chunk);
    return Buffer.concat(chunks).toString("utf8");
  } catch (e) {
    return usage(`cannot read ${name}: ${e.message}`);
  }
}

async function main(argv) {
  let batchMode = false;
  const files = [];
  for (const arg of argv) {
    if (arg === "--batches") batchMode = true;
    else if (arg === "-h" || arg === "--help") usage();
    else if (arg.startsWith("--")) usage(`unknown option ${arg}`);
    else files.push(arg);
  }
  if (batchMode && files.length) usage("--batches reads stdin only");
  const sources = []; // [where, objects, emptyOk]
  try {
    if (batchMode) {
      let batches;
      try {
        batches = JSON.parse(await readSource("-"));
      } catch (e) {
        throw new Error(`--batches: stdin is not JSON: ${e.message}`);
      }
      if (!Array.isArray(batches)) throw new Error("--batches: stdin must be a JSON array");
      batches.forEach((b, i) => {
        if (!b || typeof b.where !== "string" || !Array.isArray(b.objects)) {
          throw new Error(`--batches: batch ${i} is not {"where": string, "objects": [...]}`);
        }
        sources.push([b.where, b.objects, false]);
      });
    } else {
      for (const name of files.length ? files : ["-"]) {
        sources.push([name, parse(await readSource(name), name), true]);
      }
    }
  } catch (e) {
    process.stderr.write(`validate.mjs: ${e.message}\n`);
    return 2;
  }
  const lines = [];
  for (const [where, objects, emptyOk] of sources) check(where, objects, lines, emptyOk);
  if (lines.length) process.stdout.write(lines.join("\n") + "\n");
  return lines.length ? 1 : 0;
}

process.exitCode = await main(process.argv.slice(2));
