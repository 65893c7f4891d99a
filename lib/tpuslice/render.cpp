#include "tpuslice/render.h"

#include <algorithm>

#include "base/text/text.h"

namespace tpuslice {
namespace {

using Rows = std::vector<std::vector<std::string>>;

std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }

std::string unchecked_text(const Report& r) {
  std::string out;
  for (const std::string& u : r.unchecked) {
    out += "Not checked: " + u + "\n";
  }
  return out;
}

json pod_json(const PodRow& p) {
  return {{"name", p.name},          {"phase", p.phase},        {"ready", p.ready},
          {"node", p.node},          {"nodePool", p.node_pool}, {"nodePoolFrom", p.pool_from},
          {"workerId", p.worker_id}, {"hostname", p.hostname},  {"tpuName", p.tpu_name},
          {"topology", p.topology},  {"webhookEnv", p.has_env}};
}

}  // namespace

json slices_json(const Report& report) {
  json slices = json::array();
  for (const SliceStatus& s : report.slices) {
    json pods = json::array();
    for (const PodRow& p : s.pods) {
      pods.push_back(pod_json(p));
    }
    slices.push_back({{"namespace", s.ns},
                      {"rayCluster", s.cluster},
                      {"group", s.group},
                      {"replica", s.replica},
                      {"hosts", s.hosts},
                      {"verdict", s.verdict},
                      {"pods", std::move(pods)}});
  }
  return {{"slices", std::move(slices)}, {"unchecked", report.unchecked}};
}

json findings_json(const Report& report) {
  json findings = json::array();
  for (const Finding& f : report.findings) {
    findings.push_back({{"check", f.check},
                        {"namespace", f.ns},
                        {"rayCluster", f.cluster},
                        {"group", f.group},
                        {"replica", f.replica},
                        {"message", f.message},
                        {"evidence", f.evidence},
                        {"command", f.command}});
  }
  return {{"findings", std::move(findings)}, {"unchecked", report.unchecked}};
}

std::string status_table(const Report& report) {
  std::string out;
  if (report.slices.empty()) {
    out += "No TPU worker Pods found.\n";
  }
  for (const SliceStatus& s : report.slices) {
    out += "SLICE " + s.ns + "/" + s.cluster + " group " + s.group + " replica " +
           (s.replica < 0 ? std::string("?") : std::to_string(s.replica)) + ": " + s.verdict +
           " (" + std::to_string(s.pods.size()) + "/" + std::to_string(s.hosts) + " Pods)\n";
    Rows rows = {{"POD", "PHASE", "READY", "NODE", "NODE_POOL", "TPU_WORKER_ID", "HOSTNAME",
                  "TPU_NAME", "TOPOLOGY"}};
    for (const PodRow& p : s.pods) {
      rows.push_back({p.name, or_dash(p.phase), p.ready ? "true" : "false", or_dash(p.node),
                      or_dash(p.node_pool), or_dash(p.worker_id), or_dash(p.hostname),
                      or_dash(p.tpu_name), or_dash(p.topology)});
    }
    out += webhook::aligned_columns(rows, "  ");
  }
  if (!report.findings.empty()) {
    out += std::to_string(report.findings.size()) +
           " findings: run kubectl tpu-slice check for the evidence and the fix\n";
  }
  return out + unchecked_text(report);
}

std::string check_table(const Report& report) {
  std::string out;
  for (const Finding& f : report.findings) {
    out += "[" + f.check + "] " + f.message + "\n";
    for (const std::string& e : f.evidence) {
      out += "    " + e + "\n";
    }
    if (!f.command.empty()) {
      out += "    fix or see more: " + f.command + "\n";
    }
  }
  if (report.findings.empty()) {
    out += "No findings: " + std::to_string(report.slices.size()) +
           " slices checked, each consistent.\n";
  }
  return out + unchecked_text(report);
}

}  // namespace tpuslice
