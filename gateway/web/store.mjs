// What the page keeps in the browser's localStorage: the settings (API key
// included: it never leaves this browser but in the Authorization header)
// and the conversations, each under its own key so that two tabs never
// overwrite each other's. Values read back are checked: storage edited by
// hand or by an older page falls back to defaults instead of breaking it.

const SETTINGS_KEY = 'k3serve.settings';
// Older pages kept every conversation under this one key (the last tab to
// write dropped the others' new conversations); read once and split.
const LEGACY_CONVERSATIONS_KEY = 'k3serve.conversations';
const CONVERSATION_PREFIX = 'k3serve.conversation.';
const CURRENT_KEY = 'k3serve.current';

// The model's thinking_effort values; max is its default (a stored value
// outside them, such as an older page's 'medium', falls back to it).
export const EFFORTS = ['low', 'high', 'max'];

// maxTokens: room for a thinking answer. At the real model's speed (about
// 5 s per token from one drive) thinking at the default effort (max) often
// runs to thousands of tokens before the answer starts; the old default of
// 1,024 (85 minutes) ended many replies inside the thinking, with no answer
// at all. 8,192 (about 11 hours at 5 s per token) leaves room for long
// thinking and its answer while still ending a reply that loops; Stop ends
// any reply sooner, and Settings changes it. The gateway sets no total
// deadline by default and the page none at all.
export const DEFAULT_SETTINGS = Object.freeze({
  apiKey: '',
  temperature: 0.6,
  maxTokens: 8192,
  thinking: true,
  effort: 'max',
  systemPrompt: '',
});

// Stored settings carry this; older pages saved none, and their maxTokens of
// 1,024 was that page's default, not a choice: it reads as today's default.
const SETTINGS_VERSION = 2;
const OLD_DEFAULT_MAX_TOKENS = 1024;

function readJson(key, fallback) {
  try {
    const text = localStorage.getItem(key);
    return text === null ? fallback : JSON.parse(text);
  } catch {
    return fallback;
  }
}

// Settings from storage, each field checked (else its default).
export function loadSettings() {
  const raw = readJson(SETTINGS_KEY, {});
  const s = { ...DEFAULT_SETTINGS };
  if (raw === null || typeof raw !== 'object') return s;
  if (typeof raw.apiKey === 'string') s.apiKey = raw.apiKey;
  if (Number.isFinite(raw.temperature) && raw.temperature >= 0 && raw.temperature <= 2) {
    s.temperature = raw.temperature;
  }
  if (Number.isInteger(raw.maxTokens) && raw.maxTokens >= 1 &&
      (raw.version === SETTINGS_VERSION || raw.maxTokens !== OLD_DEFAULT_MAX_TOKENS)) {
    s.maxTokens = raw.maxTokens;
  }
  if (typeof raw.thinking === 'boolean') s.thinking = raw.thinking;
  if (EFFORTS.includes(raw.effort)) s.effort = raw.effort;
  if (typeof raw.systemPrompt === 'string') s.systemPrompt = raw.systemPrompt;
  return s;
}

export function saveSettings(settings) {
  localStorage.setItem(SETTINGS_KEY, JSON.stringify({ ...settings, version: SETTINGS_VERSION }));
}

// A message as kept: {role: 'user'|'assistant', content, and for a reply
// reasoning, toolCalls [{id, name, arguments}], stats, stopped, error,
// finishReason (the API's finish_reason: stop, length, tool_calls)}.
function cleanMessage(m) {
  if (m === null || typeof m !== 'object') return null;
  if (m.role !== 'user' && m.role !== 'assistant') return null;
  const out = { role: m.role, content: typeof m.content === 'string' ? m.content : '' };
  if (m.role === 'assistant') {
    out.reasoning = typeof m.reasoning === 'string' ? m.reasoning : '';
    out.toolCalls = Array.isArray(m.toolCalls)
      ? m.toolCalls.filter((c) => c && typeof c.name === 'string').map((c) => ({
        id: String(c.id ?? ''), name: c.name, arguments: String(c.arguments ?? ''),
      }))
      : [];
    if (m.stats && typeof m.stats === 'object') out.stats = m.stats;
    if (m.stopped === true) out.stopped = true;
    if (typeof m.error === 'string') out.error = m.error;
    if (typeof m.finishReason === 'string' && /^[a-z_]{1,32}$/.test(m.finishReason)) {
      out.finishReason = m.finishReason;
    }
  }
  return out;
}

