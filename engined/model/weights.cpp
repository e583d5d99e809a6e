#include "engined/model/weights.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include "engined/model/mapped_file.h"
#include "shared/base/log.h"
#include "shared/checkpoint/container.h"
#include "shared/checkpoint/model_tensors.h"
#include "shared/kernels/convert.h"

namespace k3::engined {
namespace {

using R = checkpoint::TensorRole;

// Streams a [rows, cols] float tensor through f32 row blocks into a quantized
// matrix.
StatusOr<kernels::DenseMatrix> quantize_matrix(const checkpoint::Checkpoint& ck,
                                               const checkpoint::TensorInfo& t, int bits) {
  const int64_t rows = t.rows(), cols = t.cols();
  kernels::DenseMatrix m(bits, rows, cols);
  // ~4 MB of f32 per block.
  const int64_t block = std::max<int64_t>(1, (1 << 20) / std::max<int64_t>(cols, 1));
  const int64_t nblocks = (rows + block - 1) / block;
  Status first_error;
  std::mutex mu;
#pragma omp parallel if (nblocks > 1)
  {
    std::vector<float> buf(static_cast<size_t>(block * cols));
#pragma omp for schedule(dynamic)
    for (int64_t b = 0; b < nblocks; ++b) {
      const int64_t r0 = b * block, n = std::min(block, rows - r0);
      Status s = ck.read_rows_f32(t, r0, n, buf.data());
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok()) first_error = s;
        continue;
      }
      m.set_rows(r0, n, buf.data());
    }
  }
  if (!first_error.ok()) return first_error;
  return m;
}

// The 8 -> 4 downcast: every row as the int8 kernels see it, quantized to int4.
kernels::DenseMatrix downcast_to_int4(const WeightMatrix& q8) {
  kernels::DenseMatrix m(4, q8.rows(), q8.cols());
  std::vector<float> row(static_cast<size_t>(q8.cols()));
  for (int64_t r = 0; r < q8.rows(); ++r) {
    q8.row_f32(r, row.data());
    m.set_rows(r, 1, row.data());
  }
  return m;
}

const char* bits_flag(checkpoint::QuantGroup g) {
  return g == checkpoint::QuantGroup::kMla    ? "--mla-bits"
         : g == checkpoint::QuantGroup::kHead ? "--head-bits"
                                              : "--dense-bits";
}

// Binds the model's dense weights by (role, layer) from the one tensor table.
class Binder {
 public:
  Binder(const checkpoint::Checkpoint& ck, const checkpoint::ModelConfig& c, const QuantConfig& q)
      : ck_(ck), c_(c), q_(q) {
    for (checkpoint::ExpectedTensor& e : checkpoint::dense_tensors(c)) {
      const auto k = key(e.role, e.layer);
      table_.emplace(k, std::move(e));
    }
  }

  // A big matrix at the bits of its quantization group (32 for the small ones).
  StatusOr<WeightMatrix> matrix(R role, int64_t l = -1) {
    K3_ASSIGN_OR_RETURN(const checkpoint::ExpectedTensor* e, entry(role, l));
    return load(*e, bits_of(e->quant), e->quant, /*tied=*/false);
  }
  // lm_head, or the embedding when the head is tied to it; at head_bits.
  StatusOr<WeightMatrix> head() {
    if (!c_.tie_word_embeddings) return matrix(R::kLmHead);
    K3_ASSIGN_OR_RETURN(const checkpoint::ExpectedTensor* e, entry(R::kEmbed, -1));
    return load(*e, q_.head_bits, checkpoint::QuantGroup::kHead, /*tied=*/true);
  }
  StatusOr<std::vector<float>> vector(R role, int64_t l = -1) {
    K3_ASSIGN_OR_RETURN(const checkpoint::TensorInfo* t, stored(role, l));
    std::vector<float> out(static_cast<size_t>(t->numel()));
    K3_RETURN_IF_ERROR(ck_.read_rows_f32(*t, 0, t->rows(), out.data()));
    return out;
  }
  // res_norm * res_proj, elementwise ([D] and [1, D] flattened).
  StatusOr<std::vector<float>> res_weight(R norm, R proj, int64_t l = -1) {
    K3_ASSIGN_OR_RETURN(std::vector<float> a, vector(norm, l));
    K3_ASSIGN_OR_RETURN(std::vector<float> b, vector(proj, l));
    for (size_t i = 0; i < a.size(); ++i) a[i] *= b[i];
    return a;
  }
  // The tensor as stored (a float form), checked.
  StatusOr<const checkpoint::TensorInfo*> stored(R role, int64_t l = -1) {
    K3_ASSIGN_OR_RETURN(const checkpoint::ExpectedTensor* e, entry(role, l));
    K3_ASSIGN_OR_RETURN(checkpoint::StoredTensor s, checkpoint::find_stored(ck_, *e));
    used_.insert(s.data->name);
    return s.data;
  }

