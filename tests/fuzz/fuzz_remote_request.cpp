// libFuzzer target: the remote expertd wire protocol (proto/k3serve/v1/
// expert.proto, RemoteExpertService) from both ends, on the tiny model's
// geometry (tests/fuzz/corpus/config/tiny.json, mkmodel's tiny config).
// The first byte picks what the rest is:
//   0: an ExpertStreamRequest as another host sends it (ParseFromArray),
//      through expertd's check (shared/experts/remote_protocol.h);
//   1: a valid request built from the bytes, then mutated field by field
//      (structured: sizes off by a little, experts repeated or unserved,
//      rows past the end), through the same check; an unmutated one must
//      pass;
//   2: a DescribeResponse as a host answers it, through engined's check
//      (shared/experts/remote_protocol.h);
//   3: the replies of one step: a request (2-byte little-endian length,
//      then its bytes, checked as in 0; engined sent it) followed by
//      replies, each a 2-byte length and its bytes, through engined's
//      reply check.
// Every request that passes the check is computed as expertd computes it
// (experts::check_request, then complete_locally on expert bytes that are
// synthetic but well-formed): it must be computable, never read out of
// bounds (ASan), and give rows of the size the reply promises. Completed
// replies must hold exactly what the step asked for.
//
// Seeds: K3_FUZZ_WRITE_SEEDS=DIR fuzz_remote_request -runs=0 writes the
// committed corpus (tests/fuzz/corpus/remote/) into DIR: requests as
// engined's encoder (shared/experts/remote_protocol.h) builds them from real
// quantized activations, replies computed as expertd computes them, and a
// Describe answer as expertd's builds it.
#include <omp.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "shared/base/cpu_features.h"
#include "shared/base/log.h"
#include "shared/checkpoint/model_config.h"
#include "shared/experts/expert_source.h"
#include "shared/experts/remote_protocol.h"
#include "shared/kernels/mxfp4.h"

using namespace k3;
namespace pb = k3serve::v1;

