// libFuzzer target (d): the Kubernetes watch-stream and list decoders, fed in chunks as the API
// server's bytes arrive, into the SliceRegistry the Pod watch feeds. The first byte sets the chunk
// size; the rest is read once as a watch stream (JSON lines) and once as a list body.
// Property: never a crash, hang or unbounded buffer; every decoded event reaches the registry.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kube/clock.h"
#include "kube/live_sources.h"
#include "kube/reflector.h"
#include "kube/slice_registry.h"
#include "kube/slot_allocators.h"
#include "kube/stream.h"

namespace {

constexpr std::size_t kMaxObject = 64 << 10;

template <class Feed>
void in_chunks(std::string_view bytes, std::size_t chunk, Feed feed) {
  for (std::size_t i = 0; i < bytes.size(); i += chunk) {
    if (!feed(bytes.substr(i, chunk))) {
      return;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  std::size_t chunk = 1 + data[0] % 64;
  std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  kube::SystemClock clock;
  kube::SliceRegistry registry(clock);
  kube::PodFeed feed(registry);

  feed.list_begin();
  kube::ListScanner list(kMaxObject, [&](nlohmann::json item) {
    feed.listed(item);
    return webhook::Status();
  });
  bool list_ok = true;
  in_chunks(body, chunk, [&](std::string_view c) { return (list_ok = list.feed(c).ok()); });
  if (list_ok && list.finish().ok()) {
    feed.list_end();
  } else {
    feed.list_abort();
  }

  kube::LineSplitter lines(kMaxObject);
  in_chunks(body, chunk, [&](std::string_view c) {
    return lines
        .feed(c,
              [&](std::string_view line) -> webhook::Status {
                webhook::Result<kube::WatchEvent> ev = kube::decode_watch_event(line);
                if (!ev) {
                  return ev.error();
                }
                if (ev->kind == kube::WatchEvent::Kind::kObject) {
                  feed.event(ev->type, ev->object);
                }
                return webhook::Status();
              })
        .ok();
  });
  if (lines.pending() > kMaxObject) {
    __builtin_trap();  // the splitter must never buffer past its bound
  }
  // The registry still answers, and placement over it too.
  (void)registry.holders({"default", "c", "g"});
  kube::LocalSlotAllocator pods(registry);
  (void)pods.place({"default", "c", "g"}, 4, /*dry_run=*/true);
  return 0;
}
