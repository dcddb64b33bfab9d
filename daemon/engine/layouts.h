// Prepared layouts by name: registered once (PrepareLayout), then named by
// transfers whose blocks are indices into them. Layouts are immutable; a
// transfer holds the ones it uses while it is planned. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "daemon/base/mutex.h"
#include "daemon/engine/block_spec.h"
#include "daemon/engine/tenants.h"

namespace xferd::engine {

class LayoutRegistry {
 public:
  // ALREADY_EXISTS if the name is taken. Any thread.
  absl::Status Add(std::shared_ptr<const Layout> layout);
  // NOT_FOUND if unknown, PERMISSION_DENIED unless `tenant` owns it
  // (Tenant::Owns). Transfers already planned are unaffected.
  absl::Status Remove(const std::string& name, const Tenant& tenant);
  // Null if unknown.
  std::shared_ptr<const Layout> Find(const std::string& name) const;
  // By name.
  std::vector<std::shared_ptr<const Layout>> List() const;

 private:
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<const Layout>> layouts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace xferd::engine
