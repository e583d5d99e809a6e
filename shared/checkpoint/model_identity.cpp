#include "shared/checkpoint/model_identity.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "shared/checkpoint/model_config.h"
#include "shared/checkpoint/model_tensors.h"

namespace k3::checkpoint {

std::vector<std::pair<uint64_t, uint64_t>> identity_sample_ranges(uint64_t nbytes) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  if (nbytes <= kIdentityPageBytes) {
    if (nbytes > 0) out.emplace_back(0, nbytes);
    return out;
  }
  // Page k starts at k/(P-1) of the way to the last full page, aligned down
  // to a page of the tensor; the last one ends at the tensor's last byte. A
  // page overlapping the one before keeps only its new bytes.
  const uint64_t last = nbytes - kIdentityPageBytes;
  for (int k = 0; k < kIdentityPages; ++k) {
    uint64_t off =
        static_cast<uint64_t>(static_cast<unsigned __int128>(last) * k / (kIdentityPages - 1));
    if (k + 1 < kIdentityPages) off -= off % kIdentityPageBytes;
    const uint64_t end = off + kIdentityPageBytes;
    if (!out.empty()) off = std::max(off, out.back().first + out.back().second);
    if (end > off) out.emplace_back(off, end - off);
  }
  return out;
}

StatusOr<base::Hash128> sample_weights(const base::File& f, const std::string& path,
                                       const TensorInfo& t) {
  base::Xxh3Stream h;
  h.update(&t.nbytes, sizeof t.nbytes);
  std::vector<char> page(kIdentityPageBytes);
  for (const auto& [off, n] : identity_sample_ranges(t.nbytes)) {
    if (Status s = f.pread_exact(page.data(), n, t.offset + off); !s.ok())
      return absl::DataLossError(cat(path, ": reading the identity sample of tensor '", t.name,
                                     "' at byte ", off, " of ", t.nbytes, ": ", s.message()));
    h.update(page.data(), n);
  }
  return h.digest();
}

uint64_t model_fingerprint(std::string_view config_text, const base::Hash128& weights) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](std::string_view s) {
    for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    h = (h ^ 0xff) * 0x100000001b3ull;
  };
  mix("k3serve model identity v3");
  // The config as data (key order and white space do not matter): nlohmann's
  // objects are sorted maps, so dump() is canonical.
  auto cfg = nlohmann::json::parse(config_text, nullptr, /*allow_exceptions=*/false);
  mix(cfg.is_discarded() ? std::string(config_text) : cfg.dump());
  // The logical tensor list the config implies: names, storage classes and
  // shapes, whatever the shards, offsets or container hold.
  auto mc = parse_model_config(config_text);
  if (mc.ok()) {
    for (const ExpectedTensor& t : all_tensors(*mc)) {
      mix(t.name);
      mix(std::to_string(static_cast<int>(t.cls)));
      for (int64_t d : t.shape) mix(std::to_string(d));
    }
  }
  mix(weights.hex());
  return h;
}

StatusOr<uint64_t> resolve_identity(const IdentityEvidence& e, std::string_view where) {
  // The reference: the sampled value, else the first stamp.
  std::optional<uint64_t> ref = e.sampled;
  std::string ref_what =
      e.sampled ? cat(e.sampled_from, " (its sampled '", kIdentityTensor, "')") : std::string();
  for (const auto& [file, value] : e.stamps) {
    if (!ref) {
      ref = value;
      ref_what = cat(file, " (its ", kFingerprintMetadataKey, ")");
      continue;
    }
    if (value != *ref && e.sampled && file == e.sampled_from)
      return absl::DataLossError(
          cat(where, ": ", file, " is stamped model fingerprint ", base::hex64(value), " (its ",
              kFingerprintMetadataKey, ") but its sampled '", kIdentityTensor, "' gives ",
              base::hex64(*ref), ": the embedding's bytes changed after the file was written"));
    if (value != *ref)
      return absl::FailedPreconditionError(
          cat(where, ": files of two models: ", file, " is of model fingerprint ",
              base::hex64(value), " (its ", kFingerprintMetadataKey, "), ", ref_what, " of ",
              base::hex64(*ref), "; place or repack the drive again from one model"));
  }
  if (!ref)
    return absl::FailedPreconditionError(
        cat(where,
            ": cannot tell which model these shards are of: none of the files opened "
            "holds '",
            kIdentityTensor, "' (the weights the fingerprint samples) or carries a ",
            kFingerprintMetadataKey,
            " stamp; give the shard holding it too, or lay the experts out with k3ctl place"));
  return *ref;
}

StatusOr<std::optional<uint64_t>> read_stamp(const SafetensorsHeader& h, std::string_view path) {
  auto it = h.metadata.find(kFingerprintMetadataKey);
  if (it == h.metadata.end()) return std::optional<uint64_t>();
  const std::string& v = it->second;
  const bool hex = v.size() == 16 && std::all_of(v.begin(), v.end(), [](char c) {
                     return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                   });
  if (!hex)
    return absl::InvalidArgumentError(
        cat(path, ": __metadata__ ", kFingerprintMetadataKey, " must be 16 lower-case hex digits"));
  return std::optional<uint64_t>(std::stoull(v, nullptr, 16));
}

}  // namespace k3::checkpoint
