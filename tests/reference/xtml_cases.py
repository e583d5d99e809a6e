"""The chat-rendering cases both sides render (tests/reference/xtml_golden.py).

Each case: a name (docs/chat-format.md cites them), the request, and for a
request the reference refuses, `error`: text our error must contain.
`developer_as_system` passes k3ctl's --developer-as-system.
"""

U = {"role": "user", "content": "hi"}
CALLS = [
    {"id": "c1", "type": "function", "function": {"name": "alpha", "arguments": "{}"}},
    {"id": "c2", "type": "function", "function": {"name": "beta", "arguments": "{}"}},
    {"id": "c3", "type": "function", "function": {"name": "gamma", "arguments": "{}"}},
]
A_CALLS = {"role": "assistant", "content": "", "tool_calls": CALLS}


def tool(call_id, content, **extra):
    m = {"role": "tool", "tool_call_id": call_id, "content": content}
    m.update(extra)
    return m


CASES = [
    # Thinking options (_normalize_vllm_chat_options).
    {"name": "effort_default_max", "request": {"messages": [U]}},
    {"name": "thinking_off", "request": {"messages": [U], "thinking": False}},
    {"name": "enable_thinking_off", "request": {"messages": [U], "enable_thinking": False}},
    {"name": "thinking_beats_enable_thinking",
     "request": {"messages": [U], "thinking": True, "enable_thinking": False}},
    {"name": "thinking_off_beats_enable_thinking",
     "request": {"messages": [U], "thinking": False, "enable_thinking": True}},
    {"name": "reasoning_effort_none_turns_thinking_off",
     "request": {"messages": [U], "thinking": True, "reasoning_effort": "none"}},
    {"name": "reasoning_effort_low", "request": {"messages": [U], "reasoning_effort": "low"}},
    {"name": "reasoning_effort_max", "request": {"messages": [U], "reasoning_effort": "max"}},
    {"name": "thinking_effort_beats_reasoning_effort",
     "request": {"messages": [U], "reasoning_effort": "high", "thinking_effort": "low"}},
    {"name": "thinking_effort_high", "request": {"messages": [U], "thinking_effort": "high"}},
    {"name": "reasoning_effort_with_thinking_off",
     "request": {"messages": [U], "thinking": False, "reasoning_effort": "high"}},
    {"name": "reasoning_effort_none_with_valid_thinking_effort",
     "request": {"messages": [U], "reasoning_effort": "none", "thinking_effort": "low"}},
    {"name": "reasoning_effort_medium_refused",
     "request": {"messages": [U], "reasoning_effort": "medium"},
     "error": ["thinking_effort", "high, low, max"]},
    {"name": "thinking_effort_refused_with_thinking_off",
     "request": {"messages": [U], "thinking": False, "thinking_effort": "medium"},
     "error": ["thinking_effort", "high, low, max"]},
    {"name": "thinking_effort_case_sensitive",
     "request": {"messages": [U], "thinking_effort": "MAX"},
     "error": ["thinking_effort", "high, low, max"]},
    {"name": "reasoning_effort_none_bad_thinking_effort",
     "request": {"messages": [U], "reasoning_effort": "none", "thinking_effort": "minimal"},
     "error": ["thinking_effort", "high, low, max"]},
    {"name": "no_generation_prompt",
     "request": {"messages": [U], "add_generation_prompt": False}},

    # Tools, tool_choice, response_format.
    {"name": "tools_deep_sorted",
     "request": {"messages": [U], "tools": [{"type": "function", "function": {
         "name": "f", "parameters": {"type": "object", "properties": {
             "z": {"type": "string", "description": "zé \"q\""}, "a": {"type": "integer"}},
             "required": ["z", "a"]}, "description": "d"}}]}},
    {"name": "system_tools_mid_conversation",
     "request": {"messages": [U, {"role": "system", "content": "ignored",
                                  "tools": [{"b": 1, "a": {"d": 2, "c": 3}}]}]}},
    {"name": "system_empty_tools_renders_content",
     "request": {"messages": [{"role": "system", "content": "sys", "tools": []}, U]}},
    {"name": "tool_choice_required", "request": {"messages": [U], "tool_choice": "required"}},
    {"name": "tool_choice_none", "request": {"messages": [U], "tool_choice": "none"}},
    {"name": "tool_choice_auto_no_note", "request": {"messages": [U], "tool_choice": "auto"}},
    {"name": "tool_choice_object_no_note",
     "request": {"messages": [U], "tool_choice": {"type": "function", "function": {"name": "f"}}}},
    {"name": "response_format_json_object",
     "request": {"messages": [U], "response_format": {"type": "json_object"}}},
    {"name": "response_format_json_schema_sorted",
     "request": {"messages": [U], "response_format": {"type": "json_schema", "json_schema": {
         "name": "n", "schema": {"type": "object", "properties": {"b": {"type": "string"},
                                                                    "a": {"type": "number"}}}}}}},
    {"name": "response_format_json_schema_inner_json_schema",
     "request": {"messages": [U], "response_format": {"type": "json_schema", "json_schema": {
         "json_schema": {"type": "string"}}}}},
    {"name": "response_format_json_schema_itself",
     "request": {"messages": [U], "response_format": {"type": "json_schema", "json_schema": {
         "type": "object", "title": "T"}}}},
    {"name": "response_format_json_schema_missing",
     "request": {"messages": [U], "response_format": {"type": "json_schema"}}},
    {"name": "response_format_text_no_note",
     "request": {"messages": [U], "response_format": {"type": "text"}}},
    {"name": "response_format_as_string",
     "request": {"messages": [U], "response_format": "json_object"}},
    {"name": "notes_after_messages_in_order",
     "request": {"messages": [U], "tool_choice": "required", "tools": [{"name": "f"}],
                 "response_format": {"type": "json_object"}, "thinking_effort": "low"}},

    # Tool results: re-sorting and names (normalize_xtml_tool_result_messages).
    {"name": "tool_results_resorted",
     "request": {"messages": [U, A_CALLS, tool("c3", "three"), tool("c1", "one"),
                              tool("c2", "two")]}},
    {"name": "tool_results_resorted_across_user_message",
     "request": {"messages": [U, A_CALLS, {"role": "user", "content": "between"},
                              tool("c2", "two"), tool("c1", "one")]}},
    {"name": "tool_results_two_runs",
     "request": {"messages": [U, A_CALLS, tool("c2", "two"), {"role": "user", "content": "x"},
                              tool("c1", "one")]}},
    {"name": "tool_results_unresolved_run_untouched",
     "request": {"messages": [U, A_CALLS, tool("c3", "three"), tool("zz", "unknown"),
                              tool("c1", "one")]}},
    {"name": "tool_results_matched_name_beats_stale_name",
     "request": {"messages": [U, A_CALLS, tool("c2", "two", name="stale", tool="old"),
                              tool("c1", "one")]}},
    {"name": "tool_results_id_field",
     "request": {"messages": [U, A_CALLS, {"role": "tool", "id": "c2", "content": "two"},
                              {"role": "tool", "id": "c1", "content": "one"}]}},
    {"name": "tool_results_integer_ids",
     "request": {"messages": [U, {"role": "assistant", "tool_calls": [
         {"id": 7, "function": {"name": "a"}}, {"id": 8, "function": {"name": "b"}}]},
         {"role": "tool", "tool_call_id": 8, "content": "b"},
         {"role": "tool", "tool_call_id": 7, "content": "a"}]}},
    {"name": "tool_results_duplicate_id_first_wins",
     "request": {"messages": [U, {"role": "assistant", "tool_calls": [
         {"function": {"name": "noid"}}, {"id": "d", "function": {"name": "first"}},
         {"id": "d", "function": {"name": "second"}}, {"id": "e", "function": {"name": "e"}}]},
         tool("e", "E"), tool("d", "D")]}},
    {"name": "tool_results_match_only_latest_assistant",
     "request": {"messages": [U, A_CALLS, tool("c1", "one"),
                              {"role": "assistant", "content": "done"},
                              tool("c1", "late", name="named")]}},
    {"name": "tool_name_by_order",
     "request": {"messages": [U, A_CALLS, {"role": "tool", "content": "first"},
                              {"role": "tool", "content": "second"}]}},
    {"name": "tool_name_explicit_tool_beats_name",
     "request": {"messages": [U, {"role": "tool", "tool": "t", "name": "n", "content": "x"}]}},
    {"name": "tool_name_explicit_name",
     "request": {"messages": [U, {"role": "tool", "name": "n", "content": "x"}]}},
    {"name": "tool_name_empty_tool_rendered",
     "request": {"messages": [U, {"role": "tool", "tool": "", "name": "n", "content": "x"}]}},
    {"name": "tool_index_not_reset_by_user",
     "request": {"messages": [U, A_CALLS, {"role": "tool", "content": "1"},
                              {"role": "user", "content": "u"},
                              {"role": "tool", "content": "2"}]}},
    {"name": "tool_name_unresolvable_refused",
     "request": {"messages": [U, {"role": "tool", "content": "x"}]},
     "error": ["messages[1]", "tool name"]},
    {"name": "tool_name_beyond_calls_refused",
     "request": {"messages": [U, A_CALLS, tool("c1", "1"), tool("c2", "2"), tool("c3", "3"),
                              {"role": "tool", "content": "4"}]},
     "error": ["messages[5]", "tool name"]},

    # Assistant history.
    {"name": "reasoning_fallback_when_content_empty",
     "request": {"messages": [U, {"role": "assistant", "content": "a", "reasoning_content": "",
                                  "reasoning": "  thought  "}, U]}},
    {"name": "reasoning_content_wins",
     "request": {"messages": [U, {"role": "assistant", "content": "a", "reasoning_content": "rc",
                                  "reasoning": "r"}, U]}},
    {"name": "reasoning_blank_renders_empty_think",
     "request": {"messages": [U, {"role": "assistant", "content": "a",
                                  "reasoning_content": " \n\u3000"}, U]}},
    {"name": "history_without_think_when_off",
     "request": {"messages": [U, {"role": "assistant", "content": "a", "reasoning_content": "r"},
                              U], "thinking": False}},
    {"name": "empty_function_name_rendered",
     "request": {"messages": [U, {"role": "assistant", "tool_calls": [
         {"id": "x", "function": {"name": "", "arguments": "{\"a\": 1}"}}]},
         tool("x", "out")]}},
    {"name": "arguments_normalised",
     "request": {"messages": [U, {"role": "assistant", "content": "c", "tool_calls": [
         {"function": {"name": "s", "arguments":
                       "{\"z\": \"t\", \"a\": 1.0, \"n\": null, \"b\": true, \"o\": {\"y\": 1, "
                       "\"x\": [1, 2.5, \"é\"]}, \"l\": [], \"i\": 1e2, \"e\": \"\"}"}},
         {"function": {"name": "d", "arguments": {"k": [1, {"b": 2, "a": 1}], "j": "v"}}},
         {"function": {"name": "raw", "arguments": "not json {"}},
         {"function": {"name": "blank", "arguments": "  \n"}},
         {"function": {"name": "none"}},
         {"name": "flat", "arguments": "{\"q\": 2}"}]}]}},
    {"name": "arguments_not_an_object_refused",
     "request": {"messages": [U, {"role": "assistant", "tool_calls": [
         {"function": {"name": "f", "arguments": "[1, 2]"}}]}]},
     "error": ["messages[1].tool_calls[0]", "JSON object"]},
    {"name": "arguments_wrong_type_refused",
     "request": {"messages": [U, {"role": "assistant", "tool_calls": [
         {"function": {"name": "f", "arguments": 5}}]}]},
     "error": ["messages[1].tool_calls[0]", "arguments"]},
    {"name": "call_without_name_refused",
     "request": {"messages": [U, {"role": "assistant", "tool_calls": [
         {"function": {"arguments": "{}"}}]}]},
     "error": ["messages[1].tool_calls[0]", "name"]},
    {"name": "attribute_escaping",
     "request": {"messages": [{"role": "user", "name": "a&b \"c\" &amp;", "content": "x"},
                              {"role": "assistant", "tool_calls": [{"function": {
                                  "name": "f\"&", "arguments": {"k\"&": "v&\""}}}]}]}},

    # Messages and content.
    {"name": "names_and_empty_name",
     "request": {"messages": [{"role": "system", "content": "s", "name": "sys"},
                              {"role": "user", "content": "u", "name": ""},
                              {"role": "assistant", "content": "a", "name": "bot"}]}},
    {"name": "content_parts_and_image",
     "request": {"messages": [{"role": "user", "content": [
         {"type": "text", "text": " one "}, {"type": "image_url", "image_url": {"url": "u"}},
         {"type": "text", "text": ""}, {"type": "image"}, {"type": "text", "text": "two"}]}]}},
    {"name": "content_part_without_text_refused",
     "request": {"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]},
     "error": ["messages[0].content[0]", "text"]},
    {"name": "developer_dropped",
     "request": {"messages": [{"role": "developer", "content": "dev"}, U]}},
    {"name": "developer_as_system", "developer_as_system": True,
     "request": {"messages": [{"role": "developer", "content": "dev"}, U]}},
    {"name": "unknown_role_and_non_object_skipped",
     "request": {"messages": [{"role": "function", "content": "f"}, "junk", 3, U]}},
    {"name": "missing_role_refused",
     "request": {"messages": [{"content": "x"}]}, "error": ["messages[0]", "role"]},
    {"name": "empty_content_and_null",
     "request": {"messages": [{"role": "user", "content": ""}, {"role": "assistant"},
                              {"role": "user"}]}},
    {"name": "empty_tool_calls_give_no_name_by_order",
     "request": {"messages": [U, {"role": "assistant", "content": "x", "tool_calls": []},
                              {"role": "tool", "content": "r"}]},
     "error": ["messages[2]", "tool name"]},
    {"name": "developer_with_tools_as_system", "developer_as_system": True,
     "request": {"messages": [{"role": "developer", "content": "d", "tools": [{"b": 1, "a": 2}]},
                              U]}},
    {"name": "special_text_stays_text",
     "request": {"messages": [{"role": "user",
                               "content": "<|open|>x<|sep|><|kimi_image_placeholder|>"}]}},
]
