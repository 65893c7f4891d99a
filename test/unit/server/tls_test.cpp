// lib/server/tls: identities (chain, key match, no material in errors), the watcher's reload
// rules: kubelet's ..data symlink swap, a rename, a broken pair keeps the old identity, and the
// files it refuses to read: FIFOs, devices, directories, files over the limit (docs/server.md
// "TLS", "Signals and certificate files").
#include "server/tls.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "test_pem.h"

namespace {

namespace fs = std::filesystem;

using server_test::make_pem;
using server_test::Pem;

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/tls-test.XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path path;
};

// Runs read_small_file(path) on another thread and says whether it returned within 5 s. If it
// did not (it blocks on the FIFO), a writer opening and closing the FIFO releases it, so the
// test ends either way.
struct BoundedRead {
  explicit BoundedRead(const std::string& path)
      : result(std::async(std::launch::async, [path] { return server::read_small_file(path); })) {
    returned = result.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
    if (!returned) {
      int writer = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
      if (writer >= 0) {
        ::close(writer);
      }
    }
  }
  std::future<webhook::Result<std::string>> result;
  bool returned = false;
};

}  // namespace

TEST_CASE("an identity loads with its chain and facts", "[tls]") {
  Pem leaf = make_pem("webhook");
  Pem ca = make_pem("ca");
  auto id = server::load_identity(leaf.cert + ca.cert, leaf.key);
  REQUIRE(id.has_value());
  CHECK((*id)->subject() == "CN=webhook");
  CHECK((*id)->serial() == "2A");
  CHECK(sk_X509_num((*id)->chain()) == 1);
  CHECK((*id)->not_after() > std::time(nullptr));
  CHECK((*id)->same_source(leaf.cert + ca.cert, leaf.key));
  CHECK_FALSE((*id)->same_source(leaf.cert, leaf.key));
}

TEST_CASE("broken identities are refused without echoing them", "[tls]") {
  Pem a = make_pem("a");
  Pem b = make_pem("b");
  auto [cert, key, expected] = GENERATE_COPY(table<std::string, std::string, std::string>({
      {a.cert, b.key, "does not belong to the certificate"},
      {"not pem", a.key, "no PEM CERTIFICATE block"},
      {a.cert, "not pem", "no PEM PRIVATE KEY block"},
      {"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", a.key, "cannot be parsed"},
      {a.cert, "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
       "cannot be parsed"},
  }));
  auto id = server::load_identity(cert, key);
  REQUIRE_FALSE(id.has_value());
  CHECK_THAT(id.error().message, Catch::Contains(expected));
  CHECK(id.error().message.find("BEGIN") == std::string::npos);
}

TEST_CASE("the server context refuses nothing it needs", "[tls]") {
  Pem a = make_pem("a");
  server::IdentityStore store(*server::load_identity(a.cert, a.key));
  auto ctx = server::make_server_context(store);
  REQUIRE(ctx.has_value());
  CHECK(SSL_CTX_get_min_proto_version(ctx->get()) == TLS1_2_VERSION);
}

TEST_CASE("TLS (docs/server.md): handshakes read whole identities while rotations publish the next",
          "[tls]") {
  // Under TSan (the `threads` pass) an unordered read of the published pointer fails this case;
  // everywhere, every read is one of the identities published, whole.
  Pem a = make_pem("a");
  Pem b = make_pem("b");
  std::shared_ptr<const server::Identity> first = *server::load_identity(a.cert, a.key);
  std::shared_ptr<const server::Identity> second = *server::load_identity(b.cert, b.key);
  server::IdentityStore store(first);
  // Rotations go on until the reader has read a thousand times while they ran: on a fast
  // machine 20,000 publishes can end before the reader's first read.
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0};
  std::thread rotations([&] {
    for (int i = 0; i < 10'000 || reads.load() < 1'000; ++i) {
      store.publish(second);
      store.publish(first);
    }
    stop = true;
  });
  int unknown = 0;
  while (!stop) {
    std::shared_ptr<const server::Identity> id = store.current();
    std::string subject = id->subject();
    unknown += subject != "CN=a" && subject != "CN=b" ? 1 : 0;
    ++reads;
  }
  rotations.join();
  CHECK(unknown == 0);
  CHECK(store.current() == first);  // each round publishes `first` last
}

