// A chat request's enforceable output form: response_format (json_object,
// json_schema strict or not), tool_choice (required, a named function, none)
// and parallel_tool_calls, turned into engined's OutputConstraint. The
// grammar is compiled here once too, so an unsupported schema keyword is a
// 400 naming it before any engine work.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "k3serve/v1/engine.pb.h"
#include "shared/status.h"

namespace k3::gateway {

// `render`: the request's tools / tool_choice / response_format fields (as
// chat::render_chat reads them); `thinking`: the generation prompt opens the
// think channel; `think_budget`: its tokens at most (0: no limit; ignored
// without thinking). Nothing to enforce (text, tool_choice auto with
// parallel calls, no budget): nullopt; a budget with nothing else to
// enforce: a constraint of the think channel only (body TEXT, tool_choice
// AUTO, no tools: engine.proto). Malformed tools entries, an undefined
// function name or an unsupported schema: InvalidArgument.
StatusOr<std::optional<k3serve::v1::OutputConstraint>> output_constraint(
    const nlohmann::ordered_json& render, bool thinking, bool parallel_tool_calls,
    int64_t think_budget = 0);

}  // namespace k3::gateway
