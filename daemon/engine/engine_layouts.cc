// Engine: prepared layouts — registration (checked against a local region at
// once), and binding the layouts a transfer names to its regions.
#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/engine/engine.h"

namespace xferd::engine {
namespace {

// The first block of a local layout outside its region, as an error.
absl::Status CheckLayoutInRegion(const Layout& l, uint64_t size) {
  if (l.extent() <= size) return absl::OkStatus();
  for (uint64_t k = 0; k < l.blocks(); ++k) {
    const unsigned __int128 wide =
        l.offsets.empty() ? static_cast<unsigned __int128>(k) * l.stride + l.start : l.offsets[k];
    const uint64_t offset = wide > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(wide);
    if (offset > size || l.block_length > size - offset) {
      return absl::OutOfRangeError(
          absl::StrCat("layout '", l.name, "' block #", k, ": range [", offset, ", ", offset, "+",
                       l.block_length, ") exceeds region '", l.region, "' of ", size, " bytes"));
    }
  }
  return absl::OutOfRangeError(
      absl::StrCat("layout '", l.name, "' exceeds region '", l.region, "' of ", size, " bytes"));
}

// Fills `region` from the layout, or checks that the request names the same.
absl::Status BindRegion(std::string* region, const Layout& layout, const char* field) {
  if (region->empty()) {
    *region = layout.region;
  } else if (*region != layout.region) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " '", *region, "' but layout '", layout.name, "' is of region '",
                     layout.region, "': leave ", field, " empty or make them agree"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Layout>> Engine::PrepareLayout(Layout layout) {
  if (absl::Status s = CheckLayoutShape(layout); !s.ok()) return s;
  if (layout.peer.empty()) {
    std::shared_ptr<memory::Region> region = regions_.Find(layout.region);
    if (region == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("region '", layout.region, "' is not registered on this daemon"));
    }
    if (absl::Status s = CheckLayoutInRegion(layout, region->size()); !s.ok()) return s;
  } else {
    std::shared_ptr<Peer> peer = peers_.Find(layout.peer);
    if (peer == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("no peer '", layout.peer, "' (by node id or address): connect it first"));
    }
    layout.peer = peer->node_id();
  }
  auto shared = std::make_shared<const Layout>(std::move(layout));
  if (absl::Status s = layouts_.Add(shared); !s.ok()) return s;
  spdlog::info("layout prepared name={} peer={} region={} blocks={} block_length={}", shared->name,
               shared->peer, shared->region, shared->blocks(), shared->block_length);
  return shared;
}

absl::Status Engine::DeleteLayout(const std::string& name) { return layouts_.Remove(name); }

absl::Status Engine::BindLayouts(WriteSpec& w) const {
  BlockSpec& b = w.blocks;
  if (b.form != BlockSpec::Form::kLayout) return absl::OkStatus();
  b.src_layout_ref = layouts_.Find(b.src_layout);
  b.dst_layout_ref = layouts_.Find(b.dst_layout);
  for (const auto& [name, ref] :
       {std::pair{&b.src_layout, &b.src_layout_ref}, std::pair{&b.dst_layout, &b.dst_layout_ref}}) {
    if (*ref == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("no layout named '", *name, "': prepare it with PrepareLayout"));
    }
  }
  // The peer's side must be a layout of that peer, the local side a local one.
  const Layout& local = IsRead(w) ? *b.dst_layout_ref : *b.src_layout_ref;
  const Layout& remote = IsRead(w) ? *b.src_layout_ref : *b.dst_layout_ref;
  if (!local.peer.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout '", local.name, "' is of peer '", local.peer,
                     "' but names the local side of this ", IsRead(w) ? "read" : "write"));
  }
  std::shared_ptr<Peer> peer = peers_.Find(w.peer);
  if (remote.peer.empty() || peer == nullptr || peer->node_id() != remote.peer) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout '", remote.name, "' is ",
                     remote.peer.empty() ? "local" : "of peer '" + remote.peer + "'",
                     " but names the side on peer '", w.peer, "': prepare it with that peer"));
  }
  if (absl::Status s = BindRegion(&w.src_region, *b.src_layout_ref, "src_region"); !s.ok()) {
    return s;
  }
  return BindRegion(&w.dst_region, *b.dst_layout_ref, "dst_region");
}

}  // namespace xferd::engine
