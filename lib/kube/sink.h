#pragma once
// What a list+watch of one kind of object tells the state it feeds: a complete list, then watch
// events. The Reflector (kube/reflector.h) calls it from its thread with what the API server
// sends; kube::ListedCluster (kube/listed_cluster.h) with objects given up front, as one list.
//
//   sink.list_begin();
//   for (const nlohmann::json& object : items) sink.listed(object);
//   sink.list_end();                                  // the listed objects are the whole state
//   sink.event(kube::EventType::kDeleted, object);    // then changes, one at a time

#include <nlohmann/json.hpp>

namespace kube {

enum class EventType { kAdded, kModified, kDeleted };

class Sink {
 public:
  virtual ~Sink() = default;
  // A list begins; its objects come through listed(), then list_end() makes them the whole
  // state. list_abort() drops them (the list failed; the previous state stays).
  virtual void list_begin() = 0;
  virtual void listed(const nlohmann::json& object) = 0;
  virtual void list_end() = 0;
  virtual void list_abort() = 0;
  virtual void event(EventType type, const nlohmann::json& object) = 0;
  // Whether a watch stream is established.
  virtual void watch_connected(bool /*connected*/) {}
};

}  // namespace kube
