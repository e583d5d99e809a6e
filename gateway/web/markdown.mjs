// A small Markdown renderer for model output, of our own: model text is
// untrusted, so everything it does not render is escaped, and what it renders
// is built from a fixed set of tags with no attributes but a checked link
// href, a code block's language class and an ordered list's start number.
//
// Rendered: paragraphs (a single newline is a line break), headings (# .. ######),
// emphasis (*em*, _em_, **strong**, __strong__, ~~del~~), inline code, fenced
// code blocks (``` or ~~~, an unclosed fence runs to the end: a reply still
// streaming), lists (-, *, + and 1. 1), nested by indentation), links
// [text](url) and bare URLs, http and https only. Anything else, HTML
// included, is shown as text.
//
// Pure functions, no DOM: the page puts the result into innerHTML; the node
// tests (tests/web/markdown_test.mjs) check it against injection cases.

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

// Text safe inside an element or a double-quoted attribute.
export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

// The URL to put in an href, or null: http(s) only, absolute, no spaces or
// control characters (which browsers strip, letting "java\tscript:" through).
export function safeUrl(raw) {
  const s = String(raw);
  if (!/^https?:\/\/[^\s]/i.test(s) || /[\u0000-\u0020\u007f-\u009f]/.test(s)) return null;
  let url;
  try {
    url = new URL(s);
  } catch {
    return null;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
  return url.href;
}

const FENCE = /^ {0,3}(`{3,}|~{3,})(.*)$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const LIST_ITEM = /^( *)([-*+]|\d{1,9}[.)])[ \t]+(.*)$/;
const BLANK = /^\s*$/;

function isClosingFence(line, marker) {
  const m = /^ {0,3}(`{3,}|~{3,})[ \t]*$/.exec(line);
  return m !== null && m[1][0] === marker[0] && m[1].length >= marker.length;
}

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || LIST_ITEM.test(line);
}

// ---- inline ----

// Placeholders keep finished HTML (code spans, links) away from the escaping
// and emphasis passes; the input's own NULs were replaced before.
class Slots {
  constructor() {
    this.html = [];
  }
  hold(html) {
    this.html.push(html);
    return `\u0000${this.html.length - 1}\u0000`;
  }
  restore(text) {
    // A link's text may hold a code span: restore until none is left.
    for (let i = 0; i < 4 && text.includes('\u0000'); i++) {
      text = text.replace(/\u0000(\d+)\u0000/g, (_, n) => this.html[Number(n)]);
    }
    return text;
  }
}

// Emphasis over already escaped text. The only '<' and '>' left there are
// our own tags, so no span may contain one: tags always nest properly.
function emphasis(escaped) {
  return escaped
    .replace(/\*\*(?=[^\s<>])([^<>]*?[^\s<>])\*\*/g, '<strong>$1</strong>')
    .replace(/(^|[^\p{L}\p{N}_])__(?=[^\s<>])([^<>]*?[^\s<>])__(?![\p{L}\p{N}_])/gu,
      '$1<strong>$2</strong>')
    .replace(/\*(?=[^\s*<>])([^<>*]*?[^\s*<>])\*/g, '<em>$1</em>')
    .replace(/(^|[^\p{L}\p{N}_])_(?=[^\s_<>])([^<>_]*?[^\s_<>])_(?![\p{L}\p{N}_])/gu,
      '$1<em>$2</em>')
    .replace(/~~(?=[^\s<>])([^<>]*?[^\s<>])~~/g, '<del>$1</del>');
}

function linkHtml(href, innerHtml) {
  return `<a href="${escapeHtml(href)}" target="_blank" rel="noopener noreferrer nofollow">` +
    `${innerHtml}</a>`;
}

