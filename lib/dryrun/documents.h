#pragma once
// Reading Kubernetes objects from YAML or JSON text, as webhook-dryrun's inputs.
//
//   webhook::Result<std::vector<json>> docs = dryrun::parse_documents(text);
//   // multi-document YAML gives one json per non-empty document
//
// YAML scalars are typed as kubectl types them (YAML 1.1 booleans such as `yes` included);
// quoted scalars stay strings. Inputs are bounded: nesting deeper than admission::kMaxJsonDepth
// and YAML aliases that expand to far more values than the text holds are refused, so an
// "alias bomb" fails fast instead of exhausting memory.

#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "base/status/result.h"

namespace dryrun {

using json = nlohmann::json;

// Parses `text`: JSON when its first non-space character is '{' or '[', else YAML (one or more
// documents; empty documents are skipped). InvalidArgument with a line/column and the problem
// for malformed text, binary data or a non-string map key; ResourceExhausted for the bounds.
webhook::Result<std::vector<json>> parse_documents(std::string_view text);

// Whether `text` written as a plain (unquoted) YAML scalar would read back as this string, and
// not as null, a boolean or a number ("4", "true", "on", "" must be quoted).
bool reads_back_as_string(const std::string& text);

}  // namespace dryrun
