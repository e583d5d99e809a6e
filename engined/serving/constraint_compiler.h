// engined's constrained decoding: the model's vocabulary as the grammar sees
// it (loaded once from the model directory's tokenizer) and the constraints
// compiled from requests, cached by their text so requests with the same
// schema share one mask cache.
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "k3serve/v1/engine.pb.h"
#include "shared/grammar/token_constraint.h"
#include "shared/status.h"

namespace k3::engined {

// A think budget with nothing else to enforce (body TEXT, tool_choice
// AUTO, calls not limited to one): only the think channel is constrained,
// the reply after it is free (engine.proto, think_budget_tokens).
bool constrains_think_only(const k3serve::v1::OutputConstraint& c);

// Thread-safe.
class ConstraintCompiler {
 public:
  // From the model directory's tokenizer; a directory without one gives an
  // instance that refuses every constraint (FailedPrecondition, saying why).
  static std::shared_ptr<ConstraintCompiler> load(const std::string& model_dir);

  // The compiled constraint of a request; InvalidArgument naming what is
  // wrong (an unsupported keyword, an unknown named tool, a think budget
  // without thinking, ...). A think-only constraint (constrains_think_only)
  // compiles to grammar::think_channel_grammar().
  StatusOr<std::shared_ptr<const grammar::Constraint>> compile(
      const k3serve::v1::OutputConstraint& c);

 private:
  static constexpr size_t kMaxCached = 32;
  std::shared_ptr<const grammar::VocabIndex> vocab_;
  std::string unavailable_;  // why there is no vocabulary
  std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const grammar::Constraint>>> lru_;
};

}  // namespace k3::engined
