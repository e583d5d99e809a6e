// A conversation as a file to download: JSON (the messages in the shape of
// the chat API's, so a script can send them again, with what the page knows
// of each reply) or Markdown (to read or paste). Pure functions, no DOM; the
// settings go without the API key.
import { finishNotice } from './chat_api.mjs';

export const EXPORT_FORMAT = 'k3serve.conversation';
export const EXPORT_VERSION = 1;

// The settings worth keeping with a conversation: never the API key.
function settingsOf(settings) {
  if (!settings) return undefined;
  return {
    system_prompt: settings.systemPrompt,
    temperature: settings.temperature,
    max_tokens: settings.maxTokens,
    thinking: settings.thinking,
    thinking_effort: settings.effort,
  };
}

// {format, version, title, model, exported_at, settings, messages}: user
// messages {role, content}; replies {role, content, reasoning_content,
// tool_calls, finish_reason, stopped, error, stats} (the keys with a value).
export function conversationJson(conversation, { model = '', settings = null, now = new Date() } = {}) {
  const messages = conversation.messages.map((m) => {
    if (m.role === 'user') return { role: 'user', content: m.content };
    const out = { role: 'assistant', content: m.content };
    if (m.reasoning) out.reasoning_content = m.reasoning;
    if (m.toolCalls?.length > 0) {
      out.tool_calls = m.toolCalls.map((c) => ({
        id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments },
      }));
    }
    if (m.finishReason) out.finish_reason = m.finishReason;
    if (m.stopped) out.stopped = true;
    if (m.error) out.error = m.error;
    if (m.stats) out.stats = m.stats;
    return out;
  });
  const doc = {
    format: EXPORT_FORMAT,
    version: EXPORT_VERSION,
    title: conversation.title,
    model: model || undefined,
    exported_at: now.toISOString(),
    settings: settingsOf(settings),
    messages,
  };
  return `${JSON.stringify(doc, null, 2)}\n`;
}

// Text as a Markdown blockquote, each line prefixed.
function quote(text) {
  return text.split('\n').map((l) => (l === '' ? '>' : `> ${l}`)).join('\n');
}

// A fence longer than any run of backticks in `text`.
function fence(text) {
  const longest = Math.max(2, ...[...text.matchAll(/`+/g)].map((m) => m[0].length));
  return '`'.repeat(longest + 1);
}

// "# Title", then each message under "## You" / "## K3": the reply's
// thinking as a quote, its tool calls as JSON code blocks, and why it ended
// when that was not normal (finishNotice).
export function conversationMarkdown(conversation, { model = '', now = new Date() } = {}) {
  const out = [`# ${conversation.title}`, ''];
  const when = now.toISOString().replace('T', ' ').replace(/:\d\d\.\d+Z$/, ' UTC');
  out.push(`*Exported from k3serve on ${when}${model ? ` · model ${model}` : ''}*`, '');
  for (const m of conversation.messages) {
    if (m.role === 'user') {
      out.push('## You', '', m.content, '');
      continue;
    }
    out.push('## K3', '');
    if (m.reasoning) out.push('**Thinking**', '', quote(m.reasoning), '');
    for (const c of m.toolCalls ?? []) {
      let args = c.arguments;
      try {
        args = JSON.stringify(JSON.parse(c.arguments), null, 2);
      } catch {
        // Not JSON: as sent.
      }
      const f = fence(args);
      out.push(`**Tool call: ${c.name || '(unnamed)'}**`, '', `${f}json`, args, f, '');
    }
    if (m.content) out.push(m.content, '');
    const notes = [];
    if (m.stopped) notes.push('Stopped.');
    if (m.error) notes.push(`Error: ${m.error}`);
    if (!m.stopped && !m.error) {
      const notice = finishNotice(m);
      if (notice) notes.push(notice);
    }
    for (const n of notes) out.push(`*${n}*`, '');
  }
  return `${out.join('\n').replace(/\n+$/, '')}\n`;
}

// A file name from the title: "k3serve-hello-who-are-you.md".
export function exportFileName(conversation, extension) {
  const slug = conversation.title.toLowerCase().normalize('NFKD').replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '').slice(0, 48).replace(/-+$/, '');
  return `k3serve-${slug || 'conversation'}.${extension}`;
}