namespace {

struct World {
  experts::RemoteHostView host;
  std::vector<uint8_t> expert;  // one expert's bytes, {shape.bytes}
  World() {
    std::ifstream f(K3_FUZZ_MODEL_CONFIG);
    std::stringstream ss;
    ss << f.rdbuf();
    auto c = checkpoint::parse_model_config(ss.str());
    if (!c.ok()) __builtin_trap();
    host.shape = experts::ExpertShape::of(*c);
    host.fingerprint = "00000000c0ffee00";
    host.kernel_isa = std::string(base::kernel_isa_name(base::kernel_isa()));
    host.serves = [](int64_t, int64_t e) { return e % 4 != 3; };  // a host missing a quarter
    // Packed FP4 nibbles and E8M0 scales below 0x80: finite weights (an
    // expertd refuses 0xFF scales when it reads an expert).
    expert.resize(host.shape.bytes);
    for (size_t i = 0; i < expert.size(); ++i)
      expert[i] = static_cast<uint8_t>((i * 37 + 11) & 0x7f);
    base::set_log_level("error");
    // One thread: an input is small, and splitting rows changes no bit.
    omp_set_num_threads(1);
    // Parsing hostile bytes makes protobuf log each invalid UTF-8 string:
    // the refusal is the parse result, the log only slows the fuzzer.
    google::protobuf::SetLogHandler(nullptr);
  }
};

World& world() {
  static World w;
  return w;
}

struct Input {
  const uint8_t* p;
  size_t n;
  template <typename T>
  T take() {
    T v{};
    const size_t k = std::min(n, sizeof(T));
    std::memcpy(&v, p, k);
    p += k;
    n -= k;
    return v;
  }
  // A length-prefixed piece (2 bytes, little endian), cut at the end.
  std::string piece() {
    const size_t len = std::min<size_t>(take<uint16_t>(), n);
    std::string s(reinterpret_cast<const char*>(p), len);
    p += len;
    n -= len;
    return s;
  }
};

// Computes a checked request as expertd's shared-memory source does, and
// holds the results to what a reply must carry.
void compute(const experts::CheckedRequest& c) {
  const World& w = world();
  const experts::ExpertRequest r = c.request();
  if (!experts::check_request(r, w.host.shape.num_experts).ok()) __builtin_trap();
  if (c.mode != pb::EXPERT_MODE_COMPUTE) {
    if (r.activations != nullptr) __builtin_trap();
    for (const experts::ExpertWork& wk : r.work)
      if (wk.compute || !wk.rows.empty()) __builtin_trap();
    return;
  }
  if (r.activations == nullptr || r.activations->tokens < 1) __builtin_trap();
  for (size_t i = 0; i < r.work.size(); ++i) {
    if (!w.host.serves(r.layer, r.work[i].expert)) __builtin_trap();
    bool keep = false;
    experts::ExpertSourceStats st;
    const experts::ExpertCompletion done =
        experts::complete_locally(w.host.shape, r, i, w.expert.data(), &st, &keep);
    if (done.index != i ||
        done.rows.size() != r.work[i].rows.size() * static_cast<size_t>(w.host.shape.latent))
      __builtin_trap();
  }
}

void check_and_compute(const pb::ExpertStreamRequest& req) {
  auto c = experts::check_remote_request(req, world().host);
  if (c.ok()) compute(*c);
}

// A valid request from the bytes: mode, layer, distinct served experts and
// distinct rows inside the activations.
pb::ExpertStreamRequest build(Input& in) {
  const World& w = world();
  const experts::ExpertShape& s = w.host.shape;
  pb::ExpertStreamRequest r;
  const uint8_t mode = in.take<uint8_t>() % 3;
  r.set_step(in.take<uint8_t>());
  r.set_model_fingerprint(w.host.fingerprint);
  r.set_layer(static_cast<uint32_t>(s.first_moe_layer +
                                    in.take<uint8_t>() % (s.num_layers - s.first_moe_layer)));
  r.set_mode(mode == 0   ? pb::EXPERT_MODE_COMPUTE
             : mode == 1 ? pb::EXPERT_MODE_BYTES
                         : pb::EXPERT_MODE_PREFETCH);
  const uint32_t tokens = 1 + in.take<uint8_t>() % 8;
  const size_t lat = static_cast<size_t>(s.latent);
  if (mode == 0) {
    r.set_kernel_isa(w.host.kernel_isa);
    r.set_int8(in.take<uint8_t>() & 1);
    r.set_tokens(tokens);
    if (r.int8()) {
      std::string q(tokens * lat, '\0');
      for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<char>(in.take<uint8_t>());
      std::vector<float> sc(tokens * lat / 32);
      for (float& v : sc) v = static_cast<float>(in.take<uint8_t>()) / 1024.0f;
      r.set_q(q);
      r.set_q_scales(reinterpret_cast<const char*>(sc.data()), sc.size() * sizeof(float));
    } else {
      std::vector<float> f(tokens * lat);
      for (float& v : f) v = static_cast<float>(in.take<int8_t>()) / 64.0f;
      r.set_f32(reinterpret_cast<const char*>(f.data()), f.size() * sizeof(float));
    }
  }
  const uint32_t experts = in.take<uint8_t>() % 6;
  uint64_t used = 0;  // a bitmap over the tiny model's 32 experts (at most 64)
  for (uint32_t k = 0; k < experts; ++k) {
    uint32_t e = in.take<uint8_t>() % static_cast<uint32_t>(s.num_experts);
    while (!w.host.serves(r.layer(), e) || ((used >> e) & 1))
      e = (e + 1) % static_cast<uint32_t>(s.num_experts);
    used |= uint64_t{1} << e;
    pb::ExpertWorkItem* it = r.add_work();
    it->set_expert(e);
    if (mode != 0) continue;
    const uint8_t rows = in.take<uint8_t>();  // a subset of the tokens
    for (uint32_t t = 0; t < tokens; ++t)
      if ((rows >> t) & 1) it->add_rows(t);
  }
  return r;
}

// One mutation of a valid request, chosen by the bytes; false: none.
bool mutate(Input& in, pb::ExpertStreamRequest& r) {
  const uint8_t what = in.take<uint8_t>();
  const uint32_t v = in.take<uint32_t>();
  switch (what % 16) {
    case 0:
      r.set_tokens(r.tokens() + 1 + v % 3);
      return true;
    case 1:
      r.set_tokens(r.tokens() > 0 ? r.tokens() - 1 : v);
      return true;
    case 2:
      r.mutable_q()->resize(v % (r.q().size() + 64));
      return true;
    case 3:
      r.mutable_q_scales()->resize(v % (r.q_scales().size() + 64));
      return true;
    case 4:
      r.mutable_f32()->resize(v % (r.f32().size() + 64));
      return true;
    case 5:
      r.set_int8(!r.int8());
      return true;
    case 6:
      r.set_layer(v % 16);
      return true;
    case 7:
      r.set_mode(static_cast<pb::ExpertMode>(v % 6));
      return true;
    case 8:
      r.set_kernel_isa(v & 1 ? "scalar" : "avx512");
      return true;
    case 9:
      r.set_model_fingerprint(std::string(16, static_cast<char>('0' + v % 10)));
      return true;
    case 10:
      if (r.work_size() == 0) return false;
      r.mutable_work(static_cast<int>(v % r.work_size()))->set_expert(v >> 8);
      return true;
    case 11:
      if (r.work_size() == 0) return false;
      r.mutable_work(static_cast<int>(v % r.work_size()))->add_rows(v >> 8 & 15);
      return true;
    case 12:
      if (r.work_size() == 0) return false;
      *r.add_work() = r.work(static_cast<int>(v % r.work_size()));
      return true;
    case 13:
      r.set_tokens(v);
      return true;
    default:
      return false;
  }
}

void replies(Input& in) {
  const World& w = world();
  pb::ExpertStreamRequest req;
  const std::string head = in.piece();
  if (!req.ParseFromArray(head.data(), static_cast<int>(head.size()))) return;
  auto c = experts::check_remote_request(req, w.host);
  if (!c.ok()) return;
  const experts::ExpertRequest r = c->request();
  experts::RemoteStepReplies step;
  step.start(w.host.shape, r.work, c->mode == pb::EXPERT_MODE_BYTES);
  while (in.n > 0 && step.left() > 0) {
    const std::string body = in.piece();
    pb::ExpertStreamReply reply;
    if (!reply.ParseFromArray(body.data(), static_cast<int>(body.size()))) return;
    const size_t left = step.left();
    auto got = step.take(reply);
    if (!got.ok()) return;  // the source fails the step
    if (!got->has_value()) continue;
    const experts::RemoteResult& res = **got;
    if (res.index >= r.work.size() || step.left() != left - 1) __builtin_trap();
    if (c->mode == pb::EXPERT_MODE_BYTES) {
      if (res.bytes.size() != w.host.shape.bytes || !res.rows.empty()) __builtin_trap();
    } else if (res.rows.size() !=
                   r.work[res.index].rows.size() * static_cast<size_t>(w.host.shape.latent) ||
               !res.bytes.empty()) {
      __builtin_trap();
    }
  }
}

// --- Seeds (K3_FUZZ_WRITE_SEEDS) ---

std::string le16(size_t n) {
  if (n > 0xffff) __builtin_trap();
  return std::string{static_cast<char>(n & 0xff), static_cast<char>(n >> 8)};
}

void write_seed(const std::string& dir, const std::string& name, char kind,
                const std::string& body) {
  std::ofstream(dir + "/" + name, std::ios::binary) << kind << body;
}

// The replies expertd sends for a checked request: rows computed here, or
// the expert's bytes in chunks (expertd sends 1 MiB ones; the tiny model's
// expert fits one, cut in two here to seed the chunk logic).
std::string replies_of(const pb::ExpertStreamRequest& req) {
  const World& w = world();
  auto c = experts::check_remote_request(req, w.host);
  if (!c.ok()) __builtin_trap();
  const experts::ExpertRequest r = c->request();
  std::string out;
  for (size_t i = 0; i < r.work.size(); ++i) {
    bool keep = false;
    experts::ExpertSourceStats st;
    const experts::ExpertCompletion done =
        experts::complete_locally(w.host.shape, r, i, w.expert.data(), &st, &keep);
    if (c->mode == pb::EXPERT_MODE_BYTES) {
      const uint64_t half = w.host.shape.bytes / 2;
      for (uint64_t off : {uint64_t{0}, half}) {
        pb::ExpertStreamReply reply;
        reply.set_step(req.step());
        reply.set_index(static_cast<uint32_t>(i));
        reply.set_offset(off);
        reply.set_total_bytes(w.host.shape.bytes);
        const uint64_t len = off == 0 ? half : w.host.shape.bytes - half;
        reply.set_data(reinterpret_cast<const char*>(done.bytes) + off, len);
        const std::string m = reply.SerializeAsString();
        out += le16(m.size()) + m;
      }
      continue;
    }
    pb::ExpertStreamReply reply;
    reply.set_step(req.step());
    reply.set_index(static_cast<uint32_t>(i));
    reply.set_rows(reinterpret_cast<const char*>(done.rows.data()),
                   done.rows.size() * sizeof(float));
    const std::string m = reply.SerializeAsString();
    out += le16(m.size()) + m;
  }
  return out;
}

void write_seeds(const std::string& dir) {
  const World& w = world();
  const experts::ExpertShape& s = w.host.shape;
  // Five tokens of real activations, quantized as the engine quantizes them.
  const int64_t T = 5, lat = s.latent;
  std::vector<float> x(static_cast<size_t>(T * lat));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  std::vector<int8_t> q(x.size());
  std::vector<float> qs(x.size() / 32);
  for (int64_t t = 0; t < T; ++t)
    kernels::quantize_q8_32(x.data() + t * lat, lat, q.data() + t * lat, qs.data() + t * lat / 32);
  experts::ExpertActivations a8{T, true, q.data(), qs.data(), nullptr};
  experts::ExpertActivations af{T, false, nullptr, nullptr, x.data()};
  experts::ExpertRequest r;
  r.layer = 2;
  r.work = {{0, true, {0, 3}}, {5, true, {1, 3, 4}}, {9, true, {4}}};  // token 2 went elsewhere
  r.activations = &a8;
  const auto i8 =
      experts::encode_step_request(s, r, 41, w.host.fingerprint, false, w.host.kernel_isa);
  r.activations = &af;
  const auto f32 =
      experts::encode_step_request(s, r, 42, w.host.fingerprint, false, w.host.kernel_isa);
  experts::ExpertRequest rb;
  rb.layer = 3;
  rb.work = {{6, false, {}}};
  const auto bytes =
      experts::encode_step_request(s, rb, 43, w.host.fingerprint, true, w.host.kernel_isa);
  pb::ExpertStreamRequest prefetch;  // as RemoteExpertSource::submit builds one
  prefetch.set_model_fingerprint(w.host.fingerprint);
  prefetch.set_layer(4);
  prefetch.set_mode(pb::EXPERT_MODE_PREFETCH);
  for (uint32_t e : {1u, 2u, 12u}) prefetch.add_work()->set_expert(e);
  // Real requests pass (and a real Describe, below).
  for (const pb::ExpertStreamRequest* m :
       std::initializer_list<const pb::ExpertStreamRequest*>{&i8, &f32, &bytes, &prefetch})
    if (!experts::check_remote_request(*m, w.host).ok()) __builtin_trap();
  write_seed(dir, "request_int8", 0, i8.SerializeAsString());
  write_seed(dir, "request_f32", 0, f32.SerializeAsString());
  write_seed(dir, "request_bytes", 0, bytes.SerializeAsString());
  write_seed(dir, "request_prefetch", 0, prefetch.SerializeAsString());
  std::string structured;
  for (int i = 0; i < 48; ++i) structured += static_cast<char>(i * 29 + 3);
  write_seed(dir, "structured", 1, structured);
  // A Describe answer as expertd's ControlService builds it.
  pb::DescribeResponse d;
  d.set_model_fingerprint(w.host.fingerprint);
  d.set_expert_bytes(s.bytes);
  for (int64_t l = s.first_moe_layer; l < s.num_layers; ++l) {
    std::string bits(static_cast<size_t>((s.num_experts + 7) / 8), '\0');
    uint32_t n = 0;
    for (int64_t e = 0; e < s.num_experts; ++e)
      if (w.host.serves(l, e)) {
        bits[static_cast<size_t>(e / 8)] |= static_cast<char>(1u << (e % 8));
        ++n;
      }
    pb::ServedLayer* sl = d.add_layers();
    sl->set_layer(static_cast<uint32_t>(l));
    sl->set_expert_count(n);
    sl->set_experts(bits);
  }
  d.set_remote_listen("10.0.0.2:7070");
  d.set_kernel_isa(w.host.kernel_isa);
  if (!experts::check_describe(d, s, w.host.fingerprint, "seed").ok()) __builtin_trap();
  write_seed(dir, "describe", 2, d.SerializeAsString());
  const std::string i8m = i8.SerializeAsString(), bm = bytes.SerializeAsString();
  write_seed(dir, "step_compute", 3, le16(i8m.size()) + i8m + replies_of(i8));
  write_seed(dir, "step_bytes", 3, le16(bm.size()) + bm + replies_of(bytes));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("K3_FUZZ_WRITE_SEEDS")) write_seeds(dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  World& w = world();
  Input in{data + 1, size - 1};
  switch (data[0] % 4) {
    case 0: {
      pb::ExpertStreamRequest req;
      if (req.ParseFromArray(in.p, static_cast<int>(in.n))) check_and_compute(req);
      break;
    }
    case 1: {
      pb::ExpertStreamRequest req = build(in);
      bool mutated = false;
      for (int k = 0; k < 3 && in.n > 0; ++k) mutated |= mutate(in, req);
      // Through the wire form, as the server gets it.
      const std::string wire = req.SerializeAsString();
      pb::ExpertStreamRequest got;
      if (!got.ParseFromString(wire)) __builtin_trap();
      auto c = experts::check_remote_request(got, w.host);
      if (!mutated && !c.ok()) __builtin_trap();  // a valid request was refused
      if (c.ok()) compute(*c);
      break;
    }
    case 2: {
      pb::DescribeResponse d;
      if (!d.ParseFromArray(in.p, static_cast<int>(in.n))) break;
      auto owned = experts::check_describe(d, w.host.shape, w.host.fingerprint, "fuzz (x:1)");
      if (!owned.ok()) break;
      const size_t nbytes = static_cast<size_t>((w.host.shape.num_experts + 7) / 8);
      if (owned->size() != static_cast<size_t>(w.host.shape.num_layers)) __builtin_trap();
      for (const auto& bits : *owned)
        if (!bits.empty() && bits.size() != nbytes) __builtin_trap();
      break;
    }
    default:
      replies(in);
  }
  return 0;
}