  // Where the mapping of its file holds `t` (mapping the file on first use);
  // refuses a tensor whose floats would be misaligned.
  StatusOr<const uint8_t*> mapped(const checkpoint::TensorInfo& t,
                                  std::shared_ptr<const void>* keep) {
    auto it = maps_.find(t.file);
    if (it == maps_.end()) {
      K3_ASSIGN_OR_RETURN(auto m, MappedFile::map(ck_.file(t.file)));
      it = maps_.emplace(t.file, std::move(m)).first;
    }
    const MappedFile& m = *it->second;
    if (t.offset + t.nbytes > m.size())
      return absl::OutOfRangeError(
          cat(ck_.files()[t.file], ": tensor '", t.name, "' extends past the mapped file"));
    const uint8_t* p = m.data() + t.offset;
    if (checkpoint::dtype_size(t.dtype) == 4 && reinterpret_cast<uintptr_t>(p) % 4 != 0)
      return absl::InvalidArgumentError(cat(ck_.files()[t.file], ": tensor '", t.name,
                                            "' is not 4-byte aligned in its file; --mmap cannot "
                                            "view it"));
    *keep = it->second;
    return p;
  }
  size_t mapped_bytes() const { return mapped_bytes_; }
  std::vector<std::shared_ptr<const void>> mappings() const {
    std::vector<std::shared_ptr<const void>> out;
    for (const auto& [f, m] : maps_) out.push_back(m);
    return out;
  }

  // Tensors of the checkpoint nothing bound (the routed experts count as
  // bound: ExpertIndex reads them; the vision tower is left out).
  std::vector<std::string> unused() {
    std::set<std::string> used = used_;
    for (int64_t l = c_.first_k_dense_replace; l < c_.num_hidden_layers; ++l)
      for (int64_t x = 0; x < c_.num_experts; ++x)
        for (const checkpoint::ExpectedTensor& e : checkpoint::expert_tensors(c_, l, x))
          used.insert(ck_.prefix() + e.name);
    return checkpoint::unused_tensors(ck_, used);
  }

 private:
  static int64_t key(R role, int64_t l) { return (l + 1) * 256 + static_cast<int64_t>(role); }

  StatusOr<const checkpoint::ExpectedTensor*> entry(R role, int64_t l) {
    auto it = table_.find(key(role, l));
    if (it == table_.end())
      return absl::InternalError(
          cat("the tensor table has no tensor of role ", static_cast<int>(role), " in layer ", l));
    return &it->second;
  }

  int bits_of(checkpoint::QuantGroup g) const {
    switch (g) {
      case checkpoint::QuantGroup::kDense:
        return q_.dense_bits;
      case checkpoint::QuantGroup::kMla:
        return q_.mla_bits;
      case checkpoint::QuantGroup::kHead:
        return q_.head_bits;
      case checkpoint::QuantGroup::kNone:
        break;
    }
    return 32;
  }

