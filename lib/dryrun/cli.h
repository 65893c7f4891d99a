#pragma once
// webhook-dryrun: what the webhook would answer, offline. cmd/webhook-dryrun/main.cpp only
// forwards argv and the standard streams here, so tests run the whole CLI in-process.
//
//   std::ostringstream out, err;
//   std::istringstream in;
//   int code = dryrun::run_cli({"-o", "patch", "pod.yaml"}, {in, out, err});
//   // 0 admitted, 1 denied, 2 bad usage or unreadable input (one line on err), 3 not sent to
//   // the webhook (its configurations' selectors)

#include <iosfwd>
#include <string>
#include <vector>

namespace dryrun {

struct CliIo {
  std::istream& in;
  std::ostream& out;
  std::ostream& err;
};

inline constexpr int kExitAdmitted = 0;
inline constexpr int kExitDenied = 1;
inline constexpr int kExitUsage = 2;
// The webhook configurations' selectors would not send the object to the webhook.
inline constexpr int kExitNotSent = 3;

// Runs the CLI on `args` (argv without the program name).
int run_cli(const std::vector<std::string>& args, CliIo io);

// The --help text; its flags are generated from the table run_cli parses with.
std::string usage();

// Every flag run_cli accepts, as --help spells it ("-o", "--output", "--existing", ...).
std::vector<std::string> flag_spellings();

}  // namespace dryrun
