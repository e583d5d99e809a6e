#include "shared/tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <map>
#include <mutex>

#include "shared/tokenizer/bpe.h"
#include "shared/tokenizer/chunking.h"
#include "shared/tokenizer/utf8.h"

namespace k3::tokenizer {
namespace {

// Pieces shorter than this are cheaper to merge again than to look up; longer
// than the maximum are rare and would make the cache's memory unbounded.
constexpr size_t kCacheMinBytes = 4;
constexpr size_t kCacheMaxBytes = 256;

// Remembers the tokens of pieces that needed BPE: a direct-mapped table (a new
// piece replaces whatever shared its slot), sharded by hash, one mutex per
// shard. Bounded: kShards * kSlots entries of at most kCacheMaxBytes.
class PieceCache {
 public:
  bool lookup(std::string_view piece, uint64_t hash, std::vector<TokenId>* out) const {
    const Shard& shard = shards_[hash % kShards];
    const Entry& e = shard.slots[(hash / kShards) % kSlots];
    std::lock_guard<std::mutex> lock(shard.mu);
    if (e.hash != hash || e.key != piece) return false;
    out->insert(out->end(), e.ids.begin(), e.ids.end());
    return true;
  }
  void insert(std::string_view piece, uint64_t hash, std::span<const TokenId> ids) const {
    Shard& shard = shards_[hash % kShards];
    Entry& e = shard.slots[(hash / kShards) % kSlots];
    std::lock_guard<std::mutex> lock(shard.mu);
    e.hash = hash;
    e.key.assign(piece);
    e.ids.assign(ids.begin(), ids.end());
  }

 private:
  static constexpr size_t kShards = 64;
  static constexpr size_t kSlots = 1024;
  struct Entry {
    uint64_t hash = 0;
    std::string key;  // empty: never filled (a cached piece is never empty)
    std::vector<TokenId> ids;
  };
  struct Shard {
    mutable std::mutex mu;
    std::vector<Entry> slots = std::vector<Entry>(kSlots);
  };
  mutable std::array<Shard, kShards> shards_;
};

Status not_utf8(std::string_view text, size_t offset) {
  static constexpr char kHex[] = "0123456789abcdef";
  const auto b = static_cast<unsigned char>(text[offset]);
  return absl::InvalidArgumentError(cat("text is not valid UTF-8: ill-formed sequence at byte ",
                                        offset, " (0x", kHex[b >> 4], kHex[b & 15], ")"));
}

}  // namespace

struct Tokenizer::Impl {
  Impl(RankTable r, Splitter s) : ranks(std::move(r)), splitter(std::move(s)) {}
  RankTable ranks;
  Splitter splitter;
  SplitPattern pattern = SplitPattern::kKimi;
  TokenId vocab_size = 0;
  std::vector<std::string> specials;  // content of id num_ranks + i
  std::map<std::string, TokenId, std::less<>> special_by_content;
  // Special ids by the first byte of their content, longest content first.
  std::array<std::vector<TokenId>, 256> specials_by_first_byte;
  std::optional<TokenId> bos, eos;
  std::unique_ptr<PieceCache> cache;  // null when disabled

