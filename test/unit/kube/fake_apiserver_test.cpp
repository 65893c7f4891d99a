// The fake kube-apiserver's namespaced objects over real HTTP on 127.0.0.1: kube-apiserver's
// write semantics for Leases and Pods, watch events, and the faults tests inject.
#include "fake_apiserver.h"

#include <httplib.h>

#include <catch2/catch.hpp>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "kube_support.h"

using nlohmann::json;
using testing::eventually;
using testing::FakeApiServer;

namespace {

const std::string kLeases = "/apis/coordination.k8s.io/v1/namespaces/ns1/leases";
const std::string kPods = "/api/v1/namespaces/ns1/pods";

struct Client {
  explicit Client(const FakeApiServer& api, const std::string& token = "")
      : http("127.0.0.1", api.port()) {
    http.set_connection_timeout(std::chrono::seconds(2));
    http.set_read_timeout(std::chrono::seconds(5));
    if (!token.empty()) {
      http.set_bearer_token_auth(token);
    }
  }

  struct Answer {
    int status = 0;
    json body;
  };
  static Answer answer(const httplib::Result& r) {
    REQUIRE(r);
    json body = json::parse(r->body, nullptr, false);
    return {r->status, body};
  }
  Answer get(const std::string& path) { return answer(http.Get(path)); }
  Answer post(const std::string& path, const json& body) {
    return answer(http.Post(path, body.dump(), "application/json"));
  }
  Answer put(const std::string& path, const json& body) {
    return answer(http.Put(path, body.dump(), "application/json"));
  }
  Answer patch(const std::string& path, const json& body,
               const std::string& type = "application/merge-patch+json") {
    return answer(http.Patch(path, body.dump(), type));
  }
  Answer del(const std::string& path, const json& options = nullptr) {
    if (options.is_null()) {
      return answer(http.Delete(path));
    }
    return answer(http.Delete(path, options.dump(), "application/json"));
  }

  // Reads a watch until `n` events arrived (or it ended); the events in order.
  std::vector<json> watch(const std::string& path, std::size_t n, httplib::Error* error = nullptr) {
    std::vector<json> events;
    std::string buffer;
    httplib::Result r = http.Get(path, [&](const char* data, std::size_t len) {
      buffer.append(data, len);
      for (std::size_t nl; (nl = buffer.find('\n')) != std::string::npos;) {
        events.push_back(json::parse(buffer.substr(0, nl)));
        buffer.erase(0, nl + 1);
      }
      return events.size() < n;
    });
    if (error != nullptr) {
      *error = r.error();
    }
    return events;
  }

  httplib::Client http;
};

json lease(const std::string& name, const std::string& holder) {
  return {{"apiVersion", "coordination.k8s.io/v1"},
          {"kind", "Lease"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"holderIdentity", holder},
            {"leaseDurationSeconds", 15},
            {"renewTime", "2025-05-01T10:00:00.000000Z"}}}};
}

json pod(const std::string& name, const std::string& app = "a") {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"labels", {{"app", app}}}}},
          {"spec", {{"containers", json::array({{{"name", "c"}, {"image", "busybox"}}})}}}};
}

std::string rv_of(const json& object) {
  return object["metadata"]["resourceVersion"].get<std::string>();
}

json conflict_status(const std::string& name, const std::string& why) {
  return {{"kind", "Status"},
          {"apiVersion", "v1"},
          {"metadata", json::object()},
          {"status", "Failure"},
          {"message",
           "Operation cannot be fulfilled on leases.coordination.k8s.io \"" + name + "\": " + why},
          {"reason", "Conflict"},
          {"details", {{"name", name}, {"group", "coordination.k8s.io"}, {"kind", "leases"}}},
          {"code", 409}};
}

// Percent-encodes a query parameter's value.
std::string encode(const std::string& value) {
  std::string out;
  for (char c : value) {
    auto ch = static_cast<unsigned char>(c);
    if (std::isalnum(ch) != 0 || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out += c;
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned>(ch));
      out += buf;
    }
  }
  return out;
}

