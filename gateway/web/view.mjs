// The conversation's DOM: one <article> per message. Model text reaches the
// page two ways only: the answer through MarkdownRenderer (markdown.mjs:
// marked with HTML turned off, then DOMPurify; math and Copy buttons added
// through the DOM), reasoning and tool calls as textContent.
import { finishNotice } from './chat_api.mjs';
import { copyText, pageRenderer as renderer } from './markdown.mjs';
import { progressText } from './progress.mjs';

function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

function button(className, label, title) {
  const b = el('button', className, label);
  b.type = 'button';
  if (title) b.title = title;
  return b;
}

// "TTFT 120 ms · 35.2 tok/s · 64 tokens · prompt 30 (cached 20, 16 of them restored)":
// cached counts every prompt token not computed again, restored is its part
// taken from a saved state.
function statsText(s) {
  const parts = [];
  if (Number.isFinite(s.ttftMs)) parts.push(`TTFT ${Math.round(s.ttftMs)} ms`);
  if (Number.isFinite(s.tokensPerSecond)) parts.push(`${s.tokensPerSecond.toFixed(1)} tok/s`);
  if (Number.isFinite(s.completionTokens)) {
    parts.push(`${s.estimated ? '~' : ''}${s.completionTokens} tokens`);
  }
  if (Number.isFinite(s.promptTokens)) {
    parts.push(`prompt ${s.promptTokens} (cached ${s.cachedTokens}, ${s.restoredTokens} of them restored)`);
  }
  return parts.join(' · ');
}

function setStats(node, stats) {
  node.textContent = stats ? statsText(stats) : '';
  const keys = ['ttftMs', 'tokensPerSecond', 'completionTokens', 'promptTokens', 'cachedTokens',
    'restoredTokens'];
  // As data-ttft-ms, data-cached-tokens, ...: for scripts and tests.
  for (const k of keys) {
    if (stats && Number.isFinite(stats[k])) node.dataset[k] = String(stats[k]);
    else delete node.dataset[k];
  }
}

// A new, empty <article> for message `msg` (filled by updateMessage).
export function createMessage(msg) {
  const article = el('article', `msg ${msg.role}`);
  article.append(el('div', 'role', msg.role === 'user' ? 'You' : 'K3'));
  if (msg.role === 'assistant') {
    const details = el('details', 'reasoning');
    details.append(el('summary', '', 'Thinking'), el('div', 'reasoning-text'));
    const finish = el('div', 'finish');
    finish.setAttribute('role', 'note');
    article.append(el('div', 'progress'), details, el('div', 'tool-calls'),
      el('div', 'content markdown'), finish, el('div', 'meta'));
    const meta = article.querySelector('.meta');
    meta.append(el('span', 'stats'), el('span', 'status'));
  } else {
    article.append(el('div', 'content plain'));
  }
  article.append(el('div', 'actions'));
  return article;
}

