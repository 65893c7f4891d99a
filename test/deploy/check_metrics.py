#!/usr/bin/env python3
"""The metrics the server exports, the alerting rules, the Grafana dashboard and docs/metrics.md
agree, and the alerts fire when they should.

  check_metrics.py --root REPO --rules [--promtool P]                    (deploy.alert_rules)
      `promtool check rules` on the chart's rule file (files/alerts.yaml), `promtool test rules`
      on test/deploy/alerts_test.yaml; every alert has a case that makes it fire and one that
      keeps it silent, every case names an alert of the file; every rule has a severity
      (critical, warning or info), a summary, a description and a runbook_url; every
      runbook_url is the repository path docs/metrics.md with the anchor of the alert's own
      section, an anchor that page has (no URL: the chart's runbookBaseURL puts the operator's
      in front); docs/metrics.md has a section for every alert and none other, and its table
      gives each alert's severity and `for`.
  check_metrics.py --root REPO --names [--promtool P]                    (deploy.metrics_names)
      The families the server can export, read from its source (lib/server/metrics.cpp,
      lib/kube/live_cluster.cpp): docs/metrics.md documents exactly those, with their types
      and label names; every metric name in the rules, in the rules' test series, in the
      dashboard's queries and in the docs is one of them. The dashboard is valid JSON, every
      panel id is unique, every query uses only the dashboard's variables and parses as PromQL
      (promtool).
  check_metrics.py --root REPO --exported --build-dir DIR                (deploy.metrics_exported)
      The built server, with legacy placement on against the project's fake kube-apiserver on
      127.0.0.1, serves on /metrics exactly the families (names, types, label names) the source
      says. Exit 77 (skipped) when the binaries are not built.
  check_metrics.py --root REPO --self-test [--promtool P]   (deploy.metrics_checks_catch_breakage)
      Each check above fails, naming the problem, on a copy of the files broken as an edit
      could break them (a metric renamed in the source, a wrong type in the docs, an alert with
      no test, a threshold changed, a duplicate panel id, ...); the unbroken copy passes.

Exit 0 when every check passes, 1 with one FAIL line per problem.
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import time

import yaml

import deploy_checks as dc

SKIP = 77
CHART = os.path.join("deploy", "helm", "kuberay-tpu-webhook")
RULES = os.path.join(CHART, "files", "alerts.yaml")
DASHBOARD = os.path.join(CHART, "files", "dashboard.json")
RULES_TEST = os.path.join("test", "deploy", "alerts_test.yaml")
METRICS_DOC = os.path.join("docs", "metrics.md")
# Where an alert's runbook_url points: docs/metrics.md as a path in the repository, then `#` and
# the anchor of the alert's section. The project publishes no URL; the chart's
# tpuWebhook.metrics.prometheusRule.runbookBaseURL puts the operator's in front.
RUNBOOK_BASE = "docs/metrics.md"
SERVER_SRC = os.path.join("lib", "server", "metrics.cpp")
KUBE_SRC = os.path.join("lib", "kube", "live_cluster.cpp")
# Text that names metrics and must name only exported ones.
PROSE = [os.path.join(CHART, "values.yaml"), os.path.join(CHART, "README.md"), "README.md"]
SEVERITIES = {"critical", "warning", "info"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
# Grafana's own variables a query may use besides the dashboard's.
GRAFANA_VARIABLES = {"__rate_interval", "__interval", "__range", "__interval_ms", "__range_s"}
METRIC_TOKEN = re.compile(r"\b(kuberay_tpu_webhook_[a-z0-9_]*|process_[a-z_]+)")


def read(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        return f.read()


# ---------------------------------------------------------------------------------------------
# What the server exports, from its source.

def label_names(code):
    """Label names in C++ sample-label strings: `"webhook=\\""`, `R"(",reason="other")"`."""
    return set(re.findall(r"\b([a-z_]+)=\\?\"", code)) - {"le"}


def exported_families(root, r):
    """{name: (type, labels)} of every family the server can put on /metrics ("le" aside)."""
    out = {}
    src = read(root, SERVER_SRC)
    prefix = re.search(r'kPrefix = "(\w+)"', src)
    start = src.find("std::string Metrics::render() const")
    if not r.check(prefix and start >= 0, f"{SERVER_SRC}: no kPrefix or Metrics::render()"):
        return out
    for block in re.split(r"\bname = full\(", src[start:])[1:]:
        m = re.match(r'"(\w+)"\);\s*family\(out, name, "(\w+)"', block)
        if r.check(m, f"{SERVER_SRC}: a family without its type: {block[:80]!r}"):
            out[prefix.group(1) + m.group(1)] = (m.group(2), label_names(block))
    for name, kind in re.findall(r'family\(out, "(process_\w+)", "(\w+)"', src):
        out[name] = (kind, set())

    src = read(root, KUBE_SRC)
    start = src.find("std::string LiveCluster::metrics_text()")
    if not r.check(start >= 0, f"{KUBE_SRC}: no LiveCluster::metrics_text()"):
        return out
    body = src[start:]
    helpers = {}
    for m in re.finditer(r"auto (\w+) = \[&\]\(const char\* name.*?\n  \};", body, re.S):
        p = re.search(r'std::string\("(\w+)"\) \+ name', m.group(0))
        if r.check(p, f"{KUBE_SRC}: helper {m.group(1)} without a name prefix"):
            helpers[m.group(1)] = (p.group(1), label_names(m.group(0)))
    calls = re.findall(r"\b(\w+)\(\s*\"(\w+)\",\s*\"(counter|gauge|histogram)\"", body)
    r.check(calls and helpers, f"{KUBE_SRC}: no metric families found in metrics_text()")
    for helper, name, kind in calls:
        if r.check(helper in helpers, f"{KUBE_SRC}: {name} written by unknown helper {helper}"):
            p, labels = helpers[helper]
            out[p + name] = (kind, labels)
    return out


def sample_names(families):
    """Every series name the families give, histogram suffixes included."""
    names = set(families)
    for name, (kind, _) in families.items():
        if kind == "histogram":
            names |= {name + s for s in HISTOGRAM_SUFFIXES}
    return names


def unknown_metrics(text, families):
    """Metric names in text that the server does not export. A name ending in "_" is a prefix
    (`kuberay_tpu_webhook_kube_*`): some family must start with it."""
    names = sample_names(families)
    bad = set()
    for tok in METRIC_TOKEN.findall(text):
        if tok.endswith("_"):
            if not any(n.startswith(tok) for n in names):
                bad.add(tok + "*")
        elif tok not in names:
            bad.add(tok)
    return sorted(bad)


# ---------------------------------------------------------------------------------------------
# docs/metrics.md

def table_rows(text, header):
    """Rows (lists of cells) of every Markdown table whose header row starts with `header`."""
    rows, inside = [], False
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") \
            else None
        if cells is None:
            inside = False
        elif [c.lower() for c in cells[:len(header)]] == header:
            inside = True
        elif inside and not set("".join(cells)) <= set("-: "):
            rows.append(cells)
    return rows


def documented_families(doc, r):
    """{name: (type, labels)} from the tables `| metric | type | labels | meaning |`."""
    out = {}
    for cells in table_rows(doc, ["metric", "type", "labels"]):
        if not r.check(len(cells) >= 4, f"{METRICS_DOC}: metric row with {len(cells)} cells: "
                                        f"{cells}"):
            continue
        names = re.findall(r"`([a-z_][a-z0-9_]*)`", cells[0])
        if not r.check(len(names) == 1, f"{METRICS_DOC}: want one metric name in {cells[0]!r}"):
            continue
        r.check(names[0] not in out, f"{METRICS_DOC}: {names[0]} documented twice")
        out[names[0]] = (cells[1].strip("`"), set(re.findall(r"`([a-z_]+)`:", cells[2])))
    return out


def compare_families(want, got, where, r):
    for name in sorted(set(want) - set(got)):
        r.check(False, f"{where}: the server exports {name} ({want[name][0]}), which "
                       f"{METRICS_DOC} does not document" if where == METRICS_DOC else
                f"{where}: {name} ({want[name][0]}) is missing")
    for name in sorted(set(got) - set(want)):
        r.check(False, f"{where}: {name} is not a metric the server exports (renamed or removed "
                       f"in {SERVER_SRC} or {KUBE_SRC}?)")
    for name in sorted(set(want) & set(got)):
        (wk, wl), (gk, gl) = want[name], got[name]
        r.check(wk == gk, f"{where}: {name} has type {gk}, the server exports a {wk}")
        r.check(wl == gl, f"{where}: {name} has labels {sorted(gl)}, the server exports "
                          f"{sorted(wl)}")


def heading_anchors(doc):
    """The anchors GitHub gives the Markdown headings of a page: the text lowercased, every
    character but letters, digits, spaces, `-` and `_` dropped, spaces made `-`; a repeated
    anchor gets -1, -2, ... Headings inside fenced code blocks are not headings."""
    anchors, seen, fenced = set(), {}, False
    for line in doc.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", lambda x: x.group(1) or "", m.group(1))
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def check_runbooks(rules, doc, r):
    """Every alert's runbook_url is RUNBOOK_BASE, `#`, and the anchor of the alert's own
    `### <alert>` section, which docs/metrics.md has."""
    base = RUNBOOK_BASE
    anchors = heading_anchors(doc)
    checked = 0
    for rule in rules:
        name = rule.get("alert")
        if not name:
            continue
        url = str((rule.get("annotations") or {}).get("runbook_url") or "").strip()
        if not r.check(url, f"{RULES}: {name}: no runbook_url annotation (want "
                            f"{base}#{name.lower()})"):
            continue
        page, _, anchor = url.partition("#")
        r.check(page == base, f"{RULES}: {name}: runbook_url {url}: want the page {base}, a "
                              "path in the repository (the chart's runbookBaseURL adds a URL)")
        r.check(anchor == name.lower(), f"{RULES}: {name}: runbook_url anchor #{anchor}, want "
                                        f"#{name.lower()}, the alert's own section")
        if r.check(anchor in anchors, f"{RULES}: {name}: runbook_url anchor #{anchor} is not a "
                                      f"heading of {METRICS_DOC}"):
            checked += 1
    print(f"runbooks: {checked} runbook_url anchors found in {METRICS_DOC}")


def documented_alerts(doc, r):
    """{alert: (severity, for)} from the table `| alert | severity | for | fires when |`, and
    the alert names of the `### ` headings under "## Alerts"."""
    table = {}
    for cells in table_rows(doc, ["alert", "severity", "for"]):
        names = re.findall(r"`?\[?(KubeRayTPUWebhook\w+)", cells[0])
        if r.check(len(cells) >= 4 and len(names) == 1,
                   f"{METRICS_DOC}: alert row {cells}: want one alert name and 4 cells"):
            table[names[0]] = (cells[1].strip("`"), cells[2].strip("`"))
    section = doc.split("\n## Alerts", 1)[-1].split("\n## ", 1)[0] if "\n## Alerts" in doc else ""
    r.check(section, f"{METRICS_DOC}: no \"## Alerts\" section")
    headings = re.findall(r"^### (KubeRayTPUWebhook\w+)\s*$", section, re.M)
    return table, headings


# ---------------------------------------------------------------------------------------------
# The rules

def load_rules(root, r):
    try:
        with open(os.path.join(root, RULES)) as f:
            data = yaml.safe_load(f)
        return [rule for g in data["groups"] for rule in g["rules"]]
    except (OSError, yaml.YAMLError, KeyError, TypeError) as e:
        r.check(False, f"{RULES}: cannot read its groups: {e}")
        return []


def run(cmd, cwd=None, timeout=120):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except FileNotFoundError:
        return 127, f"{cmd[0]}: not found (scripts/setup.sh installs Debian's prometheus package)"
    except subprocess.TimeoutExpired:
        return 124, f"{' '.join(cmd)}: timed out after {timeout} s"


def check_rules(root, promtool, r):
    rc, out = run([promtool, "check", "rules", os.path.join(root, RULES)])
    r.check(rc == 0, f"promtool check rules {RULES}:\n{out.strip()}")
    rc, out = run([promtool, "test", "rules", os.path.join(root, RULES_TEST)])
    r.check(rc == 0, f"promtool test rules {RULES_TEST}:\n{out.strip()}")

    rules = load_rules(root, r)
    alerts = {}
    for rule in rules:
        name = rule.get("alert")
        if not r.check(name, f"{RULES}: a rule that is not an alert: {rule.get('record')}"):
            continue
        r.check(name not in alerts, f"{RULES}: alert {name} defined twice")
        r.check(name.startswith("KubeRayTPUWebhook"), f"{RULES}: {name}: alert names start "
                                                      "with KubeRayTPUWebhook")
        sev = (rule.get("labels") or {}).get("severity")
        r.check(sev in SEVERITIES, f"{RULES}: {name}: severity {sev!r}, want one of "
                                   f"{sorted(SEVERITIES)}")
        ann = rule.get("annotations") or {}
        for key in ("summary", "description"):
            r.check(str(ann.get(key) or "").strip(), f"{RULES}: {name}: no {key} annotation")
        alerts[name] = (sev, rule.get("for", "0m"))

    try:
        with open(os.path.join(root, RULES_TEST)) as f:
            cases = [t for test in yaml.safe_load(f)["tests"]
                     for t in test.get("alert_rule_test", [])]
    except (OSError, yaml.YAMLError, KeyError, TypeError) as e:
        r.check(False, f"{RULES_TEST}: cannot read its tests: {e}")
        cases = []
    fires, silent = set(), set()
    for c in cases:
        name = c.get("alertname")
        r.check(name in alerts, f"{RULES_TEST}: a case for {name}, which {RULES} does not "
                                "define (it passes whatever the rules say)")
        (fires if c.get("exp_alerts") else silent).add(name)
    for name in sorted(alerts):
        r.check(name in fires, f"{RULES_TEST}: no case makes {name} fire")
        r.check(name in silent, f"{RULES_TEST}: no case checks that {name} stays silent")

    doc = read(root, METRICS_DOC)
    check_runbooks(rules, doc, r)
    table, headings = documented_alerts(doc, r)
    for name, (sev, dur) in sorted(alerts.items()):
        r.check(name in headings, f"{METRICS_DOC}: no \"### {name}\" under \"## Alerts\"")
        if r.check(name in table, f"{METRICS_DOC}: {name} is not in the alerts table"):
            r.check(table[name] == (sev, dur), f"{METRICS_DOC}: {name}: the table says severity "
                                               f"{table[name][0]}, for {table[name][1]}; the "
                                               f"rule has {sev}, {dur}")
    for name in sorted((set(table) | set(headings)) - set(alerts)):
        r.check(False, f"{METRICS_DOC}: documents alert {name}, which {RULES} does not define")
    print(f"rules: {len(alerts)} alerts, {len(cases)} test cases "
          f"({len(fires)} alerts made to fire, {len(silent)} kept silent)")


# ---------------------------------------------------------------------------------------------
# The dashboard

def dashboard_panels(panels):
    for p in panels:
        yield p
        yield from dashboard_panels(p.get("panels") or [])


def dashboard_queries(dash):
    """(where, expression) of every panel target and query variable."""
    for p in dashboard_panels(dash.get("panels") or []):
        for t in p.get("targets") or []:
            yield f"panel {p.get('id')} {p.get('title')!r} target {t.get('refId')}", t.get("expr")
    for v in (dash.get("templating") or {}).get("list") or []:
        if v.get("type") == "query":
            q = v.get("query")
            yield f"variable {v.get('name')}", q.get("query") if isinstance(q, dict) else q


def check_dashboard(root, promtool, families, r):
    try:
        dash = json.loads(read(root, DASHBOARD))
    except (OSError, ValueError) as e:
        r.check(False, f"{DASHBOARD}: not valid JSON: {e}")
        return
    r.check(isinstance(dash.get("uid"), str) and dash.get("title"), f"{DASHBOARD}: no uid/title")
    ids = []
    for p in dashboard_panels(dash.get("panels") or []):
        ids.append(p.get("id"))
        r.check(isinstance(p.get("id"), int), f"{DASHBOARD}: panel {p.get('title')!r} has id "
                                              f"{p.get('id')!r}, want an integer")
        r.check(isinstance(p.get("gridPos"), dict), f"{DASHBOARD}: panel {p.get('id')}: no "
                                                    "gridPos")
        if p.get("type") != "row":
            r.check(p.get("targets"), f"{DASHBOARD}: panel {p.get('id')} {p.get('title')!r} "
                                      "has no query")
    dups = sorted({i for i in ids if ids.count(i) > 1}, key=str)
    r.check(not dups, f"{DASHBOARD}: panel ids used more than once: {dups}")
    variables = {v.get("name") for v in (dash.get("templating") or {}).get("list") or []}

    rules, n = [], 0
    for where, expr in dashboard_queries(dash):
        if not r.check(isinstance(expr, str) and expr.strip(), f"{DASHBOARD}: {where}: no expr"):
            continue
        n += 1
        bad = unknown_metrics(expr, families)
        r.check(not bad, f"{DASHBOARD}: {where}: metrics the server does not export: {bad}")
        r.check(re.search(r"\bkuberay_tpu_webhook_", expr),
                f"{DASHBOARD}: {where}: selects no kuberay_tpu_webhook_ metric")
        undefined = set(re.findall(r"\$\{?(\w+)", expr)) - variables - GRAFANA_VARIABLES
        r.check(not undefined, f"{DASHBOARD}: {where}: undefined variables {sorted(undefined)}")
        promql = re.sub(r"\$\{?__\w+\}?", "5m", expr)
        promql = re.sub(r"\$\{?\w+\}?", ".*", promql)
        m = re.fullmatch(r"\s*label_values\((.*?)(?:,\s*\w+)?\)\s*", promql, re.S)
        if m:
            promql = m.group(1)
        rules.append({"record": f"dashboard:query_{n}", "expr": promql,
                      "labels": {"query": where}})
    for t in dashboard_panels(dash.get("panels") or []):
        ds = (t.get("datasource") or {}).get("uid", "")
        r.check(not ds.startswith("$") or ds.strip("${}") in variables,
                f"{DASHBOARD}: panel {t.get('id')}: data source {ds} is not a variable")
    check_promql(promtool, rules, DASHBOARD, r)
    print(f"dashboard: {len(ids)} panels, {n} queries")


def check_promql(promtool, rules, where, r):
    """promtool parses every expression (each a recording rule of a scratch rule file)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "queries.yaml")
        with open(path, "w") as f:
            yaml.safe_dump({"groups": [{"name": "queries", "rules": rules}]}, f)
        rc, out = run([promtool, "check", "rules", path])
        r.check(rc == 0, f"{where}: a query is not valid PromQL (promtool):\n{out.strip()}")


