// What a chat turn really ran, for the next turn: K3's encoder renders a past
// assistant message without its reasoning (and OpenAI clients drop
// reasoning_content anyway), so a follow-up's prompt diverges from the
// tokens engined's session holds right where the reply began, and the whole
// reply is prefilled again. The gateway remembers, per conversation prefix
// as the follow-up will render it, the ids that were actually processed
// (prompt and generated, reasoning included) and puts those in its place:
// the session then continues instead of restoring a checkpoint.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace k3::gateway {

// Thread-safe. Bounded: the least recently used records go first.
class TurnRecord {
 public:
  explicit TurnRecord(size_t capacity = 256) : capacity_(capacity) {}

  // `rendered`: the conversation through the assistant's reply as a
  // follow-up renders it (ending at the next message's start); `ran`: the
  // ids the engine processed for it; `prompt_len`: the length of the part
  // both share (the turn's prompt).
  void remember(std::vector<int32_t> rendered, std::vector<int32_t> ran, size_t prompt_len);

  struct Hit {
    size_t rendered_len = 0;  // this many leading prompt ids are replaced
    size_t prompt_len = 0;    // of which the first ones are unchanged
    std::vector<int32_t> ran;
    size_t ran_len = 0;
  };
  // The longest record whose `rendered` is `prompt[0, p)` for one of the
  // message-start positions `starts`.
  std::optional<Hit> find(const std::vector<int32_t>& prompt,
                          const std::vector<uint32_t>& starts) const;

 private:
  struct Entry {
    std::vector<int32_t> rendered, ran;
    size_t prompt_len = 0;
  };
  static uint64_t hash(const int32_t* ids, size_t n);

  const size_t capacity_;
  mutable std::mutex mu_;
  mutable std::list<uint64_t> lru_;  // front: most recent
  std::unordered_map<uint64_t, std::pair<Entry, std::list<uint64_t>::iterator>> entries_;
};

}  // namespace k3::gateway
