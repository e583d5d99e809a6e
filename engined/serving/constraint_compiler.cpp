#include "engined/serving/constraint_compiler.h"

#include <nlohmann/json.hpp>

#include "shared/grammar/output_forms.h"
#include "shared/tokenizer/tokenizer.h"

namespace k3::engined {

namespace v1 = k3serve::v1;

std::shared_ptr<ConstraintCompiler> ConstraintCompiler::load(const std::string& model_dir) {
  auto out = std::make_shared<ConstraintCompiler>();
  auto tok = tokenizer::Tokenizer::load(model_dir);
  if (!tok.ok()) {
    out->unavailable_ =
        cat("constrained decoding needs the model's tokenizer: ", tok.status().message());
    return out;
  }
  auto vocab = grammar::VocabIndex::from_tokenizer(*tok);
  if (!vocab.ok()) {
    out->unavailable_ = std::string(vocab.status().message());
    return out;
  }
  out->vocab_ = std::make_shared<const grammar::VocabIndex>(std::move(*vocab));
  return out;
}

namespace {

// Ordered: enum and const objects keep the key order the schema declares.
StatusOr<nlohmann::ordered_json> parse(const std::string& text, std::string_view what) {
  nlohmann::ordered_json j =
      nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(cat(what, " is not valid JSON"));
  return j;
}

StatusOr<grammar::OutputSpec> spec_of(const v1::OutputConstraint& c) {
  grammar::OutputSpec s;
  switch (c.body()) {
    case v1::OutputConstraint::JSON_OBJECT:
      s.body = grammar::OutputSpec::Body::kJsonObject;
      break;
    case v1::OutputConstraint::JSON_SCHEMA: {
      s.body = grammar::OutputSpec::Body::kJsonSchema;
      K3_ASSIGN_OR_RETURN(s.schema, parse(c.json_schema(), "the constraint's json_schema"));
      break;
    }
    default:
      s.body = grammar::OutputSpec::Body::kText;
  }
  s.thinking = c.thinking();
  switch (c.tool_choice()) {
    case v1::OutputConstraint::TOOL_CHOICE_AUTO:
      s.tool_choice = grammar::OutputSpec::ToolChoice::kAuto;
      break;
    case v1::OutputConstraint::TOOL_CHOICE_REQUIRED:
      s.tool_choice = grammar::OutputSpec::ToolChoice::kRequired;
      break;
    case v1::OutputConstraint::TOOL_CHOICE_NAMED:
      s.tool_choice = grammar::OutputSpec::ToolChoice::kNamed;
      break;
    default:
      s.tool_choice = grammar::OutputSpec::ToolChoice::kNone;
  }
  for (const auto& t : c.tools()) {
    grammar::ToolSpec tool;
    tool.name = t.name();
    if (!t.parameters_json().empty()) {
      K3_ASSIGN_OR_RETURN(tool.parameters,
                          parse(t.parameters_json(), cat("tool '", t.name(), "' parameters")));
    }
    s.tools.push_back(std::move(tool));
  }
  s.named = c.named_tool();
  s.parallel_tool_calls = !c.single_tool_call();
  return s;
}

}  // namespace

bool constrains_think_only(const v1::OutputConstraint& c) {
  return c.think_budget_tokens() > 0 && c.body() == v1::OutputConstraint::TEXT &&
         c.tool_choice() == v1::OutputConstraint::TOOL_CHOICE_AUTO && !c.single_tool_call();
}

StatusOr<std::shared_ptr<const grammar::Constraint>> ConstraintCompiler::compile(
    const v1::OutputConstraint& c) {
  if (vocab_ == nullptr) return absl::FailedPreconditionError(unavailable_);
  std::string key;
  c.SerializeToString(&key);
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto it = lru_.begin(); it != lru_.end(); ++it)
      if (it->first == key) {
        lru_.splice(lru_.begin(), lru_, it);
        return lru_.front().second;
      }
  }
  if (c.think_budget_tokens() > 0 && !c.thinking())
    return absl::InvalidArgumentError(
        "the constraint's think_budget_tokens needs thinking (the think channel open)");
  std::shared_ptr<const grammar::Grammar> g;
  if (constrains_think_only(c)) {
    g = grammar::think_channel_grammar();
  } else {
    K3_ASSIGN_OR_RETURN(grammar::OutputSpec spec, spec_of(c));
    K3_ASSIGN_OR_RETURN(g, grammar::output_grammar(spec));
  }
  auto constraint = grammar::Constraint::create(std::move(g), vocab_);
  std::lock_guard<std::mutex> lk(mu_);
  lru_.emplace_front(std::move(key), constraint);
  if (lru_.size() > kMaxCached) lru_.pop_back();
  return constraint;
}

}  // namespace k3::engined