def check_doc_queries(root, promtool, families, r):
    """The ```promql blocks of docs/metrics.md: exported metrics only, valid PromQL."""
    blocks = re.findall(r"^```promql\n(.*?)^```", read(root, METRICS_DOC), re.M | re.S)
    r.check(blocks, f"{METRICS_DOC}: no ```promql examples")
    for i, expr in enumerate(blocks, 1):
        bad = unknown_metrics(expr, families)
        r.check(not bad, f"{METRICS_DOC}: query {i}: metrics the server does not export: {bad}")
    check_promql(promtool, [{"record": f"doc:query_{i}", "expr": e}
                            for i, e in enumerate(blocks, 1)], METRICS_DOC, r)
    print(f"{METRICS_DOC}: {len(blocks)} queries")


def check_names(root, promtool, r):
    families = exported_families(root, r)
    r.check(len(families) > 20, f"found only {len(families)} metric families in the source")
    compare_families(families, documented_families(read(root, METRICS_DOC), r), METRICS_DOC, r)
    for rule in load_rules(root, r):
        bad = unknown_metrics(str(rule.get("expr", "")), families)
        r.check(not bad, f"{RULES}: {rule.get('alert')}: metrics the server does not export: "
                         f"{bad}")
    for rel in [RULES_TEST] + sorted(os.path.join("docs", n) for n in os.listdir(
            os.path.join(root, "docs")) if n.endswith(".md")) + PROSE:
        if os.path.exists(os.path.join(root, rel)):
            # Prose may say process_ for other things; the test's series are all metrics.
            bad = [b for b in unknown_metrics(read(root, rel), families)
                   if rel == RULES_TEST or b.startswith("kuberay_tpu_webhook_")]
            r.check(not bad, f"{rel}: names metrics the server does not export: {bad}")
    check_dashboard(root, promtool, families, r)
    check_doc_queries(root, promtool, families, r)
    print(f"metrics: {len(families)} families exported, documented in {METRICS_DOC}")


