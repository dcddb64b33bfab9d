// Fuzzes the parsers of untrusted strings that guard access: a client's file
// region path (memory::OpenConfined, against a real directory tree with
// symlinks, a hard link, a FIFO and a file outside), a List call's page
// token (service::PageStart), a peer's advertised host against a
// certificate's DNS name (DnsNameMatches), and a scraper's Authorization
// header (metrics::ScrapeSecurity::Accepts).
//
// Input: one selector byte, then the string(s). Paths may start with '@',
// which stands for the confined directory (its location differs per run).
// Invariants: an opened file is a regular single-link file inside the
// directory, and a created one too; a token round-trips and never crosses
// lists; a wildcard name stands for exactly one label; only the configured
// credentials open the metrics.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "daemon/common/x509_names.h"
#include "absl/strings/escaping.h"
#include "absl/strings/strip.h"
#include "daemon/memory/confined_file.h"
#include "daemon/metrics/scrape_security.h"
#include "daemon/service/page_token.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using xferd::memory::FileConfinement;

// <tmp>/root/dir is confined; <tmp>/root/outside is not.
struct Tree {
  std::string root;
  std::string dir;
  FileConfinement confinement;

  Tree() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    std::string templ = std::string(tmp != nullptr ? tmp : "/tmp") + "/confined.XXXXXX";
    FUZZ_CHECK(mkdtemp(templ.data()) != nullptr);
    root = templ;
    dir = root + "/dir";
    const std::string outside = root + "/outside";
    FUZZ_CHECK(mkdir(dir.c_str(), 0700) == 0 && mkdir(outside.c_str(), 0700) == 0);
    FUZZ_CHECK(mkdir((dir + "/sub").c_str(), 0700) == 0);
    Touch(dir + "/f");
    Touch(dir + "/sub/g");
    Touch(outside + "/o");
    Touch(dir + "/h1");
    FUZZ_CHECK(link((dir + "/h1").c_str(), (dir + "/h2").c_str()) == 0);
    FUZZ_CHECK(mkfifo((dir + "/p").c_str(), 0600) == 0);
    FUZZ_CHECK(symlink((outside + "/o").c_str(), (dir + "/out").c_str()) == 0);
    FUZZ_CHECK(symlink("f", (dir + "/in").c_str()) == 0);
    FUZZ_CHECK(symlink("..", (dir + "/sub/up").c_str()) == 0);
    FUZZ_CHECK(symlink(outside.c_str(), (dir + "/outdir").c_str()) == 0);
    confinement.dirs = {dir};
  }

  static void Touch(const std::string& path) {
    const int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    FUZZ_CHECK(fd >= 0);
    close(fd);
  }
};

const Tree& tree() {
  static const Tree* t = [] {
    const Tree* made = new Tree();
    // Replays (the corpus test) end through exit(); libFuzzer ends with
    // _Exit, so tests/fuzz/run.sh points TEST_TMPDIR at a scratch directory.
    std::atexit([] { std::filesystem::remove_all(tree().root); });
    return made;
  }();
  return *t;
}

std::string FdPath(int fd) {
  char buf[4096];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = readlink(link.c_str(), buf, sizeof(buf));
  FUZZ_CHECK(n > 0);
  return std::string(buf, static_cast<size_t>(n));
}

void FuzzPath(absl::string_view input, bool create) {
  const Tree& t = tree();
  std::string path(input);
  if (absl::StartsWith(path, "@")) path = t.dir + path.substr(1);
  bool created = false;
  const int flags = create ? (O_RDWR | O_CREAT | O_EXCL) : O_RDONLY;
  absl::StatusOr<xferd::UniqueFd> fd = xferd::memory::OpenConfined(t.confinement, path, flags,
                                                                   &created);
  if (!fd.ok()) {
    FUZZ_CHECK(!created);
    return;
  }
  struct stat st;
  FUZZ_CHECK(fstat(fd->get(), &st) == 0);
  FUZZ_CHECK(S_ISREG(st.st_mode) && st.st_nlink == 1);
  const std::string real = FdPath(fd->get());
  FUZZ_CHECK(absl::StartsWith(real, t.dir + "/"));
  FUZZ_CHECK(created == create);
  if (created) FUZZ_CHECK(unlink(real.c_str()) == 0);  // leave the tree as it was
}

void FuzzToken(absl::string_view input) {
  using xferd::service::PageStart;
  using xferd::service::PageToken;
  static constexpr absl::string_view kLists[] = {"transfers", "regions", "peers"};
  const size_t pick = input.empty() ? 0 : static_cast<uint8_t>(input[0]) % 3;
  const absl::string_view list = kLists[pick];
  const absl::string_view other = kLists[(pick + 1) % 3];
  // As a key: the token of its page round-trips, and is no other list's.
  if (!input.empty()) {
    const std::string token = PageToken(list, input);
    absl::StatusOr<std::string> start = PageStart(list, token);
    FUZZ_CHECK(start.ok() && *start == input);
    FUZZ_CHECK(!PageStart(other, token).ok());
  }
  // As a token: accepted only with a key, which names the same page again.
  absl::StatusOr<std::string> start = PageStart(list, input);
  if (start.ok() && !input.empty()) {
    FUZZ_CHECK(!start->empty());
    absl::StatusOr<std::string> again = PageStart(list, PageToken(list, *start));
    FUZZ_CHECK(again.ok() && *again == *start);
  }
}

void FuzzDnsName(absl::string_view input) {
  const size_t split = input.find('\n');
  if (split == absl::string_view::npos) return;
  const absl::string_view san = input.substr(0, split);
  const absl::string_view host = input.substr(split + 1);
  if (!xferd::DnsNameMatches(san, host) || absl::EqualsIgnoreCase(san, host)) return;
  // A wildcard match: "*.rest" against "label.rest", one label, no dot in it.
  FUZZ_CHECK(absl::StartsWith(san, "*.") && host.size() > san.size() - 1);
  const absl::string_view label = host.substr(0, host.size() - (san.size() - 1));
  FUZZ_CHECK(!label.empty() && label.find('.') == absl::string_view::npos);
  FUZZ_CHECK(absl::EqualsIgnoreCase(host.substr(label.size()), san.substr(1)));
}

void FuzzAuthorization(absl::string_view input) {
  xferd::metrics::ScrapeSecurity security;
  security.basic_user = "prometheus";
  security.basic_password = "s3cret";
  security.bearer_token = "t0ken";
  const std::string header(input);  // as the server hands it: NUL-terminated
  if (!security.Accepts(header.c_str())) return;
  // Accepted: "Bearer t0ken" or Basic of exactly "prometheus:s3cret".
  const absl::string_view value = absl::StripAsciiWhitespace(header.c_str());
  const size_t space = value.find(' ');
  FUZZ_CHECK(space != absl::string_view::npos);
  const absl::string_view scheme = value.substr(0, space);
  const absl::string_view credentials = absl::StripLeadingAsciiWhitespace(value.substr(space));
  std::string decoded;
  FUZZ_CHECK((absl::EqualsIgnoreCase(scheme, "Bearer") && credentials == "t0ken") ||
             (absl::EqualsIgnoreCase(scheme, "Basic") &&
              absl::Base64Unescape(credentials, &decoded) && decoded == "prometheus:s3cret"));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const absl::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 5) {
    case 0:
      FuzzPath(rest, /*create=*/false);
      break;
    case 1:
      FuzzPath(rest, /*create=*/true);
      break;
    case 2:
      FuzzToken(rest);
      break;
    case 3:
      FuzzDnsName(rest);
      break;
    default:
      FuzzAuthorization(rest);
      break;
  }
  return 0;
}
