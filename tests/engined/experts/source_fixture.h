// The in-process expert source over the tiny model's real shard files, and
// latent activations in both kernels' forms: what the expert source suites
// (pread_source_test, routing_source_test) build on.
#pragma once

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "engined/experts/pread_source.h"
#include "shared/kernels/mxfp4.h"
#include "tests/test_util.h"

namespace k3::engined {

namespace test {

struct Fixture {
  checkpoint::ModelConfig config;
  std::unique_ptr<checkpoint::Checkpoint> ck;
  std::unique_ptr<checkpoint::ExpertIndex> index;
  experts::ExpertShape shape;

  Fixture() {
    auto c = checkpoint::load_model_config(testing::tiny_model_dir());
    EXPECT_TRUE(c.ok()) << c.status();
    config = *c;
    auto k = checkpoint::Checkpoint::open(testing::tiny_model_dir());
    EXPECT_TRUE(k.ok()) << k.status();
    ck = std::move(*k);
    auto ix = checkpoint::ExpertIndex::build(*ck, config);
    EXPECT_TRUE(ix.ok()) << ix.status();
    index = std::make_unique<checkpoint::ExpertIndex>(std::move(*ix));
    shape = experts::ExpertShape::of(config);
  }
  std::unique_ptr<PreadExpertSource> source(uint64_t cache_bytes = 1ull << 30, int threads = 2) {
    PreadSourceOptions o;
    o.cache_bytes = cache_bytes;
    o.threads = threads;
    o.direct = false;
    auto s = PreadExpertSource::create(*ck, *index, shape, o);
    EXPECT_TRUE(s.ok()) << s.status();
    return std::move(*s);
  }
  // The expert's bytes straight from its shard file.
  std::vector<uint8_t> file_bytes(int64_t layer, int64_t expert) const {
    const checkpoint::ExpertLocation& loc = index->at(layer, expert);
    std::vector<uint8_t> b(index->expert_bytes());
    EXPECT_TRUE(ck->file(loc.file).pread_exact(b.data(), b.size(), loc.offset).ok());
    return b;
  }
};

// Latent activations of a few tokens, both kernels' forms.
struct Acts {
  std::vector<float> f32;
  std::vector<int8_t> q;
  std::vector<float> qs;
  experts::ExpertActivations act;
  Acts(int64_t tokens, int64_t lat, bool int8)
      : f32(tokens * lat), q(tokens * lat), qs(tokens * lat / 32) {
    for (size_t i = 0; i < f32.size(); ++i) f32[i] = std::sin(0.37f * static_cast<float>(i)) * 2;
    for (int64_t t = 0; t < tokens; ++t)
      kernels::quantize_q8_32(f32.data() + t * lat, lat, q.data() + t * lat,
                              qs.data() + t * lat / 32);
    act.tokens = tokens;
    act.int8 = int8;
    act.f32 = f32.data();
    act.q = q.data();
    act.q_scales = qs.data();
  }
};

}  // namespace test
}  // namespace k3::engined
