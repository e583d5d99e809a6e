// libFuzzer target: the integrity manifest (k3ctl verify --manifest, the
// daemons' --manifest): every accepted manifest round-trips through its own
// writer to the same entries.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "shared/checkpoint/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = k3::checkpoint::Manifest::parse(
      std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  if (!m.ok()) return 0;
  std::string again = k3::checkpoint::manifest_header_line(m->header()) + "\n";
  for (const k3::checkpoint::ManifestEntry& e : m->entries())
    again += k3::checkpoint::manifest_entry_line(e) + "\n";
  auto m2 = k3::checkpoint::Manifest::parse(again, "again");
  if (!m2.ok() || m2->entries().size() != m->entries().size()) __builtin_trap();
  for (size_t i = 0; i < m->entries().size(); ++i) {
    const auto &a = m->entries()[i], &b = m2->entries()[i];
    if (a.name != b.name || a.bytes != b.bytes || !(a.hash == b.hash) || a.shape != b.shape ||
        a.layer != b.layer || a.id != b.id || a.dtype != b.dtype)
      __builtin_trap();
  }
  return 0;
}
