"""An independent Python port of Kimi-K3's chat rendering rules.

Written from the rules of Moonshot's reference encoder (`encoding_k3.py`, as
vendored in vLLM at vllm/tokenizers/encoding_k3.py), not from our C++: it is
the golden side of tests/reference/xtml_golden.py, which compares it with
`k3ctl chat-render` segment by segment (docs/chat-format.md lists the rules).

render(request) takes a chat request as JSON (messages, tools, tool_choice,
response_format, add_generation_prompt, thinking, enable_thinking,
reasoning_effort, thinking_effort) and returns [[text, is_markup], ...], or
raises RenderError where the reference raises. The `developer` role, which
the reference drops, renders as system only with developer_as_system (the
gateway's deviation).
"""

import json

OPEN, CLOSE, SEP, EOM = "<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"
IMAGE = "<|kimi_image_placeholder|>"
EFFORTS = ("high", "low", "max")

EFFORT_BODY = (
    "`thinking_effort` guides on how much to think in your thinking channel "
    "(not including the response channel), supported values include `low`, "
    "`medium`, `high`, and `max`.\nNow the system is invoked with "
    "`thinking_effort={}`."
)
DECLARE = "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n{}\n```"
DECLARE_MID = (
    "## New Tools Available\nThe system dynamically extends the toolset via "
    "lazy-loading.\nYou have access to all existing and extended tools.\n"
    "Here are the specs for the extended tools.\n\n```json\n{}\n```"
)
CHOICE = {
    "required": "The system is invoked with `tool_choice=required`.\n"
    "You MUST call tools in the next message.",
    "none": "The system is invoked with `tool_choice=none`.\n"
    "You MUST NOT call any tools in the next message.",
}
RAW_JSON = (
    "Your response must be raw JSON data without markdown code blocks (```json) "
    "or any additional formatting."
)
FORMAT_OBJECT = "The system is invoked with `response_format=json_object`.\n" + RAW_JSON
FORMAT_SCHEMA = (
    "The system is invoked with `response_format=json_schema`.\n" + RAW_JSON +
    "\nThe JSON data must match the following schema:\n```json\n{}\n```"
)


class RenderError(Exception):
    pass


def sorted_deep(v):
    if isinstance(v, dict):
        return {k: sorted_deep(v[k]) for k in sorted(v)}
    if isinstance(v, list):
        return [sorted_deep(x) for x in v]
    return v


def compact(v):
    return json.dumps(sorted_deep(v), ensure_ascii=False, separators=(",", ":"))


class Out:
    def __init__(self):
        self.segs = []

    def text(self, t):
        t = str(t)
        if t:
            self.segs.append([t, False])

    def mark(self, t):
        self.segs.append([t, True])

    def open(self, tag, attrs=()):
        self.mark(OPEN)
        self.text(tag)
        for k, v in attrs:
            self.text(" " + k)
            self.text('="')
            self.text(str(v).replace("&", "&amp;").replace('"', "&quot;"))
            self.text('"')
        self.mark(SEP)

    def close(self, tag):
        self.mark(CLOSE)
        self.text(tag)
        self.mark(SEP)

    def system(self, kind, body, strip=True):
        self.open("message", [("role", "system"), ("type", kind)])
        self.text(body.strip() if strip else body)
        self.close("message")
        self.mark(EOM)


def options(req):
    """(thinking, effort): thinking, else enable_thinking, else on; a
    reasoning_effort of none turns thinking off, any other is the effort unless
    thinking_effort is set; effort defaults to max and must be a known one."""
    thinking = req.get("thinking")
    if thinking is None:
        thinking = req.get("enable_thinking")
        if thinking is None:
            thinking = True
    effort = req.get("thinking_effort")
    reasoning = req.get("reasoning_effort")
    if reasoning == "none":
        thinking = False
    elif reasoning is not None and effort is None:
        effort = reasoning
    if effort is None:
        effort = "max"
    if effort not in EFFORTS:
        raise RenderError("thinking_effort: supported values " + ", ".join(EFFORTS))
    return thinking, effort


def reorder_tool_results(messages):
    """Each run of consecutive tool messages, when every one answers (by
    tool_call_id, else id) a call of the latest assistant message, sorted by
    that call's position and named after it. Returns [(message, name)]."""
    out = []
    table = {}
    k = 0
    while k < len(messages):
        m = messages[k]
        role = m.get("role") if isinstance(m, dict) else None
        if role == "assistant":
            table = {}
            calls = m.get("tool_calls")
            if calls and isinstance(calls, list):
                for pos, call in enumerate(calls, 1):
                    if not isinstance(call, dict) or call.get("id") is None:
                        continue
                    fn = call.get("function")
                    name = fn.get("name") if isinstance(fn, dict) else call.get("name")
                    table.setdefault(str(call["id"]), (pos, name))
        if role != "tool":
            out.append((m, None))
            k += 1
            continue
        run = []
        while k < len(messages) and isinstance(messages[k], dict) and messages[k].get("role") == "tool":
            t = messages[k]
            ref = t["tool_call_id"] if "tool_call_id" in t else t.get("id")
            hit = table.get(str(ref)) if ref is not None else None
            run.append((hit, len(run), t))
            k += 1
        if all(h is not None for h, _, _ in run):
            run.sort(key=lambda e: (e[0][0], e[1]))
            out.extend((t, h[1]) for h, _, t in run)
        else:
            out.extend((t, None) for _, _, t in run)
    return out


