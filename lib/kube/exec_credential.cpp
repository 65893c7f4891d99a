#include "kube/exec_credential.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <ctime>
#include <system_error>

#include "base/text/text.h"

namespace kube {
namespace {

using WallClock = std::chrono::system_clock;
using nlohmann::json;

constexpr std::size_t kMaxOutput = 1 << 20;

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

// One line: newlines and runs of blanks in a kubeconfig's installHint become one space.
std::string one_line(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      if (!out.empty() && out.back() != ' ') {
        out.push_back(' ');
      }
    } else {
      out.push_back(c);
    }
  }
  while (!out.empty() && out.back() == ' ') {
    out.pop_back();
  }
  return out;
}

std::string prefix(const ExecConfig& c) {
  return c.where + ": exec plugin " + webhook::quote(c.command);
}

webhook::Error failure(const ExecConfig& c, const std::string& what) {
  return webhook::invalid_argument(prefix(c) + ": " + what);
}

bool executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// The file to run: a command with a slash as it is; a bare name from the first directory of
// the search path that holds it as an executable file (empty entries are skipped).
std::optional<std::string> resolve_command(const ExecConfig& c) {
  if (c.command.find('/') != std::string::npos) {
    return executable_file(c.command) ? std::optional(c.command) : std::nullopt;
  }
  std::string_view rest = c.search_path;
  while (!rest.empty()) {
    std::size_t colon = rest.find(':');
    std::string_view dir = rest.substr(0, colon);
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    if (dir.empty()) {
      continue;
    }
    std::string candidate = std::string(dir) + "/" + c.command;
    if (executable_file(candidate)) {
      return candidate;
    }
  }
  return std::nullopt;
}

webhook::Error not_found(const ExecConfig& c) {
  std::string where = c.command.find('/') != std::string::npos ? "is not an executable file"
                                                               : "is not found on PATH";
  std::string hint = one_line(c.install_hint);
  return failure(
      c, where + (hint.empty() ? "; install it or fix the kubeconfig's command" : "; " + hint));
}

// This process's environment, then the kubeconfig's env (replacing a variable of the same name),
// then KUBERNETES_EXEC_INFO.
std::vector<std::string> child_environment(const ExecConfig& c, const std::string& exec_info) {
  std::vector<std::pair<std::string, std::string>> added = c.env;
  added.emplace_back("KUBERNETES_EXEC_INFO", exec_info);
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    std::string_view name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [n, v] : added) {
      replaced = replaced || n == name;
    }
    if (!replaced) {
      out.emplace_back(entry);
    }
  }
  for (const auto& [n, v] : added) {
    out.push_back(n + "=" + v);
  }
  return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) {
    out.push_back(s.data());
  }
  out.push_back(nullptr);
  return out;
}

struct Spawned {
  pid_t pid = -1;
  int out_fd = -1;
};

webhook::Result<Spawned> spawn(const ExecConfig& c, const std::string& path, bool interactive,
                               const std::string& exec_info) {
  std::vector<std::string> argv_strings{c.command};
  argv_strings.insert(argv_strings.end(), c.args.begin(), c.args.end());
  std::vector<std::string> env_strings = child_environment(c, exec_info);
  std::vector<char*> argv = pointers(argv_strings);
  std::vector<char*> envp = pointers(env_strings);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return failure(c, "cannot create a pipe: " + errno_text(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!interactive) {  // as kubectl: stdin is the terminal only for an interactive plugin
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  }
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  Spawned s;
  int err = ::posix_spawn(&s.pid, path.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (err != 0) {
    ::close(fds[0]);
    return failure(c, "cannot be started: " + errno_text(err));
  }
  s.out_fd = fds[0];
  return s;
}

// Reads the plugin's stdout until it closes, the limit, or the deadline. False on the deadline.
bool read_output(int fd, WallClock::time_point deadline, std::string& out, bool& too_large) {
  char buf[8192];
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - WallClock::now());
    if (left.count() <= 0) {
      return false;
    }
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) {
      return true;
    }
    if (ready <= 0) {
      continue;
    }
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return true;
    }
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > kMaxOutput) {
      too_large = true;
      return true;
    }
  }
}

std::string seconds_text(std::chrono::milliseconds d) {
  return d.count() % 1000 == 0 ? std::to_string(d.count() / 1000) + "s"
                               : std::to_string(d.count()) + "ms";
}

}  // namespace

json exec_input(const ExecConfig& config, bool interactive) {
  json spec = {{"interactive", interactive}};
  if (config.provide_cluster_info) {
    spec["cluster"] = config.cluster;
  }
  return {{"kind", "ExecCredential"}, {"apiVersion", config.api_version}, {"spec", spec}};
}

