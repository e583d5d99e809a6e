// The chat page's controller: conversations (store.mjs), the stream of each
// reply (chat_api.mjs) and its DOM (view.mjs). One reply streams at a time;
// Stop aborts its fetch, which the gateway sees as a disconnect and cancels.
import { applyChunk, ApiError, chatRequestBody, fetchModel, streamChat } from './chat_api.mjs';
import { conversationJson, conversationMarkdown, exportFileName } from './export.mjs';
import { ConversationStore, DEFAULT_SETTINGS, EFFORTS, loadSettings, saveSettings } from './store.mjs';
import {
  createMessage, editInPlace, renderConversationList, updateMessage, watchReasoningToggles,
} from './view.mjs';

const $ = (id) => document.getElementById(id);

const store = new ConversationStore();
let settings = loadSettings();
let model = '';
let current = null;  // the conversation shown
let busy = null;  // {conversation, reply, controller} while a reply streams
const articles = new Map();  // message object -> its <article>

function notice(text, kind = 'error') {
  const n = $('notice');
  n.textContent = text;
  n.className = kind;
  n.hidden = text === '';
}

function apiErrorText(e) {
  if (e instanceof ApiError && e.status === 401) {
    return `${e.message} — set the API key in Settings.`;
  }
  return e.message;
}

// ---- rendering ----

function lastIndex(role) {
  for (let i = current.messages.length - 1; i >= 0; i--) {
    if (current.messages[i].role === role) return i;
  }
  return -1;
}

function actionsFor(i) {
  if (busy) return {};
  const msg = current.messages[i];
  const last = i === current.messages.length - 1;
  if (msg.role === 'assistant' && last) return { regenerate };
  if (msg.role === 'user' && i === lastIndex('user')) return { edit: () => editLast(i) };
  return {};
}

function renderMessages() {
  const box = $('messages');
  const seen = new Set();
  const nodes = current.messages.map((m, i) => {
    let a = articles.get(m);
    if (!a) {
      a = createMessage(m);
      articles.set(m, a);
    }
    seen.add(m);
    updateMessage(a, m, { streaming: busy?.reply === m, actions: actionsFor(i) });
    return a;
  });
  for (const m of articles.keys()) if (!seen.has(m)) articles.delete(m);
  box.replaceChildren(...nodes);
  $('empty').hidden = nodes.length > 0;
}

function renderSidebar() {
  renderConversationList($('conversations'), store.list, current?.id, {
    open: (id) => {
      if (busy) return;
      select(store.get(id));
      document.body.classList.remove('sidebar-open');
    },
    remove: (id) => {
      if (busy) return;
      store.remove(id);
      if (current?.id === id) select(store.list[0] ?? store.create());
      else renderSidebar();
    },
  });
}

function renderControls() {
  $('send').hidden = busy !== null;
  $('stop').hidden = busy === null;
  $('new-chat').disabled = busy !== null;
  for (const id of ['export-json', 'export-markdown']) {
    $(id).disabled = busy !== null || current.messages.length === 0;
  }
  $('title').textContent = current.title;
  document.title = `${current.title} · k3serve`;
}

function renderAll() {
  renderSidebar();
  renderMessages();
  renderControls();
}

function select(conversation) {
  current = conversation;
  store.currentId = conversation.id;
  articles.clear();
  renderAll();
}

// Streaming updates: at most one DOM update per frame.
let frameQueued = false;
function scheduleReplyUpdate() {
  if (frameQueued) return;
  frameQueued = true;
  requestAnimationFrame(() => {
    frameQueued = false;
    if (!busy || busy.conversation !== current) return;
    const a = articles.get(busy.reply);
    if (a) updateMessage(a, busy.reply, { streaming: true });
    const box = $('messages');
    if (box.scrollHeight - box.scrollTop - box.clientHeight < 120) box.scrollTop = box.scrollHeight;
  });
}

