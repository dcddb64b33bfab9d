#include "daemon/engine/layouts.h"

#include "absl/strings/str_cat.h"

namespace xferd::engine {

absl::Status LayoutRegistry::Add(std::shared_ptr<const Layout> layout) {
  MutexLock lock(&mu_);
  const std::string name = layout->name;
  if (!layouts_.emplace(name, std::move(layout)).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("a layout named '", name, "' exists: delete it first or pick another name"));
  }
  return absl::OkStatus();
}

absl::Status LayoutRegistry::Remove(const std::string& name, const Tenant& tenant) {
  MutexLock lock(&mu_);
  auto it = layouts_.find(name);
  if (it == layouts_.end()) {
    return absl::NotFoundError(absl::StrCat("no layout named '", name, "'"));
  }
  if (!tenant.Owns(it->second->owner)) {
    return tenant.Denied(absl::StrCat("layout '", name, "' belongs to tenant '",
                                      it->second->owner, "', not to tenant '", tenant.name(),
                                      "'"));
  }
  layouts_.erase(it);
  return absl::OkStatus();
}

std::shared_ptr<const Layout> LayoutRegistry::Find(const std::string& name) const {
  MutexLock lock(&mu_);
  auto it = layouts_.find(name);
  return it == layouts_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<const Layout>> LayoutRegistry::List() const {
  MutexLock lock(&mu_);
  std::vector<std::shared_ptr<const Layout>> out;
  out.reserve(layouts_.size());
  for (const auto& [name, layout] : layouts_) out.push_back(layout);
  return out;
}

}  // namespace xferd::engine
