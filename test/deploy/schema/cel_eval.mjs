// Evaluates admission matchConditions (CEL) against objects, with @bufbuild/cel, a CEL evaluator
// (deploy.chart_match_conditions; check_match_conditions.py runs it).
//
//   node cel_eval.mjs < input.json
//
// stdin: {"conditions": [{"name": ..., "expression": ...}, ...],
//         "cases": [{"name": ..., "object": <a Pod as JSON>}, ...]}
// stdout: one JSON array, a {"case": name, "results": {<condition name>: true | false |
// "error: <message>"}} per case. kube-apiserver binds the object under review to the variable
// `object` as an untyped (dyn) value: JSON objects become CEL maps, whole numbers CEL ints, lists
// CEL lists. A result that is not a bool is an error too: kube-apiserver needs a bool. Exit 0 once
// every case is evaluated (errors are results); 2 with a line on stderr for input it cannot read.
import { readFileSync } from "node:fs";
import { celEnv, isCelError, parse, plan } from "@bufbuild/cel";

function toCel(v) {
  if (Array.isArray(v)) return v.map(toCel);
  if (v !== null && typeof v === "object") {
    return new Map(Object.entries(v).map(([k, x]) => [k, toCel(x)]));
  }
  if (typeof v === "number" && Number.isInteger(v)) return BigInt(v);
  return v;
}

const env = celEnv();

function compile(expression) {
  try {
    return { run: plan(env, parse(expression)) };
  } catch (e) {
    return { error: `error: does not parse: ${e.message}` };
  }
}

function evaluate(compiled, object) {
  if (compiled.error) return compiled.error;
  let r;
  try {
    r = compiled.run({ object: toCel(object) });
  } catch (e) {
    return `error: ${e.message}`;
  }
  if (isCelError(r)) return `error: ${r.message}`;
  if (typeof r !== "boolean") return `error: evaluates to ${typeof r}, not a bool`;
  return r;
}

let input;
try {
  input = JSON.parse(readFileSync(0, "utf8"));
  if (!Array.isArray(input.conditions) || !Array.isArray(input.cases)) {
    throw new Error("want {conditions: [...], cases: [...]}");
  }
} catch (e) {
  process.stderr.write(`cel_eval.mjs: bad input: ${e.message}\n`);
  process.exit(2);
}
const compiled = input.conditions.map((c) => [c.name, compile(String(c.expression))]);
const out = input.cases.map((c) => ({
  case: c.name,
  results: Object.fromEntries(compiled.map(([name, cc]) => [name, evaluate(cc, c.object)])),
}));
process.stdout.write(`${JSON.stringify(out)}\n`);