// One block's text (lines joined by '\n') as inline HTML.
function inline(text) {
  const slots = new Slots();
  let s = text;
  // Code spans: a run of backticks up to the same run.
  s = s.replace(/(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g, (_, ticks, code) => {
    const body = /^ [\s\S]* $/.test(code) && code.trim() !== '' ? code.slice(1, -1) : code;
    return slots.hold(`<code>${escapeHtml(body)}</code>`);
  });
  // [text](url): a link when the url is http(s), else left as text.
  s = s.replace(/\[([^\[\]\n]*)\]\(([^()\s]*)\)/g, (whole, label, url) => {
    const href = safeUrl(url);
    if (href === null || label.trim() === '') return whole;
    return slots.hold(linkHtml(href, emphasis(escapeHtml(label))));
  });
  // Bare URLs; trailing punctuation stays outside.
  s = s.replace(/\bhttps?:\/\/[^\s<>"'`\u0000]+/gi, (url) => {
    const m = /^(.*?)([.,;:!?)\]]*)$/.exec(url);
    const href = safeUrl(m[1]);
    if (href === null) return url;
    return slots.hold(linkHtml(href, escapeHtml(m[1]))) + m[2];
  });
  s = emphasis(escapeHtml(s)).replace(/\n/g, '<br>');
  return slots.restore(s);
}

// ---- blocks ----

function renderList(items) {
  // A stack of open lists by indentation; each item's <li> is left open until
  // the next item at its level (or less), so deeper items nest inside it.
  let html = '';
  const stack = [];
  const open = (it) => {
    if (!it.ordered) return '<ul>';
    return it.start !== 1 ? `<ol start="${it.start}">` : '<ol>';
  };
  const close = (list) => (list.ordered ? '</ol>' : '</ul>');
  for (const it of items) {
    while (stack.length > 0 && it.indent < stack[stack.length - 1].indent) {
      html += '</li>' + close(stack.pop());
    }
    const top = stack[stack.length - 1];
    if (top === undefined || it.indent > top.indent) {
      stack.push({ indent: it.indent, ordered: it.ordered });
      html += open(it);
    } else {
      html += '</li>';
      if (top.ordered !== it.ordered) {
        html += close(stack.pop());
        stack.push({ indent: it.indent, ordered: it.ordered });
        html += open(it);
      }
    }
    html += `<li>${inline(it.text)}`;
  }
  while (stack.length > 0) html += '</li>' + close(stack.pop());
  return html;
}

// Markdown text to HTML (a string of block elements).
export function renderMarkdown(source) {
  const lines = String(source ?? '')
    .replace(/\r\n?/g, '\n')
    .replace(/\u0000/g, '\uFFFD')
    .split('\n');
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = FENCE.exec(line);
    if (fence !== null) {
      const marker = fence[1];
      const info = fence[2].trim().split(/\s+/)[0];
      const body = [];
      for (i++; i < lines.length && !isClosingFence(lines[i], marker); i++) body.push(lines[i]);
      i++;  // the closing fence (or past the end)
      const lang = /^[A-Za-z0-9_+#.-]{1,32}$/.test(info) ? ` class="language-${escapeHtml(info)}"` : '';
      out.push(`<pre><code${lang}>${escapeHtml(body.join('\n'))}</code></pre>`);
      continue;
    }
    if (BLANK.test(line)) {
      i++;
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading !== null) {
      const level = heading[1].length;
      out.push(`<h${level}>${inline(heading[2] ?? '')}</h${level}>`);
      i++;
      continue;
    }
    if (LIST_ITEM.test(line)) {
      const items = [];
      while (i < lines.length) {
        const m = LIST_ITEM.exec(lines[i]);
        if (m !== null) {
          const ordered = /\d/.test(m[2]);
          items.push({ indent: m[1].length, ordered, start: ordered ? parseInt(m[2], 10) : 1, text: m[3] });
        } else if (/^\s+\S/.test(lines[i]) && !FENCE.test(lines[i])) {
          items[items.length - 1].text += '\n' + lines[i].trim();  // a continuation line
        } else {
          break;
        }
        i++;
      }
      out.push(renderList(items));
      continue;
    }
    const para = [line];
    for (i++; i < lines.length && !BLANK.test(lines[i]) && !startsBlock(lines[i]); i++) {
      para.push(lines[i]);
    }
    out.push(`<p>${inline(para.join('\n'))}</p>`);
  }
  return out.join('\n');
}
