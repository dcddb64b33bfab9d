#include "tests/integration/cpp/daemon_harness.h"

#include <fcntl.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace xferd::integration {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(10);
// Log bytes quoted in a start-up failure.
constexpr size_t kLogTail = 4000;
constexpr char kUnshare[] = "/usr/bin/unshare";

absl::Status ErrnoError(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Exit code of a reaped child, or ABORTED if a signal ended it.
absl::StatusOr<int> ExitCode(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  return absl::AbortedError(absl::StrCat("xferd was killed by signal ", WTERMSIG(wait_status), " (",
                                         strsignal(WTERMSIG(wait_status)), ")"));
}

// Pids of the running daemons, for the crash handler (async-signal-safe).
constexpr int kMaxDaemons = 64;
std::atomic<pid_t> live_daemons[kMaxDaemons];

// Signal handler: only async-signal-safe calls (kill, waitpid, nanosleep).
void TerminateDaemonsAndReraise(int sig) {
  for (std::atomic<pid_t>& pid : live_daemons) {
    if (const pid_t p = pid.load(); p > 0) ::kill(p, SIGTERM);
  }
  // Up to 5 s for our children to drain and remove their files. (A daemon in
  // a PID namespace is not our child; its unshare is, and waits for it.)
  for (int i = 0; i < 500; ++i) {
    bool running = false;
    for (std::atomic<pid_t>& pid : live_daemons) {
      const pid_t p = pid.load();
      if (p > 0 && ::waitpid(p, nullptr, WNOHANG) == 0) running = true;
    }
    if (!running) break;
    const timespec pause = {0, 10 * 1000 * 1000};
    ::nanosleep(&pause, nullptr);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void TrackDaemon(pid_t pid) {
  static const bool installed = [] {
    for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE}) ::signal(sig, TerminateDaemonsAndReraise);
    return true;
  }();
  (void)installed;
  for (std::atomic<pid_t>& slot : live_daemons) {
    pid_t empty = 0;
    if (slot.compare_exchange_strong(empty, pid)) return;
  }
}

void UntrackDaemon(pid_t pid) {
  for (std::atomic<pid_t>& slot : live_daemons) {
    pid_t expected = pid;
    if (slot.compare_exchange_strong(expected, 0)) return;
  }
}

// Starts args[0] with stdout and stderr going to `log`. Errors: INTERNAL.
absl::StatusOr<pid_t> Spawn(std::vector<std::string> args, const std::string& log) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  const int err = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) {
    return absl::InternalError(absl::StrCat("posix_spawn ", args[0], ": ", std::strerror(err)));
  }
  return pid;
}

// The first child of `pid` (Linux /proc/<pid>/task/<pid>/children), or -1.
pid_t FirstChild(pid_t pid) {
  std::istringstream children(ReadFile(absl::StrCat("/proc/", pid, "/task/", pid, "/children")));
  pid_t child = -1;
  children >> child;
  return child;
}

}  // namespace

bool PidNamespacesWork() {
  absl::StatusOr<pid_t> pid = Spawn({kUnshare, "--pid", "--kill-child", "/bin/true"}, "/dev/null");
  int wait_status = 0;
  return pid.ok() && ::waitpid(*pid, &wait_status, 0) == *pid && WIFEXITED(wait_status) &&
         WEXITSTATUS(wait_status) == 0;
}

std::string RunfilePath(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/",
                      workspace != nullptr ? workspace : "xferd", "/", path);
}

absl::StatusOr<std::unique_ptr<ScratchDir>> ScratchDir::Create() {
  char tmpl[] = "/tmp/xfd.XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return ErrnoError("mkdtemp /tmp/xfd.XXXXXX");
  return std::unique_ptr<ScratchDir>(new ScratchDir(tmpl));
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TestTransport() {
  const char* transport = std::getenv("XFERD_TEST_TRANSPORT");
  return transport != nullptr && *transport != '\0' ? transport : "tcp";
}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const std::string& binary,
                                                      const std::string& dir,
                                                      const DaemonOptions& options) {
  const std::string base = absl::StrCat(dir, "/", options.node_id);
  const std::string config = base + ".toml";
  const std::string ready = base + ".ready";
  const std::string log = base + ".log";
  std::ofstream(config).flush();  // empty: defaults only, never /etc/xferd
  ::unlink(ready.c_str());        // left by an earlier run of the same node
  std::vector<std::string> args;
  if (options.own_pid_namespace) args = {kUnshare, "--pid", "--kill-child"};
  args.insert(args.end(), {binary, "--config", config, "--node-id", options.node_id, "--listen",
                           "127.0.0.1:0", "--unix-socket", base + ".sock", "--ready-file", ready,
                           "--log-level", "info", "--transport", TestTransport()});
  if (TestTransport() == "verbs") args.push_back("--require-rdma");
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  absl::StatusOr<pid_t> pid = Spawn(args, log);
  if (!pid.ok()) return pid.status();
  std::unique_ptr<Daemon> daemon(new Daemon(*pid, options.node_id, base + ".sock", log));
  absl::Status ready_status = daemon->AwaitReady(ready, options.ready_timeout);
  if (!ready_status.ok()) return ready_status;
  if (options.own_pid_namespace) {  // signals go to the daemon, not to unshare
    daemon->daemon_pid_ = FirstChild(*pid);
    if (daemon->daemon_pid_ <= 0) return absl::InternalError("cannot find the daemon unshare runs");
    TrackDaemon(daemon->daemon_pid_);
  }
  return daemon;
}