def tool_arguments(fn):
    """(mapping, raw): the arguments as a dict, or the unparsable text."""
    a = fn.get("arguments")
    if a is None:
        return {}, None
    if isinstance(a, dict):
        return a, None
    if not isinstance(a, str):
        raise RenderError("arguments must be a dict or a JSON object string")
    if not a.strip():
        return {}, None
    try:
        parsed = json.loads(a)
    except ValueError:
        return None, a
    if not isinstance(parsed, dict):
        raise RenderError("arguments must be a JSON object")
    return parsed, None


def value_type(v):
    if isinstance(v, bool):
        return "boolean"
    if v is None:
        return "null"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    return "object" if isinstance(v, dict) else "array"


def content(out, c):
    if c is None:
        return
    if isinstance(c, str):
        out.text(c)
        return
    if not isinstance(c, list):
        raise RenderError("content must be a string or a list")
    for part in c:
        if not isinstance(part, dict) or "type" not in part:
            raise RenderError("content part needs a type")
        if part["type"] in ("image", "image_url"):
            out.mark(IMAGE)
        elif "text" not in part:
            raise RenderError("content part needs a text")
        else:
            out.text(part["text"])


def open_message(out, m, role):
    attrs = [("role", role)]
    if m.get("name"):
        attrs.append(("name", m["name"]))
    out.open("message", attrs)


def assistant(out, m, thinking):
    open_message(out, m, "assistant")
    if thinking:
        r = m.get("reasoning_content") or m.get("reasoning")
        out.open("think")
        if r is not None and str(r).strip():
            out.text(r)
        out.close("think")
    out.open("response")
    content(out, m.get("content"))
    out.close("response")
    calls = m.get("tool_calls")
    if calls:
        if not isinstance(calls, list):
            raise RenderError("tool_calls must be a list")
        out.open("tools")
        for n, call in enumerate(calls, 1):
            if not isinstance(call, dict):
                raise RenderError("tool call must be an object")
            fn = call.get("function", call)
            if not isinstance(fn, dict) or "name" not in fn:
                raise RenderError("tool call needs a name")
            args, raw = tool_arguments(fn)
            out.open("call", [("tool", fn["name"]), ("index", n)])
            if raw is not None:
                out.open("json", [("type", "object")])
                out.text(raw)
                out.close("json")
            else:
                for key, v in args.items():
                    out.open("argument", [("key", key), ("type", value_type(v))])
                    out.text(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False))
                    out.close("argument")
            out.close("call")
        out.close("tools")
    out.close("message")
    out.mark(EOM)


def schema_of(rf):
    js = rf.get("json_schema") if isinstance(rf, dict) else None
    if isinstance(js, dict):
        if "schema" in js:
            return js["schema"]
        if "json_schema" in js:
            return js["json_schema"]
    return js


def render(req, developer_as_system=False):
    if not isinstance(req, dict) or not isinstance(req.get("messages"), list):
        raise RenderError("messages is required")
    thinking, effort = options(req)
    out = Out()
    if req.get("tools"):
        out.system("tool-declare", DECLARE.format(compact(req["tools"])), strip=False)
    if thinking:
        out.system("thinking-effort", EFFORT_BODY.format(effort))
    last_calls = None
    count = 0
    for m, resolved in reorder_tool_results(req["messages"]):
        if not isinstance(m, dict):
            continue
        if "role" not in m:
            raise RenderError("a message needs a role")
        role = m["role"]
        if role == "developer" and developer_as_system:
            role = "system"
        if role == "system" and m.get("tools"):
            out.system("tool-declare", DECLARE_MID.format(compact(m["tools"])), strip=False)
        elif role in ("user", "system"):
            open_message(out, m, role)
            content(out, m.get("content"))
            out.close("message")
            out.mark(EOM)
        elif role == "assistant":
            last_calls = m.get("tool_calls")
            count = 0
            assistant(out, m, thinking)
        elif role == "tool":
            count += 1
            name = resolved
            if name is None:
                name = m["tool"] if "tool" in m else m.get("name")
            if name is None and last_calls is not None and count <= len(last_calls):
                call = last_calls[count - 1]
                fn = call.get("function", call)
                if "name" not in fn:
                    raise RenderError("tool call needs a name")
                name = fn["name"]
            if name is None:
                raise RenderError("a tool message needs a resolvable tool name")
            out.open("message", [("role", "tool"), ("tool", name), ("index", count)])
            content(out, m.get("content"))
            out.close("message")
            out.mark(EOM)
    choice = req.get("tool_choice")
    if isinstance(choice, str) and choice in CHOICE:
        out.system("tool-choice", CHOICE[choice])
    rf = req.get("response_format")
    kind = rf.get("type", rf) if isinstance(rf, dict) else rf
    if kind == "json_object":
        out.system("response-format", FORMAT_OBJECT)
    elif kind == "json_schema":
        out.system("response-format", FORMAT_SCHEMA.format(compact(schema_of(rf))))
    if req.get("add_generation_prompt", True):
        out.open("message", [("role", "assistant")])
        out.open("think" if thinking else "response")
    return out.segs