  TokenId num_ranks() const { return static_cast<TokenId>(ranks.size()); }
  std::string_view special_content(TokenId id) const { return specials[id - num_ranks()]; }
};

StatusOr<Tokenizer> Tokenizer::load(const std::string& path, const TokenizerOptions& options) {
  K3_ASSIGN_OR_RETURN(TokenizerSpec spec, load_tokenizer_spec(path, options.vocab_size));
  return create(spec, options);
}

StatusOr<Tokenizer> Tokenizer::create(const TokenizerSpec& spec, const TokenizerOptions& options) {
  K3_ASSIGN_OR_RETURN(RankTable ranks, RankTable::create(spec.ranks));
  K3_ASSIGN_OR_RETURN(Splitter splitter, Splitter::create(options.pattern));
  auto impl = std::make_shared<Impl>(std::move(ranks), std::move(splitter));
  impl->pattern = options.pattern;
  const auto num_ranks = static_cast<int64_t>(spec.ranks.size());
  if (spec.vocab_size < num_ranks ||
      (!spec.added.empty() && spec.added.rbegin()->first >= spec.vocab_size)) {
    return absl::InvalidArgumentError(
        cat("vocab_size ", spec.vocab_size, " leaves out a rank or an added token"));
  }
  impl->vocab_size = static_cast<TokenId>(spec.vocab_size);
  // Ids above the ranks that the config does not name are Kimi's reserved
  // special tokens.
  for (int64_t id = num_ranks; id < spec.vocab_size; ++id) {
    auto it = spec.added.find(static_cast<TokenId>(id));
    impl->specials.push_back(it != spec.added.end() ? it->second.content
                                                    : cat("<|reserved_token_", id, "|>"));
  }
  for (size_t i = 0; i < impl->specials.size(); ++i) {
    const auto id = static_cast<TokenId>(num_ranks + static_cast<int64_t>(i));
    const std::string& content = impl->specials[i];
    if (content.empty()) return absl::InvalidArgumentError(cat("special token ", id, " is empty"));
    auto [it, inserted] = impl->special_by_content.emplace(content, id);
    if (!inserted) {
      return absl::InvalidArgumentError(cat("special tokens ", it->second, " and ", id,
                                            " have the same content '", content, "'"));
    }
    impl->specials_by_first_byte[static_cast<unsigned char>(content[0])].push_back(id);
  }
  for (auto& ids : impl->specials_by_first_byte) {
    std::stable_sort(ids.begin(), ids.end(), [&](TokenId a, TokenId b) {
      return impl->special_content(a).size() > impl->special_content(b).size();
    });
  }
  auto id_of = [&](const std::optional<std::string>& content) -> std::optional<TokenId> {
    if (!content.has_value()) return std::nullopt;
    auto it = impl->special_by_content.find(*content);
    if (it != impl->special_by_content.end()) return it->second;
    const TokenId r = impl->ranks.find(*content);
    return r == kNoToken ? std::nullopt : std::optional<TokenId>(r);
  };
  impl->bos = id_of(spec.bos_token);
  impl->eos = id_of(spec.eos_token);
  if (options.piece_cache) impl->cache = std::make_unique<PieceCache>();
  return Tokenizer(std::move(impl));
}

std::span<const std::string_view> Tokenizer::chunks_of(std::string_view text) const {
  thread_local std::vector<std::string_view> chunks;
  chunks.clear();
  if (impl_->pattern == SplitPattern::kKimi) {
    split_into_chunks(text, &chunks);
  } else if (!text.empty()) {
    chunks.push_back(text);
  }
  return chunks;
}

void Tokenizer::encode_ordinary_chunk(std::string_view chunk, std::vector<TokenId>* out) const {
  const Impl& impl = *impl_;
  thread_local std::vector<std::string_view> pieces;
  pieces.clear();
  impl.splitter.split(chunk, &pieces);
  for (std::string_view piece : pieces) {
    const TokenId whole = impl.ranks.find(piece);
    if (whole != kNoToken) {
      out->push_back(whole);
      continue;
    }
    if (impl.cache == nullptr || piece.size() < kCacheMinBytes || piece.size() > kCacheMaxBytes) {
      byte_pair_encode(impl.ranks, piece, out);
      continue;
    }
    const uint64_t hash = RankTable::hash_bytes(piece.data(), piece.size());
    if (impl.cache->lookup(piece, hash, out)) continue;
    const size_t first = out->size();
    byte_pair_encode(impl.ranks, piece, out);
    impl.cache->insert(piece, hash,
                       std::span<const TokenId>(out->data() + first, out->size() - first));
  }
}

void Tokenizer::encode_markup_chunk(std::string_view chunk, std::vector<TokenId>* out) const {
  const Impl& impl = *impl_;
  size_t plain_start = 0;
  size_t i = 0;
  while (i < chunk.size()) {
    TokenId found = kNoToken;
    for (TokenId id : impl.specials_by_first_byte[static_cast<unsigned char>(chunk[i])]) {
      if (chunk.substr(i).starts_with(impl.special_content(id))) {
        found = id;
        break;
      }
    }
    if (found == kNoToken) {
      ++i;
      continue;
    }
    if (i > plain_start) encode_ordinary_chunk(chunk.substr(plain_start, i - plain_start), out);
    out->push_back(found);
    i += impl.special_content(found).size();
    plain_start = i;
  }
  if (plain_start < chunk.size()) encode_ordinary_chunk(chunk.substr(plain_start), out);
}

Status Tokenizer::encode_append(std::string_view text, std::vector<TokenId>* out) const {
  if (std::optional<size_t> bad = first_invalid_utf8(text)) return not_utf8(text, *bad);
  for (std::string_view chunk : chunks_of(text)) encode_ordinary_chunk(chunk, out);
  return absl::OkStatus();
}

StatusOr<std::vector<TokenId>> Tokenizer::encode(std::string_view text) const {
  std::vector<TokenId> ids;
  K3_RETURN_IF_ERROR(encode_append(text, &ids));
  return ids;
}

Status Tokenizer::encode_markup_append(std::string_view text, std::vector<TokenId>* out) const {
  if (std::optional<size_t> bad = first_invalid_utf8(text)) return not_utf8(text, *bad);
  for (std::string_view chunk : chunks_of(text)) encode_markup_chunk(chunk, out);
  return absl::OkStatus();
}

StatusOr<std::vector<TokenId>> Tokenizer::encode_markup(std::string_view text) const {
  std::vector<TokenId> ids;
  K3_RETURN_IF_ERROR(encode_markup_append(text, &ids));
  return ids;
}

std::string_view Tokenizer::token_bytes(TokenId id) const {
  if (id < 0 || id >= impl_->vocab_size) return {};
  if (id < impl_->num_ranks()) return impl_->ranks.bytes(id);
  return impl_->special_content(id);
}

StatusOr<std::string> Tokenizer::decode_bytes(std::span<const TokenId> ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!contains(ids[i])) {
      return absl::InvalidArgumentError(cat("token id ", ids[i], " (position ", i,
                                            ") is outside the vocabulary of ", vocab_size()));
    }
    out.append(token_bytes(ids[i]));
  }
  return out;
}

