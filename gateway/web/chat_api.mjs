// The page's client of the gateway's own OpenAI API: the chat request built
// from the settings and a conversation, the SSE stream of
// /v1/chat/completions read with fetch and a ReadableStream (aborting the
// fetch closes the connection: the gateway cancels the generation), and the
// chunks folded into a reply, and the stream's progress comments (queued,
// prompt reading) read for the line a reply shows before its text. No DOM
// here.

// An error answer of the API (or a stream's error event).
export class ApiError extends Error {
  constructor(message, status = 0, code = '') {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

function headers(apiKey, extra = {}) {
  const h = { ...extra };
  if (apiKey) h.Authorization = `Bearer ${apiKey}`;
  return h;
}

async function errorOf(res) {
  let message = `${res.status} ${res.statusText}`;
  let code = '';
  try {
    const j = await res.json();
    if (j?.error?.message) message = j.error.message;
    if (j?.error?.code) code = String(j.error.code);
  } catch {
    // Not JSON: the status line says enough.
  }
  return new ApiError(message, res.status, code);
}

// The served model's id (GET /v1/models).
export async function fetchModel(apiKey) {
  const res = await fetch('/v1/models', { headers: headers(apiKey) });
  if (!res.ok) throw await errorOf(res);
  const j = await res.json();
  return j?.data?.[0]?.id ?? '';
}

// The body of POST /v1/chat/completions for `messages` (the conversation as
// kept, ending with the user message to answer). Past replies go back
// without their reasoning, as OpenAI clients do; failed ones not at all.
export function chatRequestBody(settings, messages, model) {
  const out = [];
  if (settings.systemPrompt.trim() !== '') out.push({ role: 'system', content: settings.systemPrompt });
  for (const m of messages) {
    if (m.role === 'user') {
      out.push({ role: 'user', content: m.content });
      continue;
    }
    if (m.error && m.content === '' && m.toolCalls.length === 0) continue;
    const reply = { role: 'assistant', content: m.content };
    if (m.toolCalls.length > 0) {
      reply.tool_calls = m.toolCalls.map((c) => ({
        id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments },
      }));
    }
    out.push(reply);
  }
  const body = {
    messages: out,
    stream: true,
    stream_options: { include_usage: true },
    temperature: settings.temperature,
    max_tokens: settings.maxTokens,
    thinking: settings.thinking,
  };
  if (model) body.model = model;
  if (settings.thinking) body.thinking_effort = settings.effort;
  return body;
}

// Folds one chunk into `reply` ({content, reasoning, toolCalls, usage,
// finishReason}); returns whether it carried generated text or a tool call.
export function applyChunk(reply, chunk) {
  let generated = false;
  if (chunk.usage) reply.usage = chunk.usage;
  for (const choice of chunk.choices ?? []) {
    const d = choice.delta ?? {};
    if (typeof d.reasoning_content === 'string' && d.reasoning_content !== '') {
      reply.reasoning += d.reasoning_content;
      generated = true;
    }
    if (typeof d.content === 'string' && d.content !== '') {
      reply.content += d.content;
      generated = true;
    }
    for (const tc of d.tool_calls ?? []) {
      const i = Number.isInteger(tc.index) ? tc.index : reply.toolCalls.length;
      while (reply.toolCalls.length <= i) reply.toolCalls.push({ id: '', name: '', arguments: '' });
      const call = reply.toolCalls[i];
      if (tc.id) call.id = tc.id;
      if (tc.function?.name) call.name = tc.function.name;
      if (typeof tc.function?.arguments === 'string') call.arguments += tc.function.arguments;
      generated = true;
    }
    if (choice.finish_reason) reply.finishReason = choice.finish_reason;
  }
  return generated;
}

// What a finished reply's finish_reason tells the reader, or '' when it
// ended as it should ('stop') or has none (stopped, failed, still streaming).
// 'length' inside the thinking (reasoning but no answer or tool call yet) is
// the case that looked like an empty reply (issue 27).
export function finishNotice(reply) {
  const reason = reply.finishReason;
  if (!reason || reason === 'stop') return '';
  if (reason === 'length') {
    const thinking = reply.content === '' && (reply.toolCalls ?? []).length === 0 && reply.reasoning !== '';
    return thinking
      ? 'Max tokens reached while thinking: no answer yet. Raise Max tokens in Settings, then Regenerate.'
      : 'Max tokens reached: the answer is cut off. Raise Max tokens in Settings, then Regenerate.';
  }
  if (reason === 'tool_calls') return 'Ended with a tool call: this page does not run tools.';
  if (reason === 'content_filter') return 'Stopped by a content filter.';
  return `Ended: ${String(reason).replace(/_/g, ' ')}.`;
}

// One SSE comment line (it starts with ':') as a progress report, or null.
// The gateway sends (docs/openai-api.md, "Streams"):
//   ": queued N"                  waiting for admission  -> {queued: N}
//   ": prefill DONE/TOTAL eta_s=S" reading the prompt     -> {done, total, etaS}
// (N: the place in line, 1 = next; TOTAL: the prompt tokens computed after
// reuse; S: seconds left, left out while engined has measured no rate) and
// ": keep-alive" (null), as is any other comment.
export function parseProgressComment(line) {
  const text = line.replace(/\r$/, '');
  let m = /^: ?queued (\d+)$/.exec(text);
  if (m) return { queued: Number(m[1]) };
  m = /^: ?prefill (\d+)\/(\d+)(?: eta_s=(-?\d+(?:\.\d+)?))?$/.exec(text);
  if (!m) return null;
  const p = { done: Number(m[1]), total: Number(m[2]) };
  if (m[3] !== undefined) p.etaS = Number(m[3]);
  return p;
}

// Streams a chat completion: onChunk(chunk) for every event until [DONE],
// onProgress(report) for every progress comment (parseProgressComment).
// Throws ApiError for an error status or error event, AbortError when
// `signal` aborts, and Error when the stream ends without [DONE]. There is
// no time limit here: at a few seconds per token a reply may stream for
// hours, and Stop (`signal`) ends it.
export async function streamChat({ body, apiKey, signal, onChunk, onProgress = () => {} }) {
  const res = await fetch('/v1/chat/completions', {
    method: 'POST',
    headers: headers(apiKey, { 'Content-Type': 'application/json', Accept: 'text/event-stream' }),
    body: JSON.stringify(body),
    signal,
  });
  if (!res.ok) throw await errorOf(res);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const lines = event.split('\n');
      for (const l of lines) {
        if (!l.startsWith(':')) continue;
        const progress = parseProgressComment(l);
        if (progress) onProgress(progress);
      }
      const data = lines
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, '').replace(/\r$/, ''))
        .join('\n');
      if (data === '') continue;
      if (data === '[DONE]') {
        await reader.cancel();
        return;
      }
      let chunk;
      try {
        chunk = JSON.parse(data);
      } catch {
        throw new ApiError(`the server sent an event that is not JSON: ${data.slice(0, 80)}`);
      }
      if (chunk.error) throw new ApiError(chunk.error.message ?? 'error', 0, chunk.error.code ?? '');
      onChunk(chunk);
    }
  }
  throw new ApiError('the stream ended before [DONE] (connection lost?)');
}