  StatusOr<WeightMatrix> load(const checkpoint::ExpectedTensor& e, int bits,
                              checkpoint::QuantGroup group, bool tied) {
    K3_ASSIGN_OR_RETURN(checkpoint::StoredTensor s, checkpoint::find_stored(ck_, e, tied));
    used_.insert(s.data->name);
    if (s.scales != nullptr) used_.insert(s.scales->name);
    const std::string& file = ck_.files()[s.data->file];
    // --mmap: a big matrix is viewed as stored, or refused; the small ones
    // (quantization group none) are converted and private.
    const bool big = group != checkpoint::QuantGroup::kNone;
    const bool stored_as_asked = s.form == checkpoint::StoredTensor::Form::kFloat
                                     ? s.data->dtype == checkpoint::DType::kF32 && bits == 32
                                     : s.bits() == bits;
    if (q_.mmap && big && !stored_as_asked)
      return absl::InvalidArgumentError(
          cat(file, ": tensor '", s.data->name, "' is ",
              s.form == checkpoint::StoredTensor::Form::kFloat
                  ? std::string(checkpoint::dtype_name(s.data->dtype))
                  : cat(s.bits(), "-bit"),
              " and would need conversion to ", bits, " bits (", bits_flag(group),
              ") at load; --mmap maps only prepared matrices: repack the model at these bits "
              "(k3ctl repack) or load without --mmap"));
    if (q_.mmap && big) return view(s, bits, e.shape[0], e.shape[1]);
    if (s.form == checkpoint::StoredTensor::Form::kFloat) {
      K3_ASSIGN_OR_RETURN(kernels::DenseMatrix m, quantize_matrix(ck_, *s.data, bits));
      return WeightMatrix(std::move(m));
    }
    if (bits > s.bits())
      return absl::InvalidArgumentError(cat(file, ": tensor '", s.data->name, "' is stored at ",
                                            s.bits(), " bits in this container, ", bits,
                                            " were asked for (", bits_flag(group), "); ask for ",
                                            s.bits(), " or fewer, or load the source checkpoint"));
    const int64_t rows = e.shape[0], cols = e.shape[1];
    std::vector<uint8_t> data(s.data->nbytes);
    K3_RETURN_IF_ERROR(ck_.read_bytes(*s.data, 0, data.size(), data.data()));
    std::vector<float> scales(static_cast<size_t>(s.scales->numel()));
    K3_RETURN_IF_ERROR(ck_.read_bytes(*s.scales, 0, s.scales->nbytes, scales.data()));
    WeightMatrix m =
        WeightMatrix::prepared(s.bits(), rows, cols, std::move(data), std::move(scales));
    if (bits == s.bits()) return m;
    return WeightMatrix(downcast_to_int4(m));  // 8 -> 4
  }

  StatusOr<WeightMatrix> view(const checkpoint::StoredTensor& s, int bits, int64_t rows,
                              int64_t cols) {
    std::shared_ptr<const void> keep;
    K3_ASSIGN_OR_RETURN(const uint8_t* data, mapped(*s.data, &keep));
    const float* scales = nullptr;
    if (s.scales != nullptr) {
      K3_ASSIGN_OR_RETURN(const uint8_t* p, mapped(*s.scales, &keep));
      scales = reinterpret_cast<const float*>(p);
      mapped_bytes_ += s.scales->nbytes;
    }
    mapped_bytes_ += s.data->nbytes;
    return WeightMatrix::view(bits, rows, cols, data, scales, std::move(keep));
  }

  const checkpoint::Checkpoint& ck_;
  const checkpoint::ModelConfig& c_;
  const QuantConfig& q_;
  std::unordered_map<int64_t, checkpoint::ExpectedTensor> table_;
  std::set<std::string> used_;
  std::map<uint32_t, std::shared_ptr<const MappedFile>> maps_;
  size_t mapped_bytes_ = 0;
};

Status load_kda(Binder& b, const checkpoint::ModelConfig& c, int64_t l, KdaWeights* w) {
  K3_ASSIGN_OR_RETURN(w->q, b.matrix(R::kKdaQ, l));
  K3_ASSIGN_OR_RETURN(w->k, b.matrix(R::kKdaK, l));
  K3_ASSIGN_OR_RETURN(w->v, b.matrix(R::kKdaV, l));
  K3_ASSIGN_OR_RETURN(w->g, b.matrix(R::kKdaG, l));
  K3_ASSIGN_OR_RETURN(w->o, b.matrix(R::kKdaO, l));
  K3_ASSIGN_OR_RETURN(w->f_a, b.matrix(R::kKdaFA, l));
  K3_ASSIGN_OR_RETURN(w->f_b, b.matrix(R::kKdaFB, l));
  K3_ASSIGN_OR_RETURN(w->b, b.matrix(R::kKdaB, l));
  K3_ASSIGN_OR_RETURN(w->q_conv, b.vector(R::kKdaQConv, l));
  K3_ASSIGN_OR_RETURN(w->k_conv, b.vector(R::kKdaKConv, l));
  K3_ASSIGN_OR_RETURN(w->v_conv, b.vector(R::kKdaVConv, l));
  K3_ASSIGN_OR_RETURN(w->dt_bias, b.vector(R::kKdaDtBias, l));
  K3_ASSIGN_OR_RETURN(std::vector<float> a_log, b.vector(R::kKdaALog, l));
  // Stored zero-padded beyond the head count: use the first H entries.
  w->a.resize(static_cast<size_t>(c.kda_num_heads));
  for (int64_t h = 0; h < c.kda_num_heads; ++h) w->a[h] = std::exp(a_log[h]);
  K3_ASSIGN_OR_RETURN(w->o_norm, b.vector(R::kKdaONorm, l));
  return absl::OkStatus();
}

