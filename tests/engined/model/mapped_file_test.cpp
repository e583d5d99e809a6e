// --mmap on a container: the prepared matrices are viewed in a read-only
// mapping (bit-identical results), refused where a matrix would need
// conversion, and shared between processes (small RssAnon, Pss about half of
// the mapping's Rss with two processes).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "engined/experts/source_factory.h"
#include "engined/model/model.h"
#include "shared/checkpoint/repack.h"
#include "tests/test_util.h"

namespace k3::engined {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::string repacked(const TempDir& tmp, const std::string& name, int dense, int mla, int head) {
  checkpoint::RepackOptions o;
  o.model_dir = testing::tiny_model_dir();
  o.out_dir = tmp.file(name);
  o.dense_bits = dense;
  o.mla_bits = mla;
  o.head_bits = head;
  auto r = checkpoint::repack(o);
  EXPECT_TRUE(r.ok()) << r.status();
  return o.out_dir;
}

StatusOr<std::vector<float>> score(const std::string& dir, const QuantConfig& q) {
  EngineOptions opt;
  opt.quant = q;
  K3_ASSIGN_OR_RETURN(auto m, Model::load(dir, {}, opt));
  std::vector<int32_t> ids;
  for (int i = 0; i < 7; ++i)
    ids.push_back(static_cast<int32_t>((i * 7919 + 13) % m->config().vocab_size));
  auto seq = m->new_sequence();
  std::vector<float> logits;
  K3_ASSIGN_OR_RETURN(auto experts, make_expert_source(ExpertSourceOptions{}, *m));
  K3_RETURN_IF_ERROR(m->forward(*experts, *seq, ids, static_cast<int64_t>(ids.size()), &logits));
  // Every big matrix viewed, not copied, under --mmap.
  const ModelWeights& w = m->weights();
  if (q.mmap &&
      !(w.lm_head.is_view() && w.embed_view != nullptr &&
        (w.layers[0].kda ? w.layers[0].kda_w.q.is_view() : w.layers[0].mla_w.q_a.is_view())))
    return absl::InternalError("a big matrix was copied under --mmap");
  return logits;
}

TEST(Mmap, LogitsBitIdenticalToTheCopiedContainerAndTheSource) {
  for (auto [dense, mla, head] : {std::tuple{4, 8, 8}, {8, 32, 32}, {4, 32, 8}, {8, 8, 32}}) {
    SCOPED_TRACE(testing::source_dir() + " dense " + std::to_string(dense) + " mla " +
                 std::to_string(mla) + " head " + std::to_string(head));
    TempDir tmp;
    const std::string c = repacked(tmp, "c", dense, mla, head);
    QuantConfig q{dense, mla, head};
    auto src = score(testing::tiny_model_dir(), q);
    auto copied = score(c, q);
    q.mmap = true;
    auto mapped = score(c, q);
    ASSERT_TRUE(src.ok() && copied.ok() && mapped.ok()) << mapped.status();
    ASSERT_EQ(mapped->size(), src->size());
    EXPECT_EQ(std::memcmp(mapped->data(), src->data(), src->size() * 4), 0);
    EXPECT_EQ(std::memcmp(copied->data(), src->data(), src->size() * 4), 0);
  }
}

TEST(Mmap, RefusedWhereAMatrixWouldNeedConversion) {
  QuantConfig q{4, 8, 8};
  q.mmap = true;
  auto r = score(testing::tiny_model_dir(), q);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("' is BF16 and would need conversion to 4 bits "
                                      "(--dense-bits) at load; --mmap maps only prepared matrices"),
            std::string::npos)
      << r.status();
  TempDir tmp;
  const std::string c = repacked(tmp, "c8", 8, 8, 8);
  q = {4, 8, 8};  // a downcast
  q.mmap = true;
  r = score(c, q);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("' is 8-bit and would need conversion to 4 bits"),
            std::string::npos)
      << r.status();
}