Daemon::Daemon(pid_t pid, std::string node_id, std::string socket_path, std::string log_path)
    : pid_(pid),
      daemon_pid_(pid),
      node_id_(std::move(node_id)),
      socket_path_(std::move(socket_path)),
      log_path_(std::move(log_path)) {
  TrackDaemon(pid_);
}

Daemon::~Daemon() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);  // unshare --kill-child takes its daemon along
  int ignored = 0;
  ::waitpid(pid_, &ignored, 0);
  Reaped();
}

void Daemon::Reaped() {
  UntrackDaemon(pid_);
  if (daemon_pid_ != pid_) UntrackDaemon(daemon_pid_);
  pid_ = daemon_pid_ = -1;
}

absl::Status Daemon::AwaitReady(const std::string& ready_file, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    int wait_status = 0;
    if (::waitpid(pid_, &wait_status, WNOHANG) == pid_) {
      Reaped();
      const std::string log = Log();
      return absl::UnavailableError(
          absl::StrCat("xferd ", node_id_, " exited before it was ready; its log ends with:\n",
                       log.substr(log.size() > kLogTail ? log.size() - kLogTail : 0)));
    }
    const std::string line = ReadFile(ready_file);  // renamed into place: whole or absent
    if (!line.empty()) {
      google::protobuf::Struct ready;
      if (!google::protobuf::util::JsonStringToMessage(line, &ready).ok()) {
        return absl::InternalError(absl::StrCat("unparsable ready file: ", line));
      }
      grpc_address_ =
          absl::StrCat("127.0.0.1:", static_cast<int>(ready.fields().at("port").number_value()));
      return absl::OkStatus();
    }
    absl::SleepFor(kPollInterval);
  }
  return absl::UnavailableError(absl::StrCat("xferd ", node_id_, " not ready within ",
                                             absl::FormatDuration(timeout), "; log:\n", Log()));
}

namespace {

// Every thread of `pid` is stopped (state T in /proc). kill(SIGSTOP) only
// queues the signal: the thread that takes it stops the others when it
// runs, which on a loaded host can be milliseconds while pollers serve.
bool AllThreadsStopped(pid_t pid) {
  std::error_code error;
  for (const auto& task :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"), error)) {
    std::ifstream stat(task.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;  // the thread ended meanwhile
    // The state follows the command name's closing parenthesis.
    const size_t paren = line.rfind(')');
    if (paren == std::string::npos || line.size() < paren + 3 || line[paren + 2] != 'T') {
      return false;
    }
  }
  return !error;
}

}  // namespace

void Daemon::Pause() {
  if (daemon_pid_ <= 0) return;
  ::kill(daemon_pid_, SIGSTOP);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!AllThreadsStopped(daemon_pid_) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
}

void Daemon::Resume() {
  if (daemon_pid_ > 0) ::kill(daemon_pid_, SIGCONT);
}

absl::StatusOr<int> Daemon::Stop(absl::Duration timeout) {
  if (pid_ <= 0) return absl::FailedPreconditionError("the daemon is not running");
  ::kill(daemon_pid_, SIGTERM);
  const absl::Time deadline = absl::Now() + timeout;
  int wait_status = 0;
  while (::waitpid(pid_, &wait_status, WNOHANG) == 0) {
    if (absl::Now() >= deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &wait_status, 0);
      Reaped();
      return absl::DeadlineExceededError(absl::StrCat(
          "xferd ", node_id_, " still running ", absl::FormatDuration(timeout), " after SIGTERM"));
    }
    absl::SleepFor(kPollInterval);
  }
  Reaped();
  return ExitCode(wait_status);
}

std::string Daemon::Log() const { return ReadFile(log_path_); }

void FillPattern(uint8_t* data, size_t size, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;  // xorshift64: fast, never stuck at 0
  for (size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    data[i] = static_cast<uint8_t>(x >> 32);
  }
}

}  // namespace xferd::integration