// Fills `article` from `msg`. `streaming`: the reply is still arriving;
// `actions`: {regenerate, edit} callbacks for the last reply / user message.
export function updateMessage(article, msg, { streaming = false, actions = {} } = {}) {
  article.classList.toggle('streaming', streaming);
  if (msg.role === 'user') {
    article.querySelector('.content').textContent = msg.content;
  } else {
    // Before the first text: where the request stands (queued, reading the
    // prompt), from msg.progress; gone once anything is written.
    const progress = article.querySelector('.progress');
    const waiting = streaming && msg.content === '' && msg.reasoning === '' && msg.toolCalls.length === 0;
    progress.textContent = waiting ? progressText(msg.progress) : '';
    progress.hidden = progress.textContent === '';

    const details = article.querySelector('.reasoning');
    details.hidden = msg.reasoning === '';
    details.querySelector('.reasoning-text').textContent = msg.reasoning;
    if (streaming && !details.dataset.touched) details.open = msg.content === '';
    details.querySelector('summary').textContent = streaming && msg.content === '' ? 'Thinking…' : 'Thinking';

    const calls = article.querySelector('.tool-calls');
    calls.replaceChildren(...msg.toolCalls.map((c) => {
      const box = el('div', 'tool-call');
      box.append(el('div', 'tool-name', `Tool call: ${c.name || '(unnamed)'}`));
      let args = c.arguments;
      try {
        args = JSON.stringify(JSON.parse(c.arguments), null, 2);
      } catch {
        // Still streaming, or not JSON: shown as sent.
      }
      box.append(el('pre', 'tool-args', args));
      return box;
    }));

    const content = article.querySelector('.content');
    if (content.dataset.source !== msg.content) {
      content.innerHTML = renderer().render(msg.content);
      renderer().enhance(content, copyText);
      content.dataset.source = msg.content;
    }
    // Why a reply ended, unless it ended as it should: "Max tokens reached
    // while thinking", ... (nothing while streaming, stopped or failed).
    const finish = article.querySelector('.finish');
    finish.textContent = streaming || msg.stopped || msg.error ? '' : finishNotice(msg);
    finish.hidden = finish.textContent === '';
    if (msg.finishReason) finish.dataset.reason = msg.finishReason;
    else delete finish.dataset.reason;
    setStats(article.querySelector('.stats'), msg.stats);
    const status = article.querySelector('.status');
    status.textContent = msg.error ? `Error: ${msg.error}` : msg.stopped ? 'Stopped' : '';
    status.className = `status${msg.error ? ' error' : ''}${msg.stopped ? ' stopped' : ''}`;
  }

  const bar = article.querySelector('.actions');
  const wanted = [];
  if (actions.regenerate) wanted.push(['regenerate', 'Regenerate', 'Answer the last message again', actions.regenerate]);
  if (actions.edit) wanted.push(['edit', 'Edit', 'Edit this message and send it again', actions.edit]);
  if (msg.role === 'assistant' && !streaming && msg.content !== '') {
    wanted.push(['copy', 'Copy', 'Copy the answer (Markdown)', () => copyText(msg.content)]);
  }
  bar.replaceChildren(...wanted.map(([cls, label, title, fn]) => {
    const b = button(cls, label, title);
    b.addEventListener('click', fn);
    return b;
  }));
}

// Keeps a user's own toggling of a reasoning block from being undone.
export function watchReasoningToggles(container) {
  container.addEventListener('click', (e) => {
    const summary = e.target.closest('summary');
    if (summary) summary.parentElement.dataset.touched = '1';
  });
}

// The edit box that replaces a user message's text: resolves the new text,
// or null when cancelled.
export function editInPlace(article, text) {
  return new Promise((resolve) => {
    const content = article.querySelector('.content');
    const box = el('div', 'edit-box');
    const area = el('textarea', 'edit-text');
    area.value = text;
    area.rows = Math.min(12, Math.max(2, text.split('\n').length));
    const save = button('save-edit', 'Send');
    const cancel = button('cancel-edit', 'Cancel');
    const row = el('div', 'edit-actions');
    row.append(save, cancel);
    box.append(area, row);
    content.hidden = true;
    article.querySelector('.actions').hidden = true;
    content.after(box);
    area.focus();
    const done = (value) => {
      box.remove();
      content.hidden = false;
      article.querySelector('.actions').hidden = false;
      resolve(value);
    };
    save.addEventListener('click', () => done(area.value.trim() === '' ? null : area.value));
    cancel.addEventListener('click', () => done(null));
    area.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey) {
        e.preventDefault();
        save.click();
      } else if (e.key === 'Escape') {
        cancel.click();
      }
    });
  });
}

// The sidebar's list of conversations.
export function renderConversationList(list, conversations, currentId, { open, remove }) {
  list.replaceChildren(...conversations.map((c) => {
    const li = el('li', c.id === currentId ? 'conversation current' : 'conversation');
    li.dataset.id = c.id;
    const title = button('open', c.title, 'Open this conversation');
    title.addEventListener('click', () => open(c.id));
    const del = button('delete', '×', 'Delete this conversation');
    del.setAttribute('aria-label', `Delete ${c.title}`);
    del.addEventListener('click', () => remove(c.id));
    li.append(title, del);
    return li;
  }));
}
