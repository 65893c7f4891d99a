#pragma once
// How webhook-dryrun prints: objects as YAML, and the slice table of a RayCluster.
//
//   std::cout << dryrun::to_yaml(pod);

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "podpatch/placement.h"

namespace dryrun {

using json = nlohmann::json;

// `value` as block YAML that reads back (with kubectl or parse_documents) as the same JSON:
// strings that would read as numbers, booleans or null are quoted.
std::string to_yaml(const json& value);

// One row per admitted worker Pod.
struct TableRow {
  int ordinal = 0;  // creation order, from 1
  std::string group;
  podpatch::Slot slot;
  json pod;  // the mutated Pod
};

// One header, then one line per row. Columns: #, POD (pod_display_name), GROUP, REPLICA, HOST,
// TPU_WORKER_ID, HOSTNAME, TPU_NAME, TORCH_TPU_TOPOLOGY, FIRST_PEER (the first
// TORCH_TPU_SLICEBUILDER_ADDRESSES entry), and MEGASCALE (MEGASCALE_SLICE_ID/MEGASCALE_NUM_SLICES)
// when a row is multi-slice. Values come from the mutated Pods' TPU containers; several
// containers' IDs are comma-joined; "-" when unset. Columns are padded to align.
// The Pod's metadata.name, else its generateName (a Pod KubeRay is about to create), else "-".
std::string pod_display_name(const json& pod);

std::string format_table(const std::vector<TableRow>& rows);

// One row's cells, read from its mutated Pod, without the Pod: what a table of many Pods keeps
// (format_table of these is format_table of the rows they were read from). FIRST_PEER is, when
// the Pod carries no TORCH_TPU_SLICEBUILDER_ADDRESSES but TORCH_TPU_BASE_PORT (docs/spec.md M8.2),
// the first address TorchTPU derives, marked "(derived)".
struct RowCells {
  std::vector<std::string> cells;  // the columns up to FIRST_PEER
  std::string megascale;           // "SLICE_ID/NUM_SLICES" when multi-slice, else ""
};
RowCells row_cells(const TableRow& row);
std::string format_table(const std::vector<RowCells>& rows);

// dump_json(List of the items, 2) + "\n" and to_yaml(List of the items), written one item at a
// time: begin, item() for each, end.
class ListWriter {
 public:
  ListWriter(std::ostream& out, bool as_json) : out_(out), json_(as_json) {}
  void item(const json& value);
  void end();

 private:
  std::ostream& out_;
  bool json_;
  bool any_ = false;
};

}  // namespace dryrun