Status load_mla(Binder& b, int64_t l, MlaWeights* w) {
  K3_ASSIGN_OR_RETURN(w->q_a, b.matrix(R::kMlaQA, l));
  K3_ASSIGN_OR_RETURN(w->q_b, b.matrix(R::kMlaQB, l));
  K3_ASSIGN_OR_RETURN(w->kv_a, b.matrix(R::kMlaKvA, l));
  K3_ASSIGN_OR_RETURN(w->g, b.matrix(R::kMlaG, l));
  K3_ASSIGN_OR_RETURN(w->o, b.matrix(R::kMlaO, l));
  K3_ASSIGN_OR_RETURN(w->q_a_norm, b.vector(R::kMlaQANorm, l));
  K3_ASSIGN_OR_RETURN(w->kv_a_norm, b.vector(R::kMlaKvANorm, l));
  K3_ASSIGN_OR_RETURN(WeightMatrix kv_b, b.matrix(R::kMlaKvB, l));
  w->kv_b.resize(static_cast<size_t>(kv_b.rows() * kv_b.cols()));
  for (int64_t r = 0; r < kv_b.rows(); ++r) kv_b.row_f32(r, w->kv_b.data() + r * kv_b.cols());
  return absl::OkStatus();
}

Status load_moe(Binder& b, const checkpoint::ModelConfig& c, int64_t l, MoeWeights* w) {
  K3_ASSIGN_OR_RETURN(w->router, b.matrix(R::kRouter, l));
  K3_ASSIGN_OR_RETURN(w->bias, b.vector(R::kRouterBias, l));
  K3_ASSIGN_OR_RETURN(w->lat_down, b.matrix(R::kLatDown, l));
  K3_ASSIGN_OR_RETURN(w->lat_up, b.matrix(R::kLatUp, l));
  K3_ASSIGN_OR_RETURN(w->lat_norm, b.vector(R::kLatNorm, l));
  w->has_shared = c.num_shared_experts > 0;
  if (w->has_shared) {
    K3_ASSIGN_OR_RETURN(w->sh_gate, b.matrix(R::kSharedGate, l));
    K3_ASSIGN_OR_RETURN(w->sh_up, b.matrix(R::kSharedUp, l));
    K3_ASSIGN_OR_RETURN(w->sh_down, b.matrix(R::kSharedDown, l));
  }
  return absl::OkStatus();
}

// Bytes of the layer's private weights (views of a mapping left out).
size_t matrix_bytes(const LayerWeights& lw) {
  size_t n = 0;
  for (const WeightMatrix* m :
       {&lw.kda_w.q,     &lw.kda_w.k,      &lw.kda_w.v,        &lw.kda_w.g,      &lw.kda_w.o,
        &lw.kda_w.f_a,   &lw.kda_w.f_b,    &lw.kda_w.b,        &lw.mla_w.q_a,    &lw.mla_w.q_b,
        &lw.mla_w.kv_a,  &lw.mla_w.g,      &lw.mla_w.o,        &lw.ffn.gate,     &lw.ffn.up,
        &lw.ffn.down,    &lw.moe_w.router, &lw.moe_w.lat_down, &lw.moe_w.lat_up, &lw.moe_w.sh_gate,
        &lw.moe_w.sh_up, &lw.moe_w.sh_down})
    if (!m->is_view()) n += m->bytes();
  return n + lw.mla_w.kv_b.size() * 4;
}

bool valid_bits(int b) {
  return b == 4 || b == 8 || b == 32;
}

}  // namespace

void ModelWeights::embed_row(int64_t id, float* out) const {
  const int64_t d = config.hidden_size;
  const uint8_t* base = embed_view != nullptr ? embed_view : embed.data();
  const uint8_t* row = base + static_cast<size_t>(id * d) * checkpoint::dtype_size(embed_dtype);
  if (embed_dtype == checkpoint::DType::kF32) {
    std::memcpy(out, row, static_cast<size_t>(d) * 4);
  } else if (embed_dtype == checkpoint::DType::kBF16) {
    kernels::bf16_to_f32(reinterpret_cast<const uint16_t*>(row), out, static_cast<size_t>(d));
  } else {
    kernels::f16_to_f32(reinterpret_cast<const uint16_t*>(row), out, static_cast<size_t>(d));
  }
}