// ---- the reply ----

// Streams the answer to the conversation as it stands (ending with a user
// message) into a new assistant message.
async function run() {
  const conversation = current;
  const body = chatRequestBody(settings, conversation.messages, model);
  const reply = { role: 'assistant', content: '', reasoning: '', toolCalls: [] };
  conversation.messages.push(reply);
  const controller = new AbortController();
  busy = { conversation, reply, controller };
  store.touch(conversation);
  renderAll();
  notice('');
  const t0 = performance.now();
  let tFirst = null;
  let tLast = null;
  let chunks = 0;
  const work = { usage: null, finishReason: null, ...reply };
  try {
    await streamChat({
      body,
      apiKey: settings.apiKey,
      signal: controller.signal,
      onProgress: (progress) => {
        if (tFirst !== null) return;
        reply.progress = progress;
        scheduleReplyUpdate();
      },
      onChunk: (chunk) => {
        if (applyChunk(work, chunk)) {
          const now = performance.now();
          if (tFirst === null) tFirst = now;
          tLast = now;
          chunks++;
        }
        reply.content = work.content;
        reply.reasoning = work.reasoning;
        reply.toolCalls = work.toolCalls;
        scheduleReplyUpdate();
      },
    });
  } catch (e) {
    if (e.name === 'AbortError') {
      reply.stopped = true;
    } else {
      reply.error = apiErrorText(e);
      if (e instanceof ApiError && e.status === 401) notice(reply.error);
    }
  }
  delete reply.progress;
  if (work.finishReason && !reply.stopped && !reply.error) reply.finishReason = work.finishReason;
  const usage = work.usage;
  const tokens = usage?.completion_tokens ?? chunks;
  reply.stats = {
    ttftMs: tFirst === null ? undefined : tFirst - t0,
    tokensPerSecond: tokens > 1 && tLast > tFirst ? ((tokens - 1) * 1000) / (tLast - tFirst) : undefined,
    completionTokens: tFirst === null && !usage ? undefined : tokens,
    estimated: !usage,
    promptTokens: usage?.prompt_tokens,
    cachedTokens: usage?.prompt_tokens_details?.cached_tokens ?? 0,
    restoredTokens: usage?.k3_restored_tokens ?? 0,
  };
  busy = null;
  store.touch(conversation);
  if (conversation === current) renderAll();
  $('input').focus();
}

function send() {
  const input = $('input');
  const text = input.value;
  if (busy || text.trim() === '') return;
  input.value = '';
  autosize();
  current.messages.push({ role: 'user', content: text });
  run();
}

function regenerate() {
  if (busy || current.messages.at(-1)?.role !== 'assistant') return;
  current.messages.pop();
  run();
}

async function editLast(i) {
  if (busy) return;
  const msg = current.messages[i];
  const text = await editInPlace(articles.get(msg), msg.content);
  if (text === null || busy) return;
  msg.content = text;
  current.messages.splice(i + 1);
  run();
}

// ---- settings ----

// The form shows `s`; nothing changes until Save.
function fillSettings(s) {
  $('set-api-key').value = s.apiKey;
  $('set-temperature').value = String(s.temperature);
  $('set-max-tokens').value = String(s.maxTokens);
  $('set-thinking').checked = s.thinking;
  $('set-effort').value = s.effort;
  $('set-effort').disabled = !s.thinking;
  $('set-system').value = s.systemPrompt;
  $('settings-error').textContent = '';
}

function openSettings() {
  fillSettings(settings);
  $('settings').showModal();
}

