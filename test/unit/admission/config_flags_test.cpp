// lib/admission/config_flags: the flags of admission::Config that kuberay-tpu-webhook and
// webhook-dryrun share, defined once: names, defaults in the help text, checks.
#include "admission/config_flags.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace {

webhook::flags::FlagTable<admission::Config> config_table() {
  webhook::flags::FlagTable<admission::Config> t;
  for (webhook::flags::Flag<admission::Config>& f : admission::config_flags()) {
    t.add(std::move(f));
  }
  return t;
}

}  // namespace

TEST_CASE("config flags: names, and defaults as --help states them", "[admission][flags]") {
  webhook::flags::FlagTable<admission::Config> t = config_table();
  CHECK(t.spellings() == std::vector<std::string>{"--kuberay-version", "--tpu-process-port-base",
                                                  "--megascale-port-base", "--device-plugin-port"});
  CHECK_THAT(t.find("kuberay-version")->help, Catch::Contains("(default 1.6)"));
  CHECK(t.find("tpu-process-port-base")->help ==
        "first slicebuilder/TPU process port (default 8471)");
  CHECK(t.find("megascale-port-base")->help == "MEGASCALE_PORT base (default 8081)");
  CHECK(t.find("device-plugin-port")->help ==
        "TPU device plugin port in TPU_DEVICE_PLUGIN_ADDR (default 2112)");
}

TEST_CASE("config flags: values land in admission::Config", "[admission][flags]") {
  admission::Config c;
  REQUIRE(config_table().parse({"--kuberay-version=v1.3.1", "--tpu-process-port-base=1",
                                "--megascale-port-base", "65535", "-device-plugin-port=3000"},
                               c));
  CHECK(c.kuberay.text() == "1.3");
  CHECK(c.ports.tpu_process_base == 1);
  CHECK(c.ports.megascale_base == 65535);
  CHECK(c.ports.device_plugin == 3000);
}

TEST_CASE("config flags: a port is 1 to 65535, digits only", "[admission][flags]") {
  auto value = GENERATE(as<std::string>{}, "0", "65536", "-1", "+80", "80 ", "0x50", "");
  CAPTURE(value);
  admission::Config c;
  webhook::Status st = config_table().parse({"--device-plugin-port=" + value}, c);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message ==
        "--device-plugin-port=" + value + ": expected a port number from 1 to 65535");
  CHECK(c.ports.device_plugin == 2112);
}