function cleanConversation(c) {
  if (!c || typeof c.id !== 'string' || c.id === '' || !Array.isArray(c.messages)) return null;
  return {
    id: c.id,
    title: typeof c.title === 'string' ? c.title : 'Untitled',
    updated: Number.isFinite(c.updated) ? c.updated : 0,
    messages: c.messages.map(cleanMessage).filter((m) => m !== null),
  };
}

// The conversations, newest first: {id, title, updated (ms), messages}.
export class ConversationStore {
  constructor() {
    this.list = [];
    this.migrate();
    this.reload();
  }

  // Whether a localStorage key holds one of the conversations.
  static owns(key) {
    return key === null || key.startsWith(CONVERSATION_PREFIX) || key === LEGACY_CONVERSATIONS_KEY;
  }

  migrate() {
    const raw = readJson(LEGACY_CONVERSATIONS_KEY, null);
    if (raw === null) return;
    for (const c of Array.isArray(raw) ? raw : []) {
      const clean = cleanConversation(c);
      if (clean && localStorage.getItem(CONVERSATION_PREFIX + clean.id) === null) this.write(clean);
    }
    localStorage.removeItem(LEGACY_CONVERSATIONS_KEY);
  }

  // Reads every conversation again (another tab may have written some).
  // `keep` stays this very object unless storage holds a newer version of it;
  // with `always` it stays even then, and even when another tab deleted it
  // (the conversation a reply is streaming into).
  reload(keep = null, always = false) {
    const list = [];
    let kept = false;
    for (let i = 0; i < localStorage.length; ++i) {
      const key = localStorage.key(i);
      if (key === null || !key.startsWith(CONVERSATION_PREFIX)) continue;
      const c = cleanConversation(readJson(key, null));
      if (c === null || key !== CONVERSATION_PREFIX + c.id) continue;
      if (keep && keep.id === c.id && (always || keep.updated >= c.updated)) {
        list.push(keep);
        kept = true;
      } else {
        list.push(c);
      }
    }
    if (keep && always && !kept) list.push(keep);
    this.list = list;
    this.sort();
  }

  sort() {
    this.list.sort((a, b) => b.updated - a.updated);
  }

  get(id) {
    return this.list.find((c) => c.id === id) ?? null;
  }

  create() {
    const id = `c${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
    const c = { id, title: 'New chat', updated: Date.now(), messages: [] };
    this.list.unshift(c);
    this.write(c);
    return c;
  }

  remove(id) {
    this.list = this.list.filter((c) => c.id !== id);
    localStorage.removeItem(CONVERSATION_PREFIX + id);
  }

  // Marks `c` changed (title from its first message) and writes it.
  touch(c) {
    c.updated = Date.now();
    const first = c.messages.find((m) => m.role === 'user');
    if (first) c.title = first.content.replace(/\s+/g, ' ').trim().slice(0, 60) || 'Untitled';
    this.sort();
    this.write(c);
  }

  // Writes `c` alone; over the quota, the oldest other conversations go first.
  write(c) {
    for (;;) {
      try {
        localStorage.setItem(CONVERSATION_PREFIX + c.id, JSON.stringify(c));
        return;
      } catch (e) {
        const oldest = this.list.filter((o) => o.id !== c.id).at(-1);
        if (!oldest) throw e;
        this.remove(oldest.id);
      }
    }
  }

  get currentId() {
    return localStorage.getItem(CURRENT_KEY);
  }

  set currentId(id) {
    if (id) localStorage.setItem(CURRENT_KEY, id);
    else localStorage.removeItem(CURRENT_KEY);
  }
}