function saveSettingsForm() {
  const temperature = Number($('set-temperature').value);
  const maxTokens = Number($('set-max-tokens').value);
  const effort = $('set-effort').value;
  let error = '';
  if (!(temperature >= 0 && temperature <= 2)) error = 'Temperature must be between 0 and 2.';
  else if (!Number.isInteger(maxTokens) || maxTokens < 1) error = 'Max tokens must be a whole number of at least 1.';
  else if (!EFFORTS.includes(effort)) error = 'Unknown effort.';
  if (error) {
    $('settings-error').textContent = error;
    return;
  }
  const keyChanged = settings.apiKey !== $('set-api-key').value.trim();
  settings = {
    apiKey: $('set-api-key').value.trim(),
    temperature,
    maxTokens,
    thinking: $('set-thinking').checked,
    effort,
    systemPrompt: $('set-system').value,
  };
  saveSettings(settings);
  $('settings').close();
  if (keyChanged) loadModel();
}

async function loadModel() {
  try {
    model = await fetchModel(settings.apiKey);
    $('model').textContent = model;
    notice('');
  } catch (e) {
    model = '';
    $('model').textContent = '';
    notice(apiErrorText(e));
  }
}

// ---- export ----

// Saves `text` as a download named `name` (a blob: URL, nothing leaves the browser).
function download(name, type, text) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

function exportConversation(kind) {
  if (busy || current.messages.length === 0) return;
  $('export').open = false;
  if (kind === 'json') {
    download(exportFileName(current, 'json'), 'application/json',
      conversationJson(current, { model, settings }));
  } else {
    download(exportFileName(current, 'md'), 'text/markdown', conversationMarkdown(current, { model }));
  }
}

// ---- wiring ----

function autosize() {
  const input = $('input');
  input.style.height = 'auto';
  input.style.height = `${Math.min(input.scrollHeight, 240)}px`;
}

function wire() {
  $('composer').addEventListener('submit', (e) => {
    e.preventDefault();
    send();
  });
  $('input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  });
  $('input').addEventListener('input', autosize);
  $('stop').addEventListener('click', () => busy?.controller.abort());
  $('new-chat').addEventListener('click', () => {
    if (busy) return;
    select(current.messages.length === 0 ? current : store.create());
    document.body.classList.remove('sidebar-open');
    $('input').focus();
  });
  $('toggle-sidebar').addEventListener('click', () => document.body.classList.toggle('sidebar-open'));
  $('scrim').addEventListener('click', () => document.body.classList.remove('sidebar-open'));
  $('open-settings').addEventListener('click', openSettings);
  $('export-json').addEventListener('click', () => exportConversation('json'));
  $('export-markdown').addEventListener('click', () => exportConversation('markdown'));
  // The menu closes on a click anywhere else.
  document.addEventListener('click', (e) => {
    if (!$('export').contains(e.target)) $('export').open = false;
  });
  $('settings-save').addEventListener('click', saveSettingsForm);
  $('settings-cancel').addEventListener('click', () => $('settings').close());
  $('settings-reset').addEventListener('click', () => {
    fillSettings({ ...DEFAULT_SETTINGS, apiKey: $('set-api-key').value });
  });
  $('set-thinking').addEventListener('change', () => {
    $('set-effort').disabled = !$('set-thinking').checked;
  });
  watchReasoningToggles($('messages'));
}

// Another tab wrote or deleted conversations: show them, keeping the one a
// reply streams into (and the one shown, unless the other tab changed it).
function onStorage(e) {
  if (e.storageArea !== localStorage || !ConversationStore.owns(e.key)) return;
  const streaming = busy?.conversation ?? null;
  store.reload(streaming ?? current, streaming !== null);
  const fresh = store.get(current.id);
  if (fresh === current) {
    renderSidebar();
  } else if (fresh) {
    current = fresh;
    articles.clear();
    renderAll();
  } else {
    select(store.list.find((c) => c.messages.length === 0) ?? store.create());
  }
}

function start() {
  wire();
  window.addEventListener('storage', onStorage);
  const remembered = store.get(store.currentId ?? '');
  select(remembered ?? store.list.find((c) => c.messages.length === 0) ?? store.create());
  loadModel();
  $('input').focus();
}

start();