StatusOr<std::unique_ptr<ModelWeights>> load_weights(const checkpoint::Checkpoint& ck,
                                                     const checkpoint::ModelConfig& c,
                                                     const QuantConfig& q) {
  if (!valid_bits(q.dense_bits) || !valid_bits(q.mla_bits) || !valid_bits(q.head_bits))
    return absl::InvalidArgumentError("dense, MLA and lm_head bits must each be 32, 8 or 4");
  auto log = base::logger("engined");
  const auto t0 = std::chrono::steady_clock::now();
  Binder b(ck, c, q);
  auto w = std::make_unique<ModelWeights>();
  w->config = c;
  w->quant = q;
  {
    K3_ASSIGN_OR_RETURN(const checkpoint::TensorInfo* t, b.stored(R::kEmbed));
    w->embed_dtype = t->dtype;
    if (q.mmap) {
      std::shared_ptr<const void> keep;
      K3_ASSIGN_OR_RETURN(w->embed_view, b.mapped(*t, &keep));
      w->mapped_bytes += t->nbytes;
    } else {
      w->embed.resize(t->nbytes);
      K3_RETURN_IF_ERROR(ck.read_bytes(*t, 0, t->nbytes, w->embed.data()));
    }
  }
  w->layers.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    LayerWeights& lw = w->layers[l];
    lw.kda = c.is_kda(l);
    lw.moe = c.is_moe(l);
    K3_ASSIGN_OR_RETURN(lw.in_norm, b.vector(R::kInNorm, l));
    K3_ASSIGN_OR_RETURN(lw.post_norm, b.vector(R::kPostNorm, l));
    K3_ASSIGN_OR_RETURN(lw.asw, b.res_weight(R::kAttnResNorm, R::kAttnResProj, l));
    K3_ASSIGN_OR_RETURN(lw.msw, b.res_weight(R::kMlpResNorm, R::kMlpResProj, l));
    if (lw.kda)
      K3_RETURN_IF_ERROR(load_kda(b, c, l, &lw.kda_w));
    else
      K3_RETURN_IF_ERROR(load_mla(b, l, &lw.mla_w));
    if (lw.moe) {
      K3_RETURN_IF_ERROR(load_moe(b, c, l, &lw.moe_w));
    } else {
      K3_ASSIGN_OR_RETURN(lw.ffn.gate, b.matrix(R::kFfnGate, l));
      K3_ASSIGN_OR_RETURN(lw.ffn.up, b.matrix(R::kFfnUp, l));
      K3_ASSIGN_OR_RETURN(lw.ffn.down, b.matrix(R::kFfnDown, l));
    }
    w->resident_bytes += matrix_bytes(lw);
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double eta =
        el / static_cast<double>(l + 1) * static_cast<double>(c.num_hidden_layers - l - 1);
    log->info("loaded layer {}/{} ({:.1f} s, ETA {:.1f} s)", l + 1, c.num_hidden_layers, el, eta);
  }
  K3_ASSIGN_OR_RETURN(w->final_norm, b.vector(R::kFinalNorm));
  K3_ASSIGN_OR_RETURN(w->out_sw, b.res_weight(R::kOutResNorm, R::kOutResProj));
  K3_ASSIGN_OR_RETURN(w->lm_head, b.head());
  w->resident_bytes += w->embed.size() + (w->lm_head.is_view() ? 0 : w->lm_head.bytes());
  w->mapped_bytes += b.mapped_bytes();
  w->mappings = b.mappings();
  log->info("weights: {:.1f} MB private, {:.1f} MB mapped read-only{}", w->resident_bytes / 1e6,
            w->mapped_bytes / 1e6, q.mmap ? " (--mmap)" : "");

  const std::vector<std::string> unused = b.unused();
  if (!unused.empty()) {
    std::string list;
    for (size_t i = 0; i < unused.size() && i < 8; ++i)
      absl::StrAppend(&list, i ? ", " : "", unused[i]);
    if (unused.size() > 8) absl::StrAppend(&list, ", ...");
    const std::string what =
        cat(ck.model_dir(), ": ", unused.size(), " tensor(s) the model does not use: ", list);
    if (q.strict) return absl::InvalidArgumentError(cat(what, " (--strict)"));
    log->warn("{}", what);
  }
  return w;
}

}  // namespace k3::engined