# ---------------------------------------------------------------------------------------------
# The built server's /metrics

def parse_exposition(text):
    """{name: (type, labels)} of a Prometheus text exposition ("le" aside)."""
    fams = {}
    for line in text.splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            fams[m.group(1)] = (m.group(2), set())
    for line in text.splitlines():
        m = re.match(r"([a-zA-Z_:][\w:]*)(?:\{(.*)\})? ", line)
        if not m or line.startswith("#"):
            continue
        name = m.group(1)
        base = next((name[:-len(s)] for s in HISTOGRAM_SUFFIXES
                     if name.endswith(s) and fams.get(name[:-len(s)], ("",))[0] == "histogram"),
                    name)
        if base in fams:
            fams[base][1].update(set(re.findall(r'(\w+)="', m.group(2) or "")) - {"le"})
    return fams


def http_get(host, port, path, timeout=5):
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8", "replace")
    finally:
        conn.close()


def wait_for(pred, seconds, proc=None):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        if proc is not None and proc.poll() is not None:
            return None
        time.sleep(0.05)
    return None


def scrape_server(build_dir, tmp, r):
    """The /metrics text of the built server with legacy placement on (against the fake
    kube-apiserver), after one denied review so that denials_total has a sample."""
    webhook = os.path.join(build_dir, "cmd", "webhook", "kuberay-tpu-webhook")
    fake = os.path.join(build_dir, "test", "integration", "fakeapi", "fake-kube-apiserver")
    rc, out = run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                   "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                   "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                   "-keyout", os.path.join(tmp, "tls.key"), "-out", os.path.join(tmp, "tls.crt")])
    if not r.check(rc == 0, f"openssl could not make a certificate: {out}"):
        return None
    port_file = os.path.join(tmp, "fake-api.port")
    procs, logs = [], []
    try:
        log = open(os.path.join(tmp, "fake-api.log"), "wb")
        logs.append(log)
        procs.append(subprocess.Popen([fake, "--port-file", port_file, "--max-seconds", "120"],
                                      stdout=log, stderr=log, stdin=subprocess.DEVNULL))

        def api_port():
            try:
                with open(port_file) as f:
                    return int(f.read().strip() or 0)
            except (OSError, ValueError):
                return 0
        port = wait_for(api_port, 20, procs[0])
        if not r.check(port, "the fake kube-apiserver did not start"):
            return None
        kubeconfig = os.path.join(tmp, "kubeconfig")
        with open(kubeconfig, "w") as f:
            f.write("apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
                    f"clusters:\n- name: fake\n  cluster:\n    server: http://127.0.0.1:{port}\n"
                    "contexts:\n- name: fake\n  context: {cluster: fake, user: webhook}\n"
                    "users:\n- name: webhook\n  user: {}\n")
        log_path = os.path.join(tmp, "webhook.log")
        log = open(log_path, "wb")
        logs.append(log)
        procs.append(subprocess.Popen(
            [webhook, "--bind-address=127.0.0.1:0", "--health-address=127.0.0.1:0",
             f"--tls-cert-file={tmp}/tls.crt", f"--tls-private-key-file={tmp}/tls.key",
             "--legacy-indexing=on", f"--kube-config-path={kubeconfig}",
             "--namespace=ray-system", "--log-format=json", "--shutdown-timeout=1s"],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL))

        def serving():
            with open(log_path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    if '"msg":"serving"' in line:
                        return json.loads(line)
            return None
        line = wait_for(serving, 20, procs[1])
        if not r.check(line, "the webhook did not start:\n" + open(log_path).read()[-2000:]):
            return None
        health = int(line["health"].rsplit(":", 1)[1])
        https = int(line["https"].rsplit(":", 1)[1])
        ready = wait_for(lambda: http_get("127.0.0.1", health, "/readyz")[0] == 200, 20, procs[1])
        r.check(ready, "the webhook did not become ready (Pod list from the fake API)")
        # One denied review (wrong Content-Type): denials_total gets a sample and its labels.
        ctx = ssl.create_default_context(cafile=os.path.join(tmp, "tls.crt"))
        conn = http.client.HTTPSConnection("localhost", https, context=ctx, timeout=5)
        conn.request("POST", "/mutate", body=b"{}", headers={"Content-Type": "text/plain"})
        conn.getresponse().read()
        conn.close()
        status, text = http_get("127.0.0.1", health, "/metrics")
        r.check(status == 200, f"/metrics answered {status}")
        return text
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(5)
        for log in logs:
            log.close()


def check_exported(root, build_dir, r):
    for rel in (os.path.join("cmd", "webhook", "kuberay-tpu-webhook"),
                os.path.join("test", "integration", "fakeapi", "fake-kube-apiserver")):
        if not os.access(os.path.join(build_dir or "/nonexistent", rel), os.X_OK):
            print(f"SKIP: {rel} is not built in {build_dir}")
            return SKIP
    families = exported_families(root, r)
    with tempfile.TemporaryDirectory() as tmp:
        text = scrape_server(build_dir, tmp, r)
    if text is not None:
        live = parse_exposition(text)
        compare_families(families, live, "the running server's /metrics", r)
        print(f"/metrics: {len(live)} families, {len(text.splitlines())} lines")
    return None


# ---------------------------------------------------------------------------------------------
# Self-test: every check catches what it checks.

ALERT = "KubeRayTPUWebhookClaimDenials"
# (what breaks, mode, file, old text, new text, a phrase the failure must contain)
BREAKAGE = [
    ("a server metric renamed", "names", SERVER_SRC, 'full("placements_total")',
     'full("placement_total")', "kuberay_tpu_webhook_placement_total"),
    ("a legacy placement metric renamed", "names", KUBE_SRC, 'gauge("claim_denied_total"',
     'gauge("claims_denied_total"', "does not document"),
    ("a watch metric renamed", "names", KUBE_SRC, 'family("watch_restarts_total"',
     'family("watch_resumes_total"', "kuberay_tpu_webhook_kube_watch_restarts_total"),
    ("a label added to a metric", "names", SERVER_SRC, 'sample(out, name, "path=\\"labels\\""',
     'sample(out, name, "path=\\"labels\\",via=\\"x\\""', "labels ['path']"),
    ("a documented type wrong", "names", METRICS_DOC,
     "| `kuberay_tpu_webhook_ready` | gauge |", "| `kuberay_tpu_webhook_ready` | counter |",
     "has type counter"),
    ("a documented label missing", "names", METRICS_DOC, "`code`: ", "code: ",
     "labels ['webhook']"),
    ("a metric left out of the docs", "names", METRICS_DOC,
     "| `kuberay_tpu_webhook_connections_total` |", "| connections_total |", "does not document"),
    ("a documented metric that does not exist", "names", METRICS_DOC,
     "| `kuberay_tpu_webhook_build_info` |", "| `kuberay_tpu_webhook_build_version` |",
     "kuberay_tpu_webhook_build_version is not a metric"),
    ("docs prose names a metric that does not exist", "names", os.path.join("docs", "server.md"),
     "## Metrics\n", "## Metrics\n\n`kuberay_tpu_webhook_requests_seconds`\n",
     "kuberay_tpu_webhook_requests_seconds"),
    ("a rule on a metric that does not exist", "names", RULES,
     "kuberay_tpu_webhook_legacy_claim_denied_total", "kuberay_tpu_webhook_legacy_claim_denials",
     "kuberay_tpu_webhook_legacy_claim_denials"),
    ("a dashboard query on a metric that does not exist", "names", DASHBOARD,
     "kuberay_tpu_webhook_connections_open{", "kuberay_tpu_webhook_connection_open{",
     "kuberay_tpu_webhook_connection_open"),
    ("a dashboard panel id used twice", "names", DASHBOARD, '"id": 3,', '"id": 2,',
     "panel ids used more than once: [2]"),
    ("the dashboard not JSON", "names", DASHBOARD, '"uid": "kuberay-tpu-webhook",',
     '"uid": "kuberay-tpu-webhook",,', "not valid JSON"),
    ("a dashboard query not PromQL", "names", DASHBOARD, "sum by (path) (rate(",
     "sum by (path) (rate((", "not valid PromQL"),
    ("a dashboard query with an undefined variable", "names", DASHBOARD,
     'sum by (path) (rate(kuberay_tpu_webhook_placements_total{namespace=~\\"$namespace\\"',
     'sum by (path) (rate(kuberay_tpu_webhook_placements_total{namespace=~\\"$cluster\\"',
     "undefined variables ['cluster']"),
    ("a documented query not PromQL", "names", METRICS_DOC,
     "sum(kuberay_tpu_webhook_ready)\n", "sum(kuberay_tpu_webhook_ready\n",
     f"{METRICS_DOC}: a query is not valid PromQL"),
    ("a rule not PromQL", "rules", RULES, "absent(kuberay_tpu_webhook_build_info)",
     "absent(kuberay_tpu_webhook_build_info", "promtool check rules"),
    ("an alert threshold changed", "rules", RULES, "> 0.05", "> 0.5", "promtool test rules"),
    ("an alert's text changed", "rules", RULES, "keeps denying worker Pods as retryable",
     "denies worker Pods", "promtool test rules"),
    ("an alert renamed without its tests", "rules", RULES, f"alert: {ALERT}\n",
     f"alert: {ALERT}Now\n", f"no case makes {ALERT}Now fire"),
    ("a test case for an alert that does not exist", "rules", RULES_TEST,
     "eval_time: 15m\n        alertname: KubeRayTPUWebhookServerBusy\n        exp_alerts: []",
     "eval_time: 15m\n        alertname: KubeRayTPUWebhookServerBsy\n        exp_alerts: []",
     "a case for KubeRayTPUWebhookServerBsy"),
    ("an alert without severity", "rules", RULES, "severity: info", "team: ml",
     "severity None"),
    ("the docs give an alert another severity", "rules", METRICS_DOC,
     f"| [`{ALERT}`](#{ALERT.lower()}) | warning |", f"| [`{ALERT}`](#{ALERT.lower()}) | info |",
     "the table says severity info"),
    ("an alert not explained in the docs", "rules", METRICS_DOC, f"### {ALERT}\n",
     f"### The claim denials alert\n", f"no \"### {ALERT}\""),
    ("an alert without a runbook_url", "rules", RULES,
     f"\n          runbook_url: {RUNBOOK_BASE}#{ALERT.lower()}\n", "\n",
     f"{ALERT}: no runbook_url annotation"),
    ("a runbook_url to another alert's section", "rules", RULES,
     f"#{ALERT.lower()}\n", "#kuberaytpuwebhookclaimapierrors\n",
     f"{ALERT}: runbook_url anchor #kuberaytpuwebhookclaimapierrors, want"),
    ("a runbook_url whose section the docs lost", "rules", METRICS_DOC,
     "### KubeRayTPUWebhookSlotConflict\n", "### Slot conflicts\n",
     "runbook_url anchor #kuberaytpuwebhookslotconflict is not a heading"),
    ("a runbook_url made a URL again", "rules", RULES,
     f"runbook_url: {RUNBOOK_BASE}#{ALERT.lower()}\n",
     f"runbook_url: https://example.com/blob/v0.3.0/{RUNBOOK_BASE}#{ALERT.lower()}\n",
     f"{ALERT}: runbook_url https://example.com/blob/v0.3.0/{RUNBOOK_BASE}#"),
    ("a runbook_url to another page", "rules", RULES,
     f"runbook_url: {RUNBOOK_BASE}#{ALERT.lower()}\n",
     f"runbook_url: docs/server.md#{ALERT.lower()}\n", "want the page docs/metrics.md"),
]


def copy_tree(root, dst):
    """The files the checks read, and only those."""
    docs = [os.path.join("docs", n) for n in os.listdir(os.path.join(root, "docs"))
            if n.endswith(".md")]
    for rel in [SERVER_SRC, KUBE_SRC, RULES, DASHBOARD, RULES_TEST] + docs + PROSE:
        if os.path.exists(os.path.join(root, rel)):
            os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
            shutil.copy(os.path.join(root, rel), os.path.join(dst, rel))


def run_mode(mode, root, promtool):
    return run([sys.executable, os.path.abspath(__file__), "--root", root, f"--{mode}",
                "--promtool", promtool], timeout=200)


def exposition_self_test(root):
    """parse_exposition and compare_families, on text made from the source's families: equal
    passes; a family left out, or a label renamed, fails."""
    r = dc.Report()
    fams = exported_families(root, r)

    def text(families):
        out = []
        for name, (kind, labels) in sorted(families.items()):
            out.append(f"# HELP {name} x\n# TYPE {name} {kind}")
            lab = ",".join(f'{l}="v"' for l in sorted(labels))
            for s in (HISTOGRAM_SUFFIXES if kind == "histogram" else ("",)):
                le = ('le="+Inf",' if s == "_bucket" else "")
                out.append(f"{name}{s}{{{le}{lab}}} 1" if lab or le else f"{name}{s} 1")
        return "\n".join(out) + "\n"
    problems = []
    ok = dc.Report()
    compare_families(fams, parse_exposition(text(fams)), "exposition", ok)
    if ok.failures or r.failures:
        problems.append(f"FAIL: /metrics made from the source does not match it: "
                        f"{(r.failures + ok.failures)[:3]}")
    name = "kuberay_tpu_webhook_denials_total"
    for what, fams2 in (
            ("a family missing from /metrics", {k: v for k, v in fams.items() if k != name}),
            ("a label renamed on /metrics", dict(fams, **{name: ("counter", {"webhook", "why"})}))):
        bad = dc.Report()
        compare_families(fams, parse_exposition(text(fams2)), "exposition", bad)
        problems.append(f"caught: {what}: {bad.failures[0]}" if bad.failures
                        else f"FAIL: {what}: --exported's comparison passes")
    return problems


def self_test(root, promtool):
    with tempfile.TemporaryDirectory() as tmp:
        clean = os.path.join(tmp, "clean")
        copy_tree(root, clean)
        for mode in ("rules", "names"):
            rc, out = run_mode(mode, clean, promtool)
            if rc != 0:
                print(f"FAIL: the unbroken copy fails --{mode}:\n{out}")
                return 1

        def case(i):
            what, mode, rel, old, new, phrase = BREAKAGE[i]
            work = os.path.join(tmp, f"case{i}")
            copy_tree(root, work)
            path = os.path.join(work, rel)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            if text.count(old) != 1:
                return (f"FAIL: {what}: {rel} no longer contains {old!r} exactly once; "
                        "update the case")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text.replace(old, new))
            rc, out = run_mode(mode, work, promtool)
            shutil.rmtree(work, ignore_errors=True)
            if rc == 0:
                return f"FAIL: {what}: --{mode} still passes"
            if phrase not in out:
                return f"FAIL: {what}: --{mode} fails, but without {phrase!r}:\n{out}"
            line = next((ln for ln in out.splitlines() if phrase in ln), "")
            return f"caught: {what}: {line.strip()[:140]}"

        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            results = list(pool.map(case, range(len(BREAKAGE))))
    results += exposition_self_test(root)
    for line in results:
        print(line)
    missed = sum(1 for line in results if line.startswith("FAIL"))
    print(f"breakage cases: {len(results)}, missed: {missed}")
    return 1 if missed else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--promtool", default=shutil.which("promtool") or "promtool")
    ap.add_argument("--build-dir")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--rules", action="store_true")
    mode.add_argument("--names", action="store_true")
    mode.add_argument("--exported", action="store_true")
    mode.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    if args.self_test:
        return self_test(root, args.promtool)
    r = dc.Report()
    if args.rules:
        check_rules(root, args.promtool, r)
        return r.finish("alert rules")
    if args.names:
        check_names(root, args.promtool, r)
        return r.finish("metric names")
    skipped = check_exported(root, args.build_dir, r)
    return skipped if skipped is not None else r.finish("exported metrics")


if __name__ == "__main__":
    sys.exit(main())
