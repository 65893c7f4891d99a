#pragma once
// The Prometheus text exposition format, written by hand: the server's /metrics and the Kubernetes
// watches' and claims' metrics both go through these.
//
//   std::string out;
//   webhook::prometheus::family(out, "kuberay_tpu_webhook_ready", "gauge", "1 when ready.");
//   webhook::prometheus::sample(out, "kuberay_tpu_webhook_ready", "", "1");
//   webhook::prometheus::sample(out, "x_total", "resource=\"pods\"", std::to_string(n));

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace webhook::prometheus {

// The # HELP and # TYPE lines of a metric family.
inline void family(std::string& out, std::string_view name, std::string_view type,
                   std::string_view help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

// One sample line: `name{labels} value`, or `name value` without labels.
inline void sample(std::string& out, std::string_view name, std::string_view labels,
                   std::string_view value) {
  out += name;
  if (!labels.empty()) {
    out += '{';
    out += labels;
    out += '}';
  }
  out += ' ';
  out += value;
  out += '\n';
}

// A label value escaped per the text format: backslash, double quote and newline.
inline std::string escape_label(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// The shortest decimal that reads back as `v` (0.00025, not 0.00025000000000000001).
inline std::string number(double v) {
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) {
      break;
    }
  }
  return buf;
}

}  // namespace webhook::prometheus