StatusOr<std::string> Tokenizer::decode(std::span<const TokenId> ids) const {
  K3_ASSIGN_OR_RETURN(std::string bytes, decode_bytes(ids));
  if (!first_invalid_utf8(bytes).has_value()) return bytes;
  std::string text;
  append_utf8_lossy(bytes, &text);
  return text;
}

std::optional<TokenId> Tokenizer::special_id(std::string_view content) const {
  auto it = impl_->special_by_content.find(content);
  if (it == impl_->special_by_content.end()) return std::nullopt;
  return it->second;
}

TokenId Tokenizer::num_ranks() const {
  return impl_->num_ranks();
}
TokenId Tokenizer::vocab_size() const {
  return impl_->vocab_size;
}
SplitPattern Tokenizer::pattern() const {
  return impl_->pattern;
}
std::optional<TokenId> Tokenizer::bos_id() const {
  return impl_->bos;
}
std::optional<TokenId> Tokenizer::eos_id() const {
  return impl_->eos;
}

Status StreamDecoder::feed(TokenId id, std::string* text) {
  if (!tokenizer_.contains(id)) {
    return absl::InvalidArgumentError(
        cat("token id ", id, " is outside the vocabulary of ", tokenizer_.vocab_size()));
  }
  if (tokenizer_.is_special(id)) {
    // A special token breaks the byte stream: a held-back partial character
    // can no longer complete.
    finish(text);
    if (specials_ == Specials::kShow) text->append(tokenizer_.token_bytes(id));
    return absl::OkStatus();
  }
  pending_.append(tokenizer_.token_bytes(id));
  const size_t hold = incomplete_utf8_tail(pending_);
  append_utf8_lossy(std::string_view(pending_).substr(0, pending_.size() - hold), text);
  pending_.erase(0, pending_.size() - hold);
  return absl::OkStatus();
}

void StreamDecoder::finish(std::string* text) {
  append_utf8_lossy(pending_, text);
  pending_.clear();
}

}  // namespace k3::tokenizer
