#include "shared/checkpoint/drive_layout.h"

#include <gtest/gtest.h>

#include <set>

#include "tests/test_util.h"

namespace k3 {
namespace {

TEST(DriveLayout, EveryLayerIsSpreadOverAllDrives) {
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  ASSERT_TRUE(c.ok());
  for (int drives : {1, 2, 3, 5, 7}) {
    for (int replicas = 1; replicas <= std::min(drives, 3); ++replicas) {
      auto p = checkpoint::plan_drive_layout(*c, drives, replicas);
      ASSERT_TRUE(p.ok()) << p.status();
      // Within a layer: each drive holds E*r/D experts, give or take one.
      const int64_t per = c->num_experts * replicas / drives;
      EXPECT_GE(p->min_per_layer(), per) << drives << " " << replicas;
      EXPECT_LE(p->max_per_layer(), per + 1) << drives << " " << replicas;
      // Every expert on `replicas` distinct drives, and the drives' lists
      // agree with drives_of().
      size_t listed = 0;
      uint64_t lo = ~0ull, hi = 0;
      for (int d = 0; d < drives; ++d) {
        for (const auto& [l, e] : p->experts_of(d)) {
          const auto ds = p->drives_of(l, e);
          EXPECT_NE(std::find(ds.begin(), ds.end(), d), ds.end());
        }
        listed += p->experts_of(d).size();
        lo = std::min(lo, p->bytes_of(d));
        hi = std::max(hi, p->bytes_of(d));
      }
      for (int64_t l = c->first_k_dense_replace; l < c->num_hidden_layers; ++l)
        for (int64_t e = 0; e < c->num_experts; ++e) {
          const auto ds = p->drives_of(l, e);
          EXPECT_EQ(std::set<int>(ds.begin(), ds.end()).size(), static_cast<size_t>(replicas));
        }
      EXPECT_EQ(listed, static_cast<size_t>(c->num_moe_layers() * c->num_experts * replicas));
      // Totals balanced to one expert.
      EXPECT_LE(hi - lo, c->expert_bytes()) << drives << " " << replicas;
    }
  }
}

TEST(DriveLayout, RefusesImpossiblePlans) {
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  EXPECT_EQ(checkpoint::plan_drive_layout(*c, 0, 1).status().message(),
            "placement needs at least one drive");
  EXPECT_EQ(checkpoint::plan_drive_layout(*c, 3, 4).status().message(),
            "--replicas 4 must be between 1 and the 3 drives (a replica needs a drive of its own)");
}

}  // namespace
}  // namespace k3
