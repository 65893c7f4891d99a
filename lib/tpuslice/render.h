#pragma once
// How kubectl-tpu_slice prints a Report: `status` shows the slices, `check` the findings, each as
// a table (for people), JSON or YAML (for scripts; the same fields in both).

#include <nlohmann/json.hpp>
#include <string>

#include "tpuslice/inspect.h"

namespace tpuslice {

json slices_json(const Report& report);    // {"slices": [...], "unchecked": [...]}
json findings_json(const Report& report);  // {"findings": [...], "unchecked": [...]}

std::string status_table(const Report& report);
std::string check_table(const Report& report);

}  // namespace tpuslice