TEST_CASE(
    "the watcher follows kubelet's ..data swap and renames, and keeps the old pair when the "
    "new one is broken",
    "[tls]") {
  TempDir dir;
  // A Secret volume as kubelet lays it out: tls.crt -> ..data/tls.crt, ..data -> ..<timestamp>.
  Pem first = make_pem("first");
  fs::create_directory(dir.path / "..v1");
  write_file(dir.path / "..v1" / "tls.crt", first.cert);
  write_file(dir.path / "..v1" / "tls.key", first.key);
  fs::create_directory_symlink("..v1", dir.path / "..data");
  fs::create_symlink("..data/tls.crt", dir.path / "tls.crt");
  fs::create_symlink("..data/tls.key", dir.path / "tls.key");

  server::IdentityStore store(*server::load_identity(first.cert, first.key));
  int ok = 0;
  int failed = 0;
  std::string last_error;
  server::CertificateWatcher watcher(
      store, (dir.path / "tls.crt").string(), (dir.path / "tls.key").string(),
      std::chrono::milliseconds(0),
      [&](bool success, const std::string& detail, const std::shared_ptr<const server::Identity>&) {
        success ? ++ok : ++failed;
        last_error = detail;
      });
  CHECK_FALSE(watcher.poll_once());  // same contents as served: no reload
  CHECK(store.current()->subject() == "CN=first");

  SECTION("kubelet swaps ..data atomically") {
    Pem second = make_pem("second");
    fs::create_directory(dir.path / "..v2");
    write_file(dir.path / "..v2" / "tls.crt", second.cert);
    write_file(dir.path / "..v2" / "tls.key", second.key);
    fs::create_directory_symlink("..v2", dir.path / "..data_tmp");
    fs::rename(dir.path / "..data_tmp", dir.path / "..data");
    CHECK(watcher.poll_once());
    CHECK(store.current()->subject() == "CN=second");
    CHECK(ok == 1);
    CHECK_FALSE(watcher.poll_once());  // nothing changed since
  }

  SECTION("a broken pair keeps the old identity; the fixed pair is taken later") {
    Pem other = make_pem("other");
    fs::create_directory(dir.path / "..v3");
    write_file(dir.path / "..v3" / "tls.crt", other.cert);
    write_file(dir.path / "..v3" / "tls.key", first.key);  // the wrong key
    fs::create_directory_symlink("..v3", dir.path / "..data_tmp");
    fs::rename(dir.path / "..data_tmp", dir.path / "..data");
    CHECK_FALSE(watcher.poll_once());
    CHECK(store.current()->subject() == "CN=first");
    CHECK(failed == 1);
    CHECK_THAT(last_error, Catch::Contains("does not belong"));
    CHECK(last_error.find("BEGIN") == std::string::npos);

    write_file(dir.path / "..v3" / "tls.key.new", other.key);
    fs::rename(dir.path / "..v3" / "tls.key.new", dir.path / "..v3" / "tls.key");
    CHECK(watcher.poll_once());
    CHECK(store.current()->subject() == "CN=other");
  }

  SECTION("plain files renamed over the old ones") {
    fs::remove(dir.path / "tls.crt");
    fs::remove(dir.path / "tls.key");
    write_file(dir.path / "tls.crt", first.cert);
    write_file(dir.path / "tls.key", first.key);
    CHECK_FALSE(watcher.poll_once());  // same contents
    Pem fourth = make_pem("fourth");
    write_file(dir.path / "new.key", fourth.key);
    write_file(dir.path / "new.crt", fourth.cert);
    fs::rename(dir.path / "new.key", dir.path / "tls.key");
    fs::rename(dir.path / "new.crt", dir.path / "tls.crt");
    CHECK(watcher.poll_once());
    CHECK(store.current()->subject() == "CN=fourth");
  }

  SECTION("a missing file keeps the old identity") {
    fs::remove(dir.path / "tls.key");
    CHECK_FALSE(watcher.poll_once());
    CHECK(failed == 1);
    CHECK_THAT(last_error, Catch::Contains("cannot open"));
    CHECK(store.current()->subject() == "CN=first");
  }
}

TEST_CASE("a FIFO is refused at once, not waited on", "[tls][server]") {
  TempDir dir;
  const std::string fifo = (dir.path / "tls.key").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  BoundedRead read(fifo);
  REQUIRE(read.returned);
  webhook::Result<std::string> r = read.result.get();
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == webhook::ErrorCode::kInvalidArgument);
  CHECK(r.error().message == fifo +
                                 ": is a FIFO, not a regular file (give the path of a PEM file; a "
                                 "symlink to one is fine)");
}

