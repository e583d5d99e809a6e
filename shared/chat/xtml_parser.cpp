#include "shared/chat/xtml_parser.h"

#include <nlohmann/json.hpp>

#include "shared/chat/python_compat.h"
#include "shared/chat/segment.h"

namespace k3::chat {
namespace {

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string_view trim_ascii(std::string_view s) {
  while (!s.empty() && is_ascii_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ascii_space(s.back())) s.remove_suffix(1);
  return s;
}

// An open tag's header: `tag key="value" key2="value2"` (values escaped).
struct Header {
  std::string tag;
  std::vector<std::pair<std::string, std::string>> attributes;
  std::string attribute(std::string_view key) const {
    for (const auto& [k, v] : attributes) {
      if (k == key) return v;
    }
    return {};
  }
};

Header parse_header(std::string_view text) {
  Header h;
  text = trim_ascii(text);
  size_t i = 0;
  while (i < text.size() && !is_ascii_space(text[i])) ++i;
  h.tag = std::string(text.substr(0, i));
  // Attributes: key="value"; anything that does not fit is skipped.
  while (i < text.size()) {
    while (i < text.size() && is_ascii_space(text[i])) ++i;
    const size_t eq = text.find("=\"", i);
    if (eq == std::string_view::npos) break;
    const size_t end = text.find('"', eq + 2);
    if (end == std::string_view::npos) break;
    h.attributes.emplace_back(std::string(trim_ascii(text.substr(i, eq - i))),
                              unescape_attribute(text.substr(eq + 2, end - eq - 2)));
    i = end + 1;
  }
  return h;
}

}  // namespace

std::string argument_json(std::string_view type, std::string_view text) {
  std::string out;
  if (type != "string") {
    const std::string_view trimmed = python_strip(text);
    if (nlohmann::json::accept(trimmed.begin(), trimmed.end())) return std::string(trimmed);
  }
  append_json_string(text, &out);
  return out;
}

OutputParser::OutputParser(bool thinking) {
  stack_.push_back({Kind::kMessage, "message", {}, {}, {}});
  if (thinking) {
    stack_.push_back({Kind::kThink, "think", {}, {}, {}});
  } else {
    stack_.push_back({Kind::kResponse, "response", {}, {}, {}});
  }
}

void OutputParser::route_text(std::string_view text, ChatDelta* delta) {
  if (text.empty()) return;
  for (auto it = stack_.rbegin(); it != stack_.rend(); ++it) {
    switch (it->kind) {
      case Kind::kThink:
        message_.reasoning_content += text;
        if (delta != nullptr) delta->reasoning_content += text;
        return;
      case Kind::kResponse:
        message_.content += text;
        if (delta != nullptr) delta->content += text;
        return;
      case Kind::kArgument:
      case Kind::kJson:
        it->text += text;
        return;
      case Kind::kOther:
        continue;  // transparent
      case Kind::kMessage:
      case Kind::kTools:
      case Kind::kCall:
        break;  // stray text between elements: content
    }
    break;
  }
  message_.content += text;
  if (delta != nullptr) delta->content += text;
}

void OutputParser::feed_text(std::string_view text, ChatDelta* delta) {
  if (done_) return;
  if (mode_ == Mode::kBody) {
    route_text(text, delta);
  } else {
    header_ += text;
  }
}

// A tag header that never got its <|sep|>: its text is returned as text.
void OutputParser::abandon_header(ChatDelta* delta) {
  mode_ = Mode::kBody;
  std::string text = std::move(header_);
  header_.clear();
  route_text(text, delta);
}

void OutputParser::feed_control(Control control, ChatDelta* delta) {
  if (done_) return;
  switch (control) {
    case Control::kOpen:
    case Control::kClose:
      if (mode_ != Mode::kBody) abandon_header(delta);
      mode_ = control == Control::kOpen ? Mode::kOpenHeader : Mode::kCloseHeader;
      header_.clear();
      return;
    case Control::kSep: {
      if (mode_ == Mode::kBody) return;  // stray
      const Mode mode = mode_;
      const std::string header = std::move(header_);
      header_.clear();
      mode_ = Mode::kBody;
      if (mode == Mode::kOpenHeader) {
        open_element(header, delta);
      } else {
        close_element(trim_ascii(header), delta);
      }
      return;
    }
    case Control::kEndOfMsg:
      finish(delta);
      message_.ended = true;
      return;
    case Control::kOther:
      return;
  }
}

bool OutputParser::in_call() const {
  for (const Element& e : stack_) {
    if (e.kind == Kind::kCall) return true;
  }
  return false;
}

void OutputParser::open_element(std::string_view header_text, ChatDelta* delta) {
  const Header header = parse_header(header_text);
  if (header.tag.empty()) {
    route_text(header_text, delta);
    return;
  }
  auto close_open = [&](std::string_view tag) {
    for (const Element& e : stack_) {
      if (e.tag == tag) {
        close_element(tag, delta);
        return;
      }
    }
  };
  Element element{Kind::kOther, header.tag, {}, {}, {}};
  if (header.tag == "think" || header.tag == "response") {
    // A channel opened inside the other one: the model forgot to close it.
    close_open("think");
    close_open("response");
    element.kind = header.tag == "think" ? Kind::kThink : Kind::kResponse;
  } else if (header.tag == "tools") {
    element.kind = Kind::kTools;
  } else if (header.tag == "call") {
    close_open("call");
    element.kind = Kind::kCall;
    const size_t index = message_.tool_calls.size();
    message_.tool_calls.push_back({header.attribute("tool"), ""});
    if (delta != nullptr) call_delta(delta, index).name = header.attribute("tool");
    call_has_object_ = false;
    call_has_raw_ = false;
  } else if ((header.tag == "argument" || header.tag == "json") && in_call()) {
    close_open("argument");
    close_open("json");
    element.kind = header.tag == "argument" ? Kind::kArgument : Kind::kJson;
    element.key = header.attribute("key");
    element.type = header.attribute("type");
  }
  stack_.push_back(std::move(element));
}

void OutputParser::close_element(std::string_view tag, ChatDelta* delta) {
  size_t at = stack_.size();
  while (at > 0 && stack_[at - 1].tag != tag) --at;
  if (at == 0) return;  // nothing of that name is open: ignore the close tag
  while (stack_.size() >= at) {
    Element element = std::move(stack_.back());
    stack_.pop_back();
    finalize(element, delta);
  }
}

void OutputParser::finalize(Element& element, ChatDelta* delta) {
  switch (element.kind) {
    case Kind::kArgument: {
      std::string fragment = call_has_object_ ? ", " : "{";
      append_json_string(element.key, &fragment);
      fragment += ": ";
      fragment += argument_json(element.type, element.text);
      call_has_object_ = true;
      append_arguments(fragment, delta);
      return;
    }
    case Kind::kJson:
      call_has_raw_ = true;
      append_arguments(element.text, delta);
      return;
    case Kind::kCall:
      if (call_has_object_) {
        append_arguments("}", delta);
      } else if (!call_has_raw_) {
        append_arguments("{}", delta);
      }
      return;
    default:
      return;
  }
}

void OutputParser::append_arguments(std::string_view fragment, ChatDelta* delta) {
  if (message_.tool_calls.empty() || fragment.empty()) return;
  const size_t index = message_.tool_calls.size() - 1;
  message_.tool_calls[index].arguments += fragment;
  if (delta != nullptr) call_delta(delta, index).arguments += fragment;
}

ToolCallDelta& OutputParser::call_delta(ChatDelta* delta, size_t index) {
  if (delta->tool_calls.empty() || delta->tool_calls.back().index != index) {
    delta->tool_calls.push_back({index, std::nullopt, ""});
  }
  return delta->tool_calls.back();
}

void OutputParser::finish(ChatDelta* delta) {
  if (done_) return;
  if (mode_ != Mode::kBody) abandon_header(delta);
  while (!stack_.empty()) {
    Element element = std::move(stack_.back());
    stack_.pop_back();
    finalize(element, delta);
  }
  done_ = true;
}

ParsedMessage parse_output_text(std::string_view text, bool thinking) {
  OutputParser parser(thinking);
  static constexpr std::pair<std::string_view, Control> kTokens[] = {
      {kOpenToken, Control::kOpen},
      {kCloseToken, Control::kClose},
      {kSepToken, Control::kSep},
      {kEndOfMsgToken, Control::kEndOfMsg},
  };
  size_t plain = 0;
  size_t i = 0;
  while (i < text.size()) {
    bool matched = false;
    if (text[i] == '<') {
      for (const auto& [token, control] : kTokens) {
        if (text.substr(i).starts_with(token)) {
          parser.feed_text(text.substr(plain, i - plain), nullptr);
          parser.feed_control(control, nullptr);
          i += token.size();
          plain = i;
          matched = true;
          break;
        }
      }
    }
    if (!matched) ++i;
  }
  parser.feed_text(text.substr(plain), nullptr);
  parser.finish(nullptr);
  return parser.message();
}

}  // namespace k3::chat
