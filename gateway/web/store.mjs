// What the page keeps in the browser's localStorage: the settings (API key
// included: it never leaves this browser but in the Authorization header)
// and the conversations. Values read back are checked: storage edited by
// hand or by an older page falls back to defaults instead of breaking it.

const SETTINGS_KEY = 'k3serve.settings';
const CONVERSATIONS_KEY = 'k3serve.conversations';
const CURRENT_KEY = 'k3serve.current';

// The front door's thinking_effort values; 'medium' is the model's default,
// sent as no effort at all (K3 refuses the word itself).
export const EFFORTS = ['low', 'medium', 'high', 'max'];

export const DEFAULT_SETTINGS = Object.freeze({
  apiKey: '',
  temperature: 0.6,
  maxTokens: 1024,
  thinking: true,
  effort: 'medium',
  systemPrompt: '',
});

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
  if (Number.isInteger(raw.maxTokens) && raw.maxTokens >= 1) s.maxTokens = raw.maxTokens;
  if (typeof raw.thinking === 'boolean') s.thinking = raw.thinking;
  if (EFFORTS.includes(raw.effort)) s.effort = raw.effort;
  if (typeof raw.systemPrompt === 'string') s.systemPrompt = raw.systemPrompt;
  return s;
}

export function saveSettings(settings) {
  localStorage.setItem(SETTINGS_KEY, JSON.stringify(settings));
}

// A message as kept: {role: 'user'|'assistant', content, and for a reply
// reasoning, toolCalls [{id, name, arguments}], stats, stopped, error}.
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
  }
  return out;
}

// The conversations, newest first: {id, title, updated (ms), messages}.
export class ConversationStore {
  constructor() {
    const raw = readJson(CONVERSATIONS_KEY, []);
    this.list = (Array.isArray(raw) ? raw : [])
      .filter((c) => c && typeof c.id === 'string' && Array.isArray(c.messages))
      .map((c) => ({
        id: c.id,
        title: typeof c.title === 'string' ? c.title : 'Untitled',
        updated: Number.isFinite(c.updated) ? c.updated : 0,
        messages: c.messages.map(cleanMessage).filter((m) => m !== null),
      }));
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
    this.save();
    return c;
  }

  remove(id) {
    this.list = this.list.filter((c) => c.id !== id);
    this.save();
  }

  // Marks `c` changed (title from its first message) and writes everything.
  touch(c) {
    c.updated = Date.now();
    const first = c.messages.find((m) => m.role === 'user');
    if (first) c.title = first.content.replace(/\s+/g, ' ').trim().slice(0, 60) || 'Untitled';
    this.sort();
    this.save();
  }

  save() {
    try {
      localStorage.setItem(CONVERSATIONS_KEY, JSON.stringify(this.list));
    } catch (e) {
      // Quota: drop the oldest conversations rather than lose the current one.
      if (this.list.length <= 1) throw e;
      this.list.pop();
      this.save();
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
