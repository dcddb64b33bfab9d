#include "tests/testing/test_certs.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace xferd::testing {
namespace {

absl::Status Sh(const std::string& command) {
  const std::string line = absl::StrCat("set -e; ", command, " >/dev/null 2>&1");
  if (std::system(line.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("failed: ", command));
  }
  return absl::OkStatus();
}

std::string NewKey(const std::string& path) {
  return absl::StrCat("openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ", path);
}

}  // namespace

TestCa::TestCa(std::string dir, std::string name)
    : dir_(std::move(dir)),
      name_(std::move(name)),
      cert_(absl::StrCat(dir_, "/", name_, ".pem")),
      key_(absl::StrCat(dir_, "/", name_, ".key")) {}

absl::StatusOr<TestCa> TestCa::Create(const std::string& dir, const std::string& name) {
  TestCa ca(dir, name);
  absl::Status s = Sh(absl::StrCat(NewKey(ca.key_), "; openssl req -x509 -new -key ", ca.key_,
                                   " -out ", ca.cert_, " -days 1 -subj /CN=", name,
                                   " -addext basicConstraints=critical,CA:TRUE"));
  if (!s.ok()) return s;
  return ca;
}

absl::StatusOr<TestCert> TestCa::Issue(const std::string& name, const std::string& ext) {
  const std::string stem = absl::StrCat(dir_, "/", name_, "-", name, "-", ++serial_);
  TestCert out{stem + ".pem", stem + ".key"};
  {
    std::ofstream f(stem + ".ext");
    f << ext << "\n";
  }
  absl::Status s = Sh(absl::StrCat(NewKey(out.key), "; openssl req -new -key ", out.key, " -out ",
                                   stem, ".csr -subj /CN=", name, "; openssl x509 -req -in ", stem,
                                   ".csr -CA ", cert_, " -CAkey ", key_, " -out ", out.cert,
                                   " -days 1 -set_serial ", serial_, " -extfile ", stem, ".ext"));
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<TestCert> TestCa::IssueForDaemon(const std::string& name) {
  return Issue(name, absl::StrCat("subjectAltName=DNS:", name,
                                  ",DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,"
                                  "clientAuth"));
}

std::string ReadTestFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace xferd::testing