const char* const kModified =
    "the object has been modified; please apply your changes to the latest version and try again";

}  // namespace

TEST_CASE("FakeApiServer: a Lease is created once, then read back; a missing one is NotFound") {
  FakeApiServer api({});
  Client c(api);
  std::int64_t before = api.resource_version();
  Client::Answer created = c.post(kLeases, lease("leader", "a"));
  REQUIRE(created.status == 201);
  const json& md = created.body["metadata"];
  CHECK(md["name"] == "leader");
  CHECK(md["namespace"] == "ns1");
  CHECK(std::stoll(rv_of(created.body)) == before + 1);
  CHECK(std::regex_match(
      md["uid"].get<std::string>(),
      std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")));
  CHECK(std::regex_match(md["creationTimestamp"].get<std::string>(),
                         std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
  CHECK(created.body["kind"] == "Lease");
  CHECK(created.body["apiVersion"] == "coordination.k8s.io/v1");
  CHECK(created.body["spec"]["holderIdentity"] == "a");

  Client::Answer again = c.post(kLeases, lease("leader", "b"));
  CHECK(again.status == 409);
  CHECK(again.body["reason"] == "AlreadyExists");
  CHECK(again.body["message"] == "leases.coordination.k8s.io \"leader\" already exists");
  CHECK(again.body["details"]["name"] == "leader");

  Client::Answer got = c.get(kLeases + "/leader");
  CHECK(got.status == 200);
  CHECK(got.body == created.body);
  // Another namespace holds no such Lease.
  CHECK(c.get("/apis/coordination.k8s.io/v1/namespaces/ns2/leases/leader").status == 404);

  Client::Answer missing = c.get(kLeases + "/x");
  CHECK(missing.status == 404);
  CHECK(missing.body == json::parse(R"({"kind":"Status","apiVersion":"v1","metadata":{},
      "status":"Failure","message":"leases.coordination.k8s.io \"x\" not found",
      "reason":"NotFound","details":{"name":"x","group":"coordination.k8s.io","kind":"leases"},
      "code":404})"));
  // The C++ view agrees.
  REQUIRE(api.get("leases", "ns1", "leader").has_value());
  CHECK(*api.get("leases", "ns1", "leader") == created.body);
  CHECK(api.objects("leases").size() == 1);
  CHECK(api.creates("leases") == 1);
  CHECK(api.write_stats("leases").already_exists == 1);
}

TEST_CASE("FakeApiServer: create checks the body as kube-apiserver does") {
  FakeApiServer api({});
  Client c(api);

  json with_rv = lease("a", "x");
  with_rv["metadata"]["resourceVersion"] = "5";
  Client::Answer r = c.post(kLeases, with_rv);
  CHECK(r.status == 400);
  CHECK(r.body["reason"] == "BadRequest");
  CHECK(r.body["message"] == "resourceVersion should not be set on objects to be created");

  json other_ns = lease("a", "x");
  other_ns["metadata"]["namespace"] = "ns2";
  r = c.post(kLeases, other_ns);
  CHECK(r.status == 400);
  CHECK(r.body["message"] ==
        "the namespace of the provided object does not match the namespace sent on the request");

  json wrong_kind = lease("a", "x");
  wrong_kind["kind"] = "Pod";
  CHECK(c.post(kLeases, wrong_kind).status == 400);
  json wrong_version = lease("a", "x");
  wrong_version["apiVersion"] = "coordination.k8s.io/v1beta1";
  CHECK(c.post(kLeases, wrong_version).status == 400);

  // Not MicroTime (six fractional digits): the decoder refuses it.
  json bad_time = lease("a", "x");
  bad_time["spec"]["renewTime"] = "2025-05-01T10:00:00Z";
  r = c.post(kLeases, bad_time);
  CHECK(r.status == 400);
  CHECK_THAT(r.body["message"].get<std::string>(),
             Catch::Contains("2006-01-02T15:04:05.000000Z07:00"));
  json bad_duration = lease("a", "x");
  bad_duration["spec"]["leaseDurationSeconds"] = 0;
  r = c.post(kLeases, bad_duration);
  CHECK(r.status == 422);
  CHECK(r.body["reason"] == "Invalid");

  json bad_name = lease("Not_A_Name", "x");
  CHECK(c.post(kLeases, bad_name).status == 422);
  json no_name = lease("", "x");
  no_name["metadata"].erase("name");
  r = c.post(kLeases, no_name);
  CHECK(r.status == 422);
  CHECK_THAT(r.body["message"].get<std::string>(),
             Catch::Contains("name or generateName is required"));
  CHECK(api.objects("leases").empty());
  CHECK(api.writes("leases") == 0);
  CHECK(api.write_attempts("leases") == 8);

  // generateName gets five random characters; kind and apiVersion default to the resource's.
  json generated = {{"metadata", {{"generateName", "lock-"}}},
                    {"spec", {{"renewTime", "2025-05-01T12:00:00.123456+02:00"}}}};
  r = c.post(kLeases, generated);
  REQUIRE(r.status == 201);
  CHECK(std::regex_match(r.body["metadata"]["name"].get<std::string>(),
                         std::regex("lock-[a-z0-9]{5}")));
  CHECK(r.body["kind"] == "Lease");
  CHECK(r.body["spec"]["renewTime"] == "2025-05-01T10:00:00.123456Z");  // stored in UTC
}

TEST_CASE("FakeApiServer: PUT is optimistic: a stale resourceVersion is a Conflict") {
  FakeApiServer api({});
  Client c(api);
  json first = c.post(kLeases, lease("leader", "a")).body;

  json renewed = first;
  renewed["spec"]["renewTime"] = "2025-05-01T10:00:05.000000Z";
  Client::Answer r = c.put(kLeases + "/leader", renewed);
  REQUIRE(r.status == 200);
  json second = r.body;
  CHECK(std::stoll(rv_of(second)) > std::stoll(rv_of(first)));
  CHECK(second["metadata"]["uid"] == first["metadata"]["uid"]);
  CHECK(second["metadata"]["creationTimestamp"] == first["metadata"]["creationTimestamp"]);
  CHECK(second["spec"]["renewTime"] == "2025-05-01T10:00:05.000000Z");

  // Another candidate still holding the first version loses.
  json stale = first;
  stale["spec"]["holderIdentity"] = "b";
  r = c.put(kLeases + "/leader", stale);
  CHECK(r.status == 409);
  CHECK(r.body == conflict_status("leader", kModified));
  CHECK(c.get(kLeases + "/leader").body == second);

  // A Lease update must name its resourceVersion (the Lease strategy allows no unconditional one).
  json unconditional = second;
  unconditional["metadata"].erase("resourceVersion");
  r = c.put(kLeases + "/leader", unconditional);
  CHECK(r.status == 422);
  CHECK(r.body["message"] ==
        "leases.coordination.k8s.io \"leader\" is invalid: metadata.resourceVersion: Invalid "
        "value: 0x0: must be specified for an update");

  // The body's name must be the URL's; a foreign uid fails the precondition.
  CHECK(c.put(kLeases + "/other", second).status == 400);
  json foreign_uid = second;
  foreign_uid["metadata"]["uid"] = "00000000-0000-4000-8000-000000000000";
  r = c.put(kLeases + "/leader", foreign_uid);
  CHECK(r.status == 409);
  CHECK(r.body["reason"] == "Conflict");

  // A write that changes nothing keeps the resourceVersion and makes no event.
  std::int64_t rv = api.resource_version();
  r = c.put(kLeases + "/leader", second);
  CHECK(r.status == 200);
  CHECK(r.body == second);
  CHECK(api.resource_version() == rv);

  // Leases may be created by PUT; Pods may not.
  r = c.put(kLeases + "/fresh", lease("fresh", "a"));
  CHECK(r.status == 201);
  CHECK(r.body["metadata"].contains("uid"));
  json p = pod("p");
  CHECK(c.put(kPods + "/p", p).status == 404);

  FakeApiServer::WriteStats st = api.write_stats("leases");
  CHECK(st.conflicts == 2);
  CHECK(st.updates == 2);
  CHECK(st.creates == 2);
  CHECK(st.writes == 4);
}

TEST_CASE("FakeApiServer: PATCH by merge patch and JSON patch, conditional on resourceVersion") {
  FakeApiServer api({});
  Client c(api);
  json first = c.post(kLeases, lease("leader", "a")).body;
  std::string path = kLeases + "/leader";

  Client::Answer r = c.patch(path, {{"spec", {{"holderIdentity", "b"}, {"leaseTransitions", 1}}}});
  REQUIRE(r.status == 200);
  CHECK(r.body["spec"]["holderIdentity"] == "b");
  CHECK(r.body["spec"]["leaseTransitions"] == 1);
  CHECK(r.body["spec"]["leaseDurationSeconds"] == 15);
  std::string rv = rv_of(r.body);
  CHECK(rv != rv_of(first));

  // A resourceVersion in the patch makes it conditional.
  r = c.patch(path, {{"metadata", {{"resourceVersion", rv_of(first)}}},
                     {"spec", {{"holderIdentity", "c"}}}});
  CHECK(r.status == 409);
  CHECK(r.body == conflict_status("leader", kModified));
  r = c.patch(path, {{"metadata", {{"resourceVersion", rv}}}, {"spec", {{"holderIdentity", "c"}}}});
  CHECK(r.status == 200);
  CHECK(r.body["spec"]["holderIdentity"] == "c");

  // RFC 6902: a failed test changes nothing.
  json test_then_replace =
      json::array({{{"op", "test"}, {"path", "/spec/holderIdentity"}, {"value", "a"}},
                   {{"op", "replace"}, {"path", "/spec/holderIdentity"}, {"value", "d"}}});
  r = c.patch(path, test_then_replace, "application/json-patch+json");
  CHECK(r.status == 422);
  test_then_replace[0]["value"] = "c";
  r = c.patch(path, test_then_replace, "application/json-patch+json; charset=utf-8");
  CHECK(r.status == 200);
  CHECK(r.body["spec"]["holderIdentity"] == "d");

  r = c.patch(path, {{"spec", {{"holderIdentity", "e"}}}},
              "application/strategic-merge-patch+json");
  CHECK(r.status == 415);
  CHECK(r.body["reason"] == "UnsupportedMediaType");
  CHECK(c.patch(kLeases + "/x", {{"spec", json::object()}}).status == 404);
  CHECK(c.get(path).body["spec"]["holderIdentity"] == "d");
  CHECK(api.updates("leases") == 3);
  CHECK(api.conflicts("leases") == 1);
}

TEST_CASE("FakeApiServer: DELETE honours its preconditions and answers a Status") {
  FakeApiServer api({});
  Client c(api);
  json first = c.post(kLeases, lease("leader", "a")).body;
  json second = c.patch(kLeases + "/leader", {{"spec", {{"holderIdentity", "b"}}}}).body;
  std::string path = kLeases + "/leader";

  json stale = {{"kind", "DeleteOptions"},
                {"apiVersion", "v1"},
                {"preconditions", {{"resourceVersion", rv_of(first)}}}};
  Client::Answer r = c.del(path, stale);
  CHECK(r.status == 409);
  CHECK(r.body ==
        conflict_status("leader",
                        "Precondition failed: ResourceVersion in "
                        "precondition: " +
                            rv_of(first) + ", ResourceVersion in object meta: " + rv_of(second)));
  json other_uid = {{"preconditions", {{"uid", "not-the-uid"}}}};
  r = c.del(path, other_uid);
  CHECK(r.status == 409);
  CHECK_THAT(r.body["message"].get<std::string>(),
             Catch::Contains("Precondition failed: UID in precondition: not-the-uid"));
  CHECK(c.get(path).status == 200);

  json fresh = {
      {"kind", "DeleteOptions"},
      {"apiVersion", "v1"},
      {"preconditions", {{"resourceVersion", rv_of(second)}, {"uid", second["metadata"]["uid"]}}}};
  r = c.del(path, fresh);
  CHECK(r.status == 200);
  CHECK(r.body == json{{"kind", "Status"},
                       {"apiVersion", "v1"},
                       {"metadata", json::object()},
                       {"status", "Success"},
                       {"details",
                        {{"name", "leader"},
                         {"group", "coordination.k8s.io"},
                         {"kind", "leases"},
                         {"uid", second["metadata"]["uid"]}}}});
  CHECK(c.get(path).status == 404);
  CHECK(c.del(path).status == 404);
  CHECK(api.deletes("leases") == 1);

  // A Pod's DELETE answers the Pod, as kube-apiserver's Pod registry does.
  json p = c.post(kPods, pod("p")).body;
  r = c.del(kPods + "/p");
  CHECK(r.status == 200);
  CHECK(r.body == p);
  CHECK(api.objects("pods").empty());
}

TEST_CASE("FakeApiServer: a namespaced watch sees a Lease's ADDED, MODIFIED and DELETED") {
  FakeApiServer api({});
  Client c(api);
  Client::Answer list = c.get(kLeases);
  REQUIRE(list.status == 200);
  CHECK(list.body["kind"] == "LeaseList");
  CHECK(list.body["apiVersion"] == "coordination.k8s.io/v1");
  std::string from = list.body["metadata"]["resourceVersion"];

  // A live watch, opened before the writes.
  std::vector<json> live;
  std::thread watcher([&] {
    Client w(api);
    live = w.watch(kLeases + "?watch=1&timeoutSeconds=5&resourceVersion=" + from, 3);
  });
  REQUIRE(eventually([&] { return api.open_watches() == 1; }, std::chrono::seconds(2)));

  json created = c.post(kLeases, lease("leader", "a")).body;
  c.post("/apis/coordination.k8s.io/v1/namespaces/ns2/leases", lease("leader", "z"));
  json modified = c.patch(kLeases + "/leader", {{"spec", {{"holderIdentity", "b"}}}}).body;
  REQUIRE(c.del(kLeases + "/leader").status == 200);
  watcher.join();

  // And one from the same resourceVersion after the fact: the same history.
  std::vector<json> replayed =
      c.watch(kLeases + "?watch=1&timeoutSeconds=5&resourceVersion=" + from, 3);
  for (const std::vector<json>* events : {&live, &replayed}) {
    REQUIRE(events->size() == 3);
    CHECK((*events)[0]["type"] == "ADDED");
    CHECK((*events)[0]["object"] == created);
    CHECK((*events)[1]["type"] == "MODIFIED");
    CHECK((*events)[1]["object"] == modified);
    CHECK((*events)[2]["type"] == "DELETED");
    CHECK((*events)[2]["object"]["spec"]["holderIdentity"] == "b");
    CHECK(std::stoll(rv_of((*events)[2]["object"])) > std::stoll(rv_of(modified)));
  }
  // Cluster-wide, both namespaces' Leases.
  std::vector<json> all = c.watch(
      "/apis/coordination.k8s.io/v1/leases?watch=1&timeoutSeconds=5&resourceVersion=" + from, 4);
  REQUIRE(all.size() == 4);
  CHECK(all[1]["object"]["metadata"]["namespace"] == "ns2");
  // One object by fieldSelector.
  std::vector<json> one = c.watch(
      "/apis/coordination.k8s.io/v1/"
      "leases?watch=1&timeoutSeconds=5&fieldSelector=metadata.name%3Dleader,"
      "metadata.namespace%3Dns2&resourceVersion=" +
          from,
      1);
  REQUIRE(one.size() == 1);
  CHECK(one[0]["object"]["spec"]["holderIdentity"] == "z");
}

TEST_CASE("FakeApiServer: namespaced Pods list by label, page by page, and mix with create()") {
  FakeApiServer api({});
  Client c(api);
  for (int i = 0; i < 5; ++i) {
    REQUIRE(c.post(kPods, pod("p" + std::to_string(i), i % 2 == 0 ? "even" : "odd")).status == 201);
  }
  api.create("pods", pod("elsewhere", "even"));  // namespace "default"
  json helper = api.create("leases", lease("from-helper", "h"));
  CHECK(helper["apiVersion"] == "coordination.k8s.io/v1");
  CHECK(c.get("/apis/coordination.k8s.io/v1/namespaces/default/leases/from-helper").body == helper);

  Client::Answer evens = c.get(kPods + "?labelSelector=app%3Deven");
  REQUIRE(evens.status == 200);
  CHECK(evens.body["kind"] == "PodList");
  CHECK(evens.body["items"].size() == 3);
  CHECK(c.get("/api/v1/pods?labelSelector=app%3Deven").body["items"].size() == 4);

  std::vector<std::string> names;
  std::string next;
  do {
    Client::Answer page =
        c.get(kPods + "?limit=2" + (next.empty() ? "" : "&continue=" + encode(next)));
    REQUIRE(page.status == 200);
    for (const json& item : page.body["items"]) {
      names.push_back(item["metadata"]["name"]);
    }
    next = page.body["metadata"].value("continue", "");
  } while (!next.empty() && names.size() < 10);
  CHECK(names == std::vector<std::string>{"p0", "p1", "p2", "p3", "p4"});

  // update() and remove() reach objects written over HTTP.
  json p0 = *api.get("pods", "ns1", "p0");
  p0["metadata"]["labels"]["app"] = "odd";
  CHECK(api.update("pods", p0));
  CHECK(c.get(kPods + "/p0").body["metadata"]["labels"]["app"] == "odd");
  CHECK(api.remove("pods", "ns1", "p0"));
  CHECK(c.get(kPods + "/p0").status == 404);
}

TEST_CASE("FakeApiServer: fail_next_writes answers the status and changes nothing") {
  FakeApiServer api({});
  Client c(api);
  json first = c.post(kLeases, lease("leader", "a")).body;
  api.fail_next_writes("leases", 409, 2);
  api.fail_next_writes("leases", 500);
  api.fail_next_writes("leases", 503);
  json renewed = first;
  renewed["spec"]["holderIdentity"] = "b";
  Client::Answer r = c.put(kLeases + "/leader", renewed);
  CHECK(r.status == 409);
  CHECK(r.body == conflict_status("leader", kModified));
  r = c.del(kLeases + "/leader");
  CHECK(r.status == 409);
  r = c.patch(kLeases + "/leader", {{"spec", {{"holderIdentity", "c"}}}});
  CHECK(r.status == 500);
  CHECK(r.body["reason"] == "InternalError");
  r = c.post(kLeases, lease("second", "a"));
  CHECK(r.status == 503);
  CHECK(r.body["reason"] == "ServiceUnavailable");
  CHECK(c.get(kLeases + "/leader").body == first);
  CHECK(c.get(kLeases + "/second").status == 404);
  // Other resources are not affected, and the faults are used up.
  CHECK(c.post(kPods, pod("p")).status == 201);
  r = c.put(kLeases + "/leader", renewed);
  CHECK(r.status == 200);

  FakeApiServer::WriteStats st = api.write_stats("leases");
  CHECK(st.attempts == 6);
  CHECK(st.writes == 2);
  CHECK(st.conflicts == 2);
  CHECK(api.writes("pods") == 1);
}

TEST_CASE("FakeApiServer: set_write_delay slows every write, not reads") {
  FakeApiServer api({});
  Client c(api);
  api.set_write_delay(std::chrono::milliseconds(150));
  auto start = std::chrono::steady_clock::now();
  REQUIRE(c.post(kLeases, lease("leader", "a")).status == 201);
  auto write_took = std::chrono::steady_clock::now() - start;
  CHECK(write_took >= std::chrono::milliseconds(150));
  start = std::chrono::steady_clock::now();
  REQUIRE(c.get(kLeases + "/leader").status == 200);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(150));
  api.set_write_delay(std::chrono::milliseconds(0));
  start = std::chrono::steady_clock::now();
  REQUIRE(c.del(kLeases + "/leader").status == 200);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(150));
}

TEST_CASE("FakeApiServer: a partitioned token gets 503 and loses its watches until heal") {
  FakeApiServer::Options o;
  o.tokens = {"t1", "t2"};
  FakeApiServer api(o);
  Client one(api, "t1");
  Client two(api, "t2");
  Client anonymous(api);
  CHECK(anonymous.get(kLeases).status == 401);
  CHECK(anonymous.post(kLeases, lease("leader", "x")).status == 401);
  REQUIRE(one.post(kLeases, lease("leader", "a")).status == 201);

  httplib::Error cut = httplib::Error::Success;
  std::vector<json> seen_by_two;
  std::vector<json> seen_by_one;
  const std::string watch = kLeases + "?watch=1&timeoutSeconds=10&resourceVersion=" +
                            std::to_string(api.resource_version());
  std::thread w2([&] { seen_by_two = Client(api, "t2").watch(watch, 5, &cut); });
  std::thread w1([&] { seen_by_one = Client(api, "t1").watch(watch, 1); });
  REQUIRE(eventually([&] { return api.open_watches() == 2; }, std::chrono::seconds(2)));

  auto start = std::chrono::steady_clock::now();
  api.partition("t2");
  w2.join();
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
  CHECK(cut != httplib::Error::Success);  // cut, not ended
  CHECK(api.open_watches() == 1);         // t1's watch goes on

  Client::Answer r = two.get(kLeases + "/leader");
  CHECK(r.status == 503);
  CHECK(r.body["reason"] == "ServiceUnavailable");
  CHECK(two.patch(kLeases + "/leader", {{"spec", {{"holderIdentity", "b"}}}}).status == 503);
  CHECK(one.patch(kLeases + "/leader", {{"spec", {{"holderIdentity", "a2"}}}}).status == 200);
  w1.join();
  REQUIRE(seen_by_one.size() == 1);
  CHECK(seen_by_one[0]["type"] == "MODIFIED");

  api.heal();
  CHECK(two.get(kLeases + "/leader").status == 200);
  CHECK(two.patch(kLeases + "/leader", {{"spec", {{"holderIdentity", "b"}}}}).status == 200);
  CHECK(api.write_attempts("leases") == 5);
  CHECK(api.writes("leases") == 3);
}

TEST_CASE("FakeApiServer: Secrets are written as kube-apiserver writes them") {
  FakeApiServer api({});
  Client c(api);
  const std::string secrets = "/api/v1/namespaces/ns1/secrets";
  json secret = {{"apiVersion", "v1"},
                 {"kind", "Secret"},
                 {"metadata", {{"name", "certs"}}},
                 {"type", "kubernetes.io/tls"},
                 {"data", {{"tls.crt", "Y2VydA=="}, {"tls.key", "a2V5"}}}};
  Client::Answer created = c.post(secrets, secret);
  REQUIRE(created.status == 201);
  CHECK(created.body["metadata"]["namespace"] == "ns1");
  std::string rv = created.body["metadata"]["resourceVersion"];

  Client::Answer again = c.post(secrets, secret);
  CHECK(again.status == 409);
  CHECK(again.body["reason"] == "AlreadyExists");
  CHECK(again.body["message"] == "secrets \"certs\" already exists");

  json next = created.body;
  next["data"]["tls.crt"] = "bmV3";
  Client::Answer updated = c.put(secrets + "/certs", next);
  REQUIRE(updated.status == 200);
  CHECK(updated.body["metadata"]["resourceVersion"] != rv);
  Client::Answer stale = c.put(secrets + "/certs", next);  // still carries rv
  CHECK(stale.status == 409);
  CHECK(stale.body["reason"] == "Conflict");
  CHECK(stale.body["message"] ==
        "Operation cannot be fulfilled on secrets \"certs\": the object has been modified; please "
        "apply your changes to the latest version and try again");

  json missing = secret;
  missing["metadata"]["name"] = "other";
  CHECK(c.put(secrets + "/other", missing).status == 404);  // no create on update

  json retyped = updated.body;
  retyped["type"] = "Opaque";
  Client::Answer immutable = c.put(secrets + "/certs", retyped);
  CHECK(immutable.status == 422);
  CHECK(immutable.body["message"] ==
        "Secret \"certs\" is invalid: type: Invalid value: \"Opaque\": field is immutable");

  json bad = secret;
  bad["metadata"]["name"] = "bad";
  bad["data"]["tls.key"] = "not base64!";
  CHECK(c.post(secrets, bad).status == 400);
  bad["data"] = {{"tls.crt", "Y2VydA=="}};
  Client::Answer no_key = c.post(secrets, bad);
  CHECK(no_key.status == 422);
  CHECK(no_key.body["message"] == "Secret \"bad\" is invalid: data[tls.key]: Required value");
}

TEST_CASE("FakeApiServer: webhook configurations are cluster-scoped and written like the rest") {
  FakeApiServer api({});
  Client c(api);
  const std::string mutating =
      "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
  json config = {{"metadata", {{"name", "cfg"}, {"namespace", "ignored"}}},
                 {"webhooks", {{{"name", "a.example.com"}, {"clientConfig", json::object()}}}}};
  Client::Answer created = c.post(mutating, config);
  REQUIRE(created.status == 201);
  CHECK_FALSE(created.body["metadata"].contains("namespace"));
  CHECK(created.body["kind"] == "MutatingWebhookConfiguration");
  CHECK(c.get(mutating + "/cfg").body["metadata"]["uid"] == created.body["metadata"]["uid"]);
  CHECK(c.get(mutating + "/none").status == 404);

  json patch = json::array(
      {{{"op", "add"}, {"path", "/webhooks/0/clientConfig/caBundle"}, {"value", "Q0E="}}});
  Client::Answer patched = c.patch(mutating + "/cfg", patch, "application/json-patch+json");
  REQUIRE(patched.status == 200);
  CHECK(patched.body["webhooks"][0]["clientConfig"]["caBundle"] == "Q0E=");

  json stale = created.body;
  Client::Answer conflict = c.put(mutating + "/cfg", stale);
  CHECK(conflict.status == 409);
  CHECK(
      conflict.body["message"] ==
      "Operation cannot be fulfilled on mutatingwebhookconfigurations.admissionregistration.k8s.io "
      "\"cfg\": the object has been modified; please apply your changes to the latest version "
      "and try again");

  api.forbid_writes("mutatingwebhookconfigurations", "system:serviceaccount:ray-system:wh");
  Client::Answer denied = c.put(mutating + "/cfg", patched.body);
  CHECK(denied.status == 403);
  CHECK(denied.body["message"] ==
        "mutatingwebhookconfigurations.admissionregistration.k8s.io \"cfg\" is forbidden: User "
        "\"system:serviceaccount:ray-system:wh\" cannot update resource "
        "\"mutatingwebhookconfigurations\" in API group \"admissionregistration.k8s.io\" at the "
        "cluster scope");
  CHECK(c.get(mutating + "/cfg").status == 200);  // reads stay allowed
}