// One field of /proc/PID/smaps_rollup, in kB.
int64_t rollup_kb(int pid, const std::string& field) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/smaps_rollup");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  return -1;
}

// Rss and Pss (kB) of the mappings of `path` in /proc/PID/smaps.
std::pair<int64_t, int64_t> mapping_kb(int pid, const std::string& path) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/smaps");
  std::string line;
  bool in = false;
  int64_t rss = 0, pss = 0;
  while (std::getline(f, line)) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        line.find('-') < line.find(' ')) {
      in = line.size() >= path.size() &&
           line.compare(line.size() - path.size(), path.size(), path) == 0;
      continue;
    }
    if (!in) continue;
    if (line.rfind("Rss:", 0) == 0) rss += std::stoll(line.substr(4));
    if (line.rfind("Pss:", 0) == 0) pss += std::stoll(line.substr(4));
  }
  return {rss, pss};
}

bool wait_for(const std::string& file, const std::string& text, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (testing::read_file(file).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TEST(Mmap, TwoProcessesShareTheMappedContainer) {
  TempDir tmp;
  // F32 MLA and head: the mapping dominates what a copy would hold privately.
  const std::string c = repacked(tmp, "c", 8, 32, 32);
  const std::string shard = fs::canonical(c + "/model-00001-of-00006.safetensors");
  const int64_t shard_kb = static_cast<int64_t>(fs::file_size(shard) / 1024);
  auto serve = [&](const std::string& name, bool mmap) {
    std::vector<std::string> argv = {testing::bin_dir() + "/engined",
                                     "serve",
                                     "--model",
                                     c,
                                     "--listen",
                                     "unix:" + tmp.file(name + ".sock"),
                                     "--expert-cache-gb",
                                     "0.01",
                                     "--threads",
                                     "1"};
    if (mmap) argv.push_back("--mmap");
    return std::make_unique<testing::Process>(argv, tmp.file(name + ".err"));
  };
  auto a = serve("a", true);
  auto b = serve("b", true);
  auto p = serve("p", false);
  for (const char* n : {"a", "b", "p"})
    ASSERT_TRUE(wait_for(tmp.file(std::string(n) + ".err"), "model ok", 60))
        << testing::read_file(tmp.file(std::string(n) + ".err"));
  ASSERT_TRUE(wait_for(tmp.file("a.err"), "MB mapped read-only (--mmap)", 1));
  const auto [rss_a, pss_a] = mapping_kb(a->pid(), shard);
  const auto [rss_b, pss_b] = mapping_kb(b->pid(), shard);
  // The whole dense shard resident in each, each charged about half.
  EXPECT_GE(rss_a, shard_kb * 9 / 10);
  EXPECT_GE(rss_b, shard_kb * 9 / 10);
  EXPECT_LE(pss_a, rss_a * 6 / 10) << "rss " << rss_a << " pss " << pss_a;
  EXPECT_LE(pss_b, rss_b * 6 / 10) << "rss " << rss_b << " pss " << pss_b;
  // Anonymous memory: the copy holds the matrices privately, the mappers not.
  const int64_t anon_a = rollup_kb(a->pid(), "Anonymous"),
                anon_p = rollup_kb(p->pid(), "Anonymous");
  const int64_t file_a = rollup_kb(a->pid(), "Rss") - anon_a;
  EXPECT_GE(anon_p - anon_a, shard_kb / 2)
      << "anon mmap " << anon_a << " kB, copy " << anon_p << " kB, shard " << shard_kb << " kB";
  EXPECT_GE(file_a, shard_kb * 9 / 10);
  std::printf("shard %lld kB; mmap: Rss %lld Pss %lld kB of it, anon %lld kB; copy: anon %lld kB\n",
              static_cast<long long>(shard_kb), static_cast<long long>(rss_a),
              static_cast<long long>(pss_a), static_cast<long long>(anon_a),
              static_cast<long long>(anon_p));
  EXPECT_EQ(mapping_kb(p->pid(), shard).first, 0);
}

}  // namespace
}  // namespace k3::engined