webhook::Result<bool> exec_interactive(const ExecConfig& config) {
  if (config.interactive_mode == "Never") {
    return false;
  }
  if (config.interactive_mode == "IfAvailable") {
    return config.stdin_is_terminal;
  }
  if (!config.stdin_is_terminal) {
    return failure(config,
                   "has interactiveMode Always, but standard input is not a terminal; run "
                   "kubectl tpu-slice from a terminal, or log in first so the plugin need not ask");
  }
  return true;
}

webhook::Result<ExecCredential> parse_exec_output(const ExecConfig& c, std::string_view out) {
  json doc = json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return failure(c, "printed no ExecCredential JSON on stdout (" +
                          webhook::quote_bounded(out.substr(0, 80)) + ")");
  }
  auto text = [](const json& o, const char* key) {
    auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  std::string version = text(doc, "apiVersion");
  if (version != c.api_version) {
    return failure(c, "is configured for apiVersion " + c.api_version + " but answered " +
                          (version.empty() ? "none" : version));
  }
  if (text(doc, "kind") != "ExecCredential") {
    return failure(c,
                   "answered kind " + webhook::quote(text(doc, "kind")) + ", not ExecCredential");
  }
  auto status = doc.find("status");
  if (status == doc.end() || !status->is_object()) {
    return failure(c, "answered an ExecCredential without a status");
  }
  ExecCredential cred;
  cred.token = text(*status, "token");
  cred.client_cert_pem = text(*status, "clientCertificateData");
  cred.client_key_pem = text(*status, "clientKeyData");
  if (cred.client_cert_pem.empty() != cred.client_key_pem.empty()) {
    return failure(c,
                   "answered only one of status.clientCertificateData and "
                   "status.clientKeyData; they go together");
  }
  if (cred.token.empty() && cred.client_cert_pem.empty()) {
    return failure(c,
                   "answered neither status.token nor status.clientCertificateData and "
                   "clientKeyData");
  }
  if (auto exp = status->find("expirationTimestamp"); exp != status->end() && !exp->is_null()) {
    std::optional<WallClock::time_point> t =
        exp->is_string() ? parse_rfc3339(exp->get<std::string>()) : std::nullopt;
    if (!t) {
      return failure(c, "answered status.expirationTimestamp " +
                            webhook::quote_bounded(exp->dump()) + ", which is not RFC 3339");
    }
    cred.expiry = t;
  }
  return cred;
}

webhook::Result<ExecCredential> run_exec_plugin(const ExecConfig& c) {
  ASSIGN_OR_RETURN(bool interactive, exec_interactive(c));
  std::optional<std::string> path = resolve_command(c);
  if (!path) {
    return not_found(c);
  }
  ASSIGN_OR_RETURN(Spawned s, spawn(c, *path, interactive, exec_input(c, interactive).dump()));
  std::string out;
  bool too_large = false;
  // A plugin that may ask the user (a browser login, a password) gets time for it.
  std::chrono::milliseconds limit =
      interactive ? std::max<std::chrono::milliseconds>(c.timeout, std::chrono::minutes(5))
                  : c.timeout;
  bool in_time = read_output(s.out_fd, WallClock::now() + limit, out, too_large);
  ::close(s.out_fd);
  if (!in_time || too_large) {
    ::kill(s.pid, SIGKILL);
  }
  int status = 0;
  while (::waitpid(s.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!in_time) {
    return failure(c, "did not answer within " + seconds_text(limit) + "; it was stopped");
  }
  if (too_large) {
    return failure(c, "printed more than 1 MiB on stdout");
  }
  if (WIFSIGNALED(status)) {
    return failure(c, "was killed by signal " + std::to_string(WTERMSIG(status)));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    return failure(c, "exited with status " + std::to_string(WEXITSTATUS(status)) +
                          " (its stderr above says why)");
  }
  return parse_exec_output(c, out);
}

ExecCredentialSource::ExecCredentialSource(ExecConfig config, Clock now)
    : config_(std::move(config)), now_(std::move(now)) {
  if (!now_) {
    now_ = [] { return std::chrono::system_clock::now(); };
  }
}

webhook::Result<ExecCredential> ExecCredentialSource::get(bool force) {
  std::lock_guard lock(mu_);
  if (!force && cached_ && (!cached_->expiry || now_() < *cached_->expiry)) {
    return *cached_;
  }
  ++runs_;
  webhook::Result<ExecCredential> cred = run_exec_plugin(config_);
  if (!cred) {
    return cred.error();
  }
  cached_ = *cred;
  return cred;
}

int ExecCredentialSource::runs() const {
  std::lock_guard lock(mu_);
  return runs_;
}

}  // namespace kube
