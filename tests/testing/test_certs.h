// Test certificates for C++ tests, made with the openssl CLI at test time:
// a CA in a directory and certificates it issues (P-256 keys, valid a day,
// usable as TLS client and server). The Python twin is
// tests/integration/python/certs.py. Not thread-safe.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace xferd::testing {

struct TestCert {
  std::string cert;  // PEM file paths
  std::string key;
};

class TestCa {
 public:
  // Creates `<dir>/<name>.pem` and `.key` (dir must exist). INTERNAL if
  // openssl fails.
  static absl::StatusOr<TestCa> Create(const std::string& dir, const std::string& name);

  // Issues a certificate with CN `name` and extensions `ext` (openssl
  // extfile lines, e.g. "subjectAltName=DNS:a,IP:127.0.0.1"; may be empty).
  absl::StatusOr<TestCert> Issue(const std::string& name, const std::string& ext);
  // A daemon certificate: DNS SANs `name` and localhost, IP SAN 127.0.0.1.
  absl::StatusOr<TestCert> IssueForDaemon(const std::string& name);

  const std::string& cert() const { return cert_; }

 private:
  TestCa(std::string dir, std::string name);
  std::string dir_, name_, cert_, key_;
  int serial_ = 0;
};

// The whole content of a file ("" if unreadable).
std::string ReadTestFile(const std::string& path);

}  // namespace xferd::testing
