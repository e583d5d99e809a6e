#include "tools/k3ctl/model_summary.h"

#include <cstdio>
#include <set>

#include "shared/checkpoint/dtype.h"
#include "shared/checkpoint/model_tensors.h"
#include "shared/status.h"

namespace k3::tools {

namespace {

uint64_t elements(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

// max_position_embeddings from text_config, else the root (the published
// config.json nests the text model's fields); nullopt when neither says.
std::optional<int64_t> context_length(const std::string& config_json) {
  const nlohmann::json j = nlohmann::json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  for (const nlohmann::json* o : {j.contains("text_config") ? &j["text_config"] : nullptr, &j}) {
    if (o == nullptr || !o->is_object()) continue;
    auto it = o->find("max_position_embeddings");
    if (it != o->end() && it->is_number_integer() && it->get<int64_t>() > 0)
      return it->get<int64_t>();
  }
  return std::nullopt;
}

std::string with_commas(uint64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

std::string three_digits(double v, const char* const* units, int n_units) {
  int u = 0;
  while (u + 1 < n_units && v >= 999.5) v /= 1000, ++u;
  char buf[32];
  if (u == 0 && v == static_cast<double>(static_cast<uint64_t>(v)))
    std::snprintf(buf, sizeof buf, "%.0f%s", v, units[0]);
  else
    std::snprintf(buf, sizeof buf,
                  v >= 99.95   ? "%.0f%s"
                  : v >= 9.995 ? "%.1f%s"
                               : "%.2f%s",
                  v, units[u]);
  return buf;
}

}  // namespace

std::string si_count(double v) {
  static const char* const kUnits[] = {"", " K", " M", " G", " T", " P"};
  return three_digits(v, kUnits, 6);
}

std::string si_bytes(double bytes) {
  static const char* const kUnits[] = {" B", " kB", " MB", " GB", " TB", " PB"};
  return three_digits(bytes, kUnits, 6);
}

ModelSummary summarize_config(const checkpoint::ModelConfig& c, const std::string& config_json) {
  ModelSummary s;
  s.layers = c.num_hidden_layers;
  for (bool kda : c.layer_is_kda) s.kda_layers += kda;
  s.mla_layers = s.layers - s.kda_layers;
  s.dense_ffn_layers = c.first_k_dense_replace;
  s.moe_layers = c.num_moe_layers();
  s.hidden_size = c.hidden_size;
  s.vocab_size = c.vocab_size;
  s.experts = c.num_experts;
  s.top_k = c.num_experts_per_token;
  s.shared_experts = c.num_shared_experts;
  s.expert_bytes = c.expert_bytes();
  // A packed MXFP4 tensor [O, I/2] holds O*I weights; its ue8m0 scales are
  // not parameters.
  if (s.moe_layers > 0)
    for (const checkpoint::ExpectedTensor& t :
         checkpoint::expert_tensors(c, c.first_k_dense_replace, 0))
      if (t.cls == checkpoint::TensorClass::kExpertPacked)
        s.expert_parameters += 2 * elements(t.shape);
  // A_log is stored zero-padded past its heads: only the heads count.
  for (const checkpoint::ExpectedTensor& t : checkpoint::dense_tensors(c))
    s.dense_parameters += t.cls == checkpoint::TensorClass::kALog
                              ? static_cast<uint64_t>(c.kda_num_heads)
                              : elements(t.shape);
  const auto moe = static_cast<uint64_t>(s.moe_layers);
  const auto top_k = static_cast<uint64_t>(std::min(s.top_k, s.experts));
  s.parameters = s.dense_parameters + moe * static_cast<uint64_t>(s.experts) * s.expert_parameters;
  s.active_parameters = s.dense_parameters + moe * top_k * s.expert_parameters;
  s.expert_set_bytes = moe * static_cast<uint64_t>(s.experts) * s.expert_bytes;
  s.expert_bytes_per_token = moe * top_k * s.expert_bytes;
  s.context_length = context_length(config_json);
  return s;
}

void add_stored(ModelSummary& s, const checkpoint::Checkpoint& ck,
                const std::vector<std::string>& unused) {
  const std::set<std::string> unused_set(unused.begin(), unused.end());
  ModelSummary::Stored st;
  for (const checkpoint::TensorInfo& t : ck.tensors()) {
    ModelSummary::DTypeUse& d = st.dtypes[std::string(checkpoint::dtype_name(t.dtype))];
    ++d.tensors;
    d.bytes += t.nbytes;
    st.bytes += t.nbytes;
    ++st.tensors;
    if (checkpoint::is_routed_expert_tensor(t.name)) st.expert_bytes += t.nbytes;
    if (unused_set.count(t.name)) st.unused_bytes += t.nbytes;
  }
  st.shards = static_cast<int64_t>(ck.files().size());
  s.stored = std::move(st);
}

std::string render_summary_text(const ModelSummary& s) {
  std::string out;
  auto line = [&out](const char* label, const std::string& value) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%-12s ", label);
    out += buf;
    out += value;
    out += '\n';
  };
  line("parameters",
       cat(si_count(static_cast<double>(s.parameters)), " total (", with_commas(s.parameters),
           "), ", si_count(static_cast<double>(s.active_parameters)),
           " active per token (every dense weight and ", std::min(s.top_k, s.experts),
           " routed experts per MoE layer)"));
  line("layers", cat(s.layers, ": ", s.kda_layers, " KDA + ", s.mla_layers, " MLA attention; ",
                     s.dense_ffn_layers, " dense FFN + ", s.moe_layers, " MoE"));
  line("experts", cat(s.experts, " routed per MoE layer, top ", s.top_k, ", plus ",
                      s.shared_experts, " shared; ", si_bytes(static_cast<double>(s.expert_bytes)),
                      " each (", with_commas(s.expert_bytes), " bytes, MXFP4), ",
                      si_count(static_cast<double>(s.expert_parameters)), " parameters each"));
  line("", cat(si_bytes(static_cast<double>(s.expert_set_bytes)), " for all ",
               s.moe_layers * s.experts, "; ",
               si_bytes(static_cast<double>(s.expert_bytes_per_token)), " read per decoded token (",
               s.moe_layers, " layers x ", std::min(s.top_k, s.experts), ")"));
  line("context", s.context_length
                      ? cat(with_commas(static_cast<uint64_t>(*s.context_length)),
                            " tokens (max_position_embeddings)")
                      : std::string("not stated in config.json (no max_position_embeddings)"));
  line("widths", cat("hidden ", s.hidden_size, ", vocabulary ", s.vocab_size));
  if (!s.stored) {
    line("stored", "config.json only: no weights read");
    return out;
  }
  const ModelSummary::Stored& st = *s.stored;
  bool first = true;
  for (const auto& [name, d] : st.dtypes) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%-5s %8lld tensors  %s", name.c_str(),
                  static_cast<long long>(d.tensors),
                  si_bytes(static_cast<double>(d.bytes)).c_str());
    line(first ? "dtypes" : "", buf);
    first = false;
  }
  line("size",
       cat(si_bytes(static_cast<double>(st.bytes)), " in ", st.tensors, " tensors and ", st.shards,
           st.shards == 1 ? " shard file: " : " shard files: ",
           st.expert_bytes > 0
               ? cat("routed experts ", si_bytes(static_cast<double>(st.expert_bytes)),
                     ", the rest ", si_bytes(static_cast<double>(st.bytes - st.expert_bytes)))
               : std::string("no routed experts stored"),
           st.unused_bytes > 0 ? cat(" (of it ", si_bytes(static_cast<double>(st.unused_bytes)),
                                     " the text model does not use)")
                               : std::string()));
  return out;
}

void add_summary_json(const ModelSummary& s, nlohmann::json& out) {
  out["parameters"] = s.parameters;
  out["active_parameters"] = s.active_parameters;
  out["dense_parameters"] = s.dense_parameters;
  out["expert_parameters"] = s.expert_parameters;
  out["dense_ffn_layers"] = s.dense_ffn_layers;
  out["experts_per_token"] = s.top_k;
  out["shared_experts"] = s.shared_experts;
  out["expert_set_bytes"] = s.expert_set_bytes;
  out["expert_bytes_per_token"] = s.expert_bytes_per_token;
  out["context_length"] = s.context_length ? nlohmann::json(*s.context_length) : nlohmann::json();
  if (s.stored) {
    nlohmann::json d = nlohmann::json::object();
    for (const auto& [name, u] : s.stored->dtypes)
      d[name] = {{"tensors", u.tensors}, {"bytes", u.bytes}};
    out["dtypes"] = d;
    out["stored_expert_bytes"] = s.stored->expert_bytes;
    out["unused_bytes"] = s.stored->unused_bytes;
  }
}

}  // namespace k3::tools