TEST_CASE("devices and directories are refused without being read", "[tls][server]") {
  TempDir dir;  // a new one each time the generator runs the case
  auto [given, kind] = GENERATE(table<std::string, std::string>({
      {"/dev/zero", "is a character device, not a regular file"},
      {"/dev/null", "is a character device, not a regular file"},
      {"", "is a directory, not a regular file"},
  }));
  const std::string path = given.empty() ? dir.path.string() : given;
  auto started = std::chrono::steady_clock::now();
  webhook::Result<std::string> r = server::read_small_file(path);
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(1));
  REQUIRE_FALSE(r.has_value());
  CHECK_THAT(r.error().message, Catch::StartsWith(path + ": " + kind));
}

TEST_CASE("a file over 1 MiB is refused by its size, before it is read", "[tls][server]") {
  TempDir dir;
  const fs::path big = dir.path / "big.crt";
  write_file(big, "");
  fs::resize_file(big, (1 << 20) + 1);  // sparse: nothing to read but zeros
  webhook::Result<std::string> r = server::read_small_file(big.string());
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().message == big.string() +
                                 ": is 1048577 bytes, over the 1048576-byte limit (1 MiB) for a "
                                 "certificate or key");

  fs::resize_file(big, 1 << 20);  // exactly the limit: read whole
  webhook::Result<std::string> at_limit = server::read_small_file(big.string());
  REQUIRE(at_limit.has_value());
  CHECK(at_limit->size() == std::size_t{1} << 20);
}

TEST_CASE("a file holding more than its size says is cut at the limit plus one byte",
          "[tls][server]") {
  // /proc files report size 0 and hold more: the read, not the size, must enforce the limit.
  webhook::Result<std::string> whole = server::read_small_file("/proc/self/maps");
  REQUIRE(whole.has_value());
  REQUIRE(whole->size() > 100);
  webhook::Result<std::string> r = server::read_small_file("/proc/self/maps", 100);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().message == "/proc/self/maps: grew past the 100-byte limit while it was read");
}

TEST_CASE("a symlink to a PEM file is read; a missing file is named", "[tls][server]") {
  TempDir dir;
  Pem pem = make_pem("linked");
  fs::create_directory(dir.path / "..v1");
  write_file(dir.path / "..v1" / "tls.crt", pem.cert);
  fs::create_symlink("..v1/tls.crt", dir.path / "tls.crt");
  webhook::Result<std::string> r = server::read_small_file((dir.path / "tls.crt").string());
  REQUIRE(r.has_value());
  CHECK(*r == pem.cert);

  const std::string missing = (dir.path / "missing.key").string();
  webhook::Result<std::string> m = server::read_small_file(missing);
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error().code == webhook::ErrorCode::kInvalidArgument);
  CHECK(m.error().message == missing +
                                 ": cannot open the file: No such file or directory (does it "
                                 "exist and is it readable?)");

  fs::create_symlink("missing.key", dir.path / "dangling.key");  // a symlink to nothing
  webhook::Result<std::string> d = server::read_small_file((dir.path / "dangling.key").string());
  REQUIRE_FALSE(d.has_value());
  CHECK_THAT(d.error().message, Catch::Contains("No such file or directory"));
}

TEST_CASE("the watcher keeps the served identity when the key becomes a FIFO", "[tls][server]") {
  TempDir dir;
  Pem first = make_pem("first");
  write_file(dir.path / "tls.crt", first.cert);
  write_file(dir.path / "tls.key", first.key);
  server::IdentityStore store(*server::load_identity(first.cert, first.key));
  int failed = 0;
  std::string last_error;
  server::CertificateWatcher watcher(
      store, (dir.path / "tls.crt").string(), (dir.path / "tls.key").string(),
      std::chrono::milliseconds(0),
      [&](bool success, const std::string& detail, const std::shared_ptr<const server::Identity>&) {
        failed += success ? 0 : 1;
        last_error = detail;
      });
  CHECK_FALSE(watcher.poll_once());
  fs::remove(dir.path / "tls.key");
  REQUIRE(::mkfifo((dir.path / "tls.key").c_str(), 0600) == 0);
  auto polled = std::async(std::launch::async, [&watcher] { return watcher.poll_once(); });
  bool returned = polled.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  if (!returned) {  // release the blocked read so the test ends
    int writer = ::open((dir.path / "tls.key").c_str(), O_WRONLY | O_NONBLOCK);
    if (writer >= 0) {
      ::close(writer);
    }
  }
  REQUIRE(returned);
  CHECK_FALSE(polled.get());
  CHECK(failed == 1);
  CHECK_THAT(last_error, Catch::Contains("tls.key: is a FIFO, not a regular file"));
  CHECK(store.current()->subject() == "CN=first");
}
