// The web page's Markdown adapter (gateway/web/markdown.mjs) under node:test,
// on the same Debian files the gateway embeds (paths from CMake's cache in
// K3_WEB_LIB_*, else Debian's): what marked makes of model text (tables,
// highlighted code, math placeholders, links) and that it never becomes
// markup of its own (scripts, event handlers, javascript: links, attribute
// breakouts), before DOMPurify, which needs a DOM and is tested in Chromium
// (browser_test.mjs).
//   node --test tests/web/markdown_test.mjs
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';

import {
  ALLOWED_ATTR, ALLOWED_TAGS, escapeHtml, MarkdownRenderer, mathExtensions, safeUrl,
} from '../../gateway/web/markdown.mjs';
import { INJECTIONS } from './injections.mjs';

const require = createRequire(import.meta.url);
const marked = require(process.env.K3_WEB_LIB_MARKED ?? '/usr/share/javascript/marked/marked.min.js');
const hljs = require(process.env.K3_WEB_LIB_HIGHLIGHT ?? '/usr/share/javascript/highlight.js/highlight.min.js');
const md = new MarkdownRenderer({ marked, hljs });
const html = (s) => md.toHtml(s).trim();

// The renderer's whole output vocabulary: these tags, these attributes.
const VOID = new Set(['br', 'hr']);
const ATTRS = {
  a: { href: /^https?:\/\/[^\s"<>]+$/ },
  code: { class: /^(hljs )?language-[A-Za-z0-9_+#.-]+$/ },
  ol: { start: /^\d+$/ },
  // highlight.js: hljs-TOKEN, or a sub-language's name ("xml" in html code).
  span: { class: /^(math-inline|math-display|hljs-[a-z_]+(?: [a-z_]+_*)*|[a-z0-9]+)$/ },
  div: { class: /^math-display$/ },
  th: { align: /^(left|center|right)$/ },
  td: { align: /^(left|center|right)$/ },
};

// Throws unless `out` is only allowed tags with allowed attributes, properly
// nested, and text with no raw '<' or '>' (so nothing can open a tag; a
// broken-out attribute would fail the tag pattern and leave a '<' in the
// text). Returns the text content, entities decoded.
function checkSafe(out) {
  const stack = [];
  let text = '';
  let last = 0;
  const tagRe = /<(\/?)([a-z0-9]+)((?:\s+[a-z]+="[^"]*")*)\s*>/g;
  for (let m; (m = tagRe.exec(out)) !== null;) {
    text += out.slice(last, m.index);
    last = tagRe.lastIndex;
    const [, closing, name, attrs] = m;
    assert.ok(ALLOWED_TAGS.includes(name), `tag <${name}> in ${JSON.stringify(out)}`);
    if (closing) {
      assert.equal(attrs, '', `attributes on </${name}>`);
      assert.equal(stack.pop(), name, `</${name}> closes the wrong element in ${JSON.stringify(out)}`);
      continue;
    }
    for (const a of attrs.match(/[a-z]+="[^"]*"/g) ?? []) {
      const [, key, value] = /^([a-z]+)="([^"]*)"$/.exec(a);
      const allowed = ATTRS[name]?.[key];
      assert.ok(allowed && ALLOWED_ATTR.includes(key), `attribute ${key} on <${name}> in ${JSON.stringify(out)}`);
      assert.match(value.replace(/&amp;/g, '&'), allowed, `${key}="${value}"`);
    }
    if (name === 'a') assert.ok(/href="/.test(attrs), 'a link without href');
    if (!VOID.has(name)) stack.push(name);
  }
  text += out.slice(last);
  assert.deepEqual(stack, [], `unclosed ${stack.join(', ')} in ${JSON.stringify(out)}`);
  assert.doesNotMatch(text, /[<>]/, `raw markup characters in text of ${JSON.stringify(out)}`);
  return text.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'").replace(/&amp;/g, '&');
}

test('escapeHtml escapes the five markup characters', () => {
  assert.equal(escapeHtml(`<a href="x" title='y'>&</a>`),
    '&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;');
});

test('paragraphs, line breaks, headings (no ids), emphasis', () => {
  assert.equal(html('one\ntwo\n\nthree'), '<p>one<br>two</p>\n<p>three</p>');
  assert.equal(html('# Title\n### Sub ###'), '<h1>Title</h1>\n<h3>Sub</h3>');
  assert.equal(html('*a* _b_ **c** ~~e~~'), '<p><em>a</em> <em>b</em> <strong>c</strong> <del>e</del></p>');
  assert.equal(html('snake_case_name'), '<p>snake_case_name</p>');
  assert.equal(html(''), '');
});

test('GFM tables, with alignment', () => {
  const out = html('| Name | Score |\n|:-----|------:|\n| *ada* | 3 |\n| bob | `x|y` |');
  assert.match(out, /^<table>\n<thead>\n<tr>\n<th align="left">Name<\/th>\n<th align="right">Score<\/th>/);
  assert.match(out, /<td align="left"><em>ada<\/em><\/td>\n<td align="right">3<\/td>/);
  checkSafe(out);
  // A table's cells hold inline Markdown only: HTML in them is text.
  const hostile = html('| a | b |\n|---|---|\n| <script>alert(1)</script> | <img src=x onerror=alert(1)> |');
  const text = checkSafe(hostile);
  assert.ok(text.includes('<script>alert(1)</script>') && text.includes('<img src=x onerror=alert(1)>'), text);
});

test('code blocks: highlighted when the language is known, escaped always', () => {
  const out = html('```python\nif a < b:\n    print("*x*")\n```\nafter');
  assert.match(out, /^<pre><code class="hljs language-python"><span class="hljs-keyword">if<\/span> a &lt; b:/);
  assert.match(out, /<span class="hljs-string">"\*x\*"<\/span>/);
  assert.match(out, /<p>after<\/p>$/);
  assert.equal(html('```\n**not bold** <b>x</b>\n```'), '<pre><code>**not bold** &lt;b&gt;x&lt;/b&gt;</code></pre>');
  assert.equal(html('```nosuchlang\na < b\n```'), '<pre><code>a &lt; b</code></pre>');
  // A fence still open (a reply streaming) runs to the end.
  assert.match(html('text\n```js\nlet x = 1;'), /<pre><code class="hljs language-js"><span class="hljs-keyword">let<\/span> x = <span class="hljs-number">1<\/span>;<\/code><\/pre>$/);
  assert.equal(html('use `a < b` and ``x ` y``'), '<p>use <code>a &lt; b</code> and <code>x ` y</code></p>');
  checkSafe(html('```html\n<script>alert(1)</script><img src=x onerror=alert(1)>\n```'));
  checkSafe(html('```"><script>alert(1)</script>\ncode\n```'));
});

test('math: $...$, \\(...\\) inline; $$...$$, \\[...\\] set apart; dollars as money stay text', () => {
  assert.equal(html('Euler: $e^{i\\pi} + 1 = 0$.'), '<p>Euler: <span class="math-inline">e^{i\\pi} + 1 = 0</span>.</p>');
  assert.equal(html('So \\(a_1 + b_2\\) holds'), '<p>So <span class="math-inline">a_1 + b_2</span> holds</p>');
  assert.equal(html('$$\n\\int_0^1 x\\,dx = \\frac{1}{2}\n$$'),
    '<div class="math-display">\\int_0^1 x\\,dx = \\frac{1}{2}</div>');
  assert.equal(html('\\[\nx^2\n\\]\nafter'), '<div class="math-display">x^2</div>\n<p>after</p>');
  assert.equal(html('inline $$a+b$$ too'), '<p>inline <span class="math-display">a+b</span> too</p>');
  assert.equal(html('It costs $5 and $10.'), '<p>It costs $5 and $10.</p>');
  assert.equal(html('\\$x\\$ is not math'), '<p>$x$ is not math</p>');
  assert.equal(html('`$x$` stays code'), '<p><code>$x$</code> stays code</p>');
  assert.equal(html('```\n$x$\n```'), '<pre><code>$x$</code></pre>');
  assert.equal(html('$ x $ has spaces'), '<p>$ x $ has spaces</p>');
  // Emphasis marks inside math are TeX, not Markdown.
  assert.equal(html('$a*b*c_d_e$'), '<p><span class="math-inline">a*b*c_d_e</span></p>');
  // HTML in math is TeX text in the placeholder (KaTeX typesets it as symbols).
  const text = checkSafe(html('$<img src=x onerror=alert(1)>$ and $$</div><script>alert(1)</script>$$'));
  assert.ok(text.includes('<img src=x onerror=alert(1)>') && text.includes('</div><script>alert(1)</script>'), text);
  // Still streaming: an open formula is text until it closes.
  assert.equal(html('$$\n\\sum_i'), '<p>$$<br>\\sum_i</p>');
  assert.equal(mathExtensions.length, 2);
});

test('lists, task lists (characters, not inputs), quotes', () => {
  assert.equal(html('- a\n- b\n\n1. x\n2. y'), '<ul>\n<li>a</li>\n<li>b</li>\n</ul>\n<ol>\n<li>x</li>\n<li>y</li>\n</ol>');
  assert.equal(html('3) three\n4) four'), '<ol start="3">\n<li>three</li>\n<li>four</li>\n</ol>');
  const tasks = html('- [x] done\n- [ ] todo');
  assert.doesNotMatch(tasks, /<input/);
  assert.ok(checkSafe(tasks).includes('\u2611 done') && tasks.includes('\u2610 todo'), tasks);
  checkSafe(html('> quoted **text**\n\n---'));
});

test('links and images: http and https only; images become links', () => {
  assert.equal(html('[the docs](https://example.com/a?b=1&c=2)'),
    '<p><a href="https://example.com/a?b=1&amp;c=2">the docs</a></p>');
  assert.equal(html('see https://example.com/x.'), '<p>see <a href="https://example.com/x">https://example.com/x</a>.</p>');
  assert.equal(html('![a cat](https://example.com/cat.png)'), '<p><a href="https://example.com/cat.png">a cat</a></p>');
  assert.equal(html('![x](javascript:alert(1))'), '<p>x</p>');
  assert.equal(html('[click](javascript:alert(1))'), '<p>[click](javascript:alert(1))</p>');
  assert.equal(html('<https://example.com/>'), '<p><a href="https://example.com/">https://example.com/</a></p>');
  assert.equal(html('<javascript:alert(1)>'), '<p>&lt;javascript:alert(1)&gt;</p>');
  assert.equal(html('mail me@example.com'), '<p>mail me@example.com</p>');
  assert.equal(safeUrl('https://a.b/c'), 'https://a.b/c');
  for (const bad of ['javascript:alert(1)', 'JaVaScRiPt:alert(1)', ' javascript:alert(1)',
    'java\tscript:alert(1)', 'data:text/html,<script>alert(1)</script>', 'vbscript:x',
    '//evil.example/x', '/relative', 'https://', 'http:/x', 'https://a b', 'file:///etc/passwd',
    'https://a.b/\u0000x', 'mailto:a@b.c']) {
    assert.equal(safeUrl(bad), null, bad);
  }
});


test('model text never becomes markup: injection cases', () => {
  for (const input of INJECTIONS) {
    const out = md.toHtml(input);
    const text = checkSafe(out);
    assert.doesNotMatch(out, /<(script|img|svg|iframe|style|b|input)\b/i, input);
    assert.doesNotMatch(out, /href="(?!https?:)/i, input);
    assert.doesNotMatch(out, /<[^>]*\son[a-z]+=/i, input);
    // Tags the model wrote are still visible, as text.
    if (input.startsWith('<script>')) assert.ok(text.includes('<script>alert(1)</script>'), text);
    if (input.startsWith('<img src=x')) assert.ok(text.includes('<img src=x onerror=alert(1)>'), text);
  }
  assert.equal(html('<script>alert(1)</script>'), '<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>');
  // Markup naming the renderer's own classes is text too.
  assert.equal(html('<div class="math-display">x</div>'), '<p>&lt;div class=&quot;math-display&quot;&gt;x&lt;/div&gt;</p>');
});

test('long replies render in bounded time, unclosed math openers included', () => {
  // Each once took marked over a minute: its walkTokens gathers results in
  // quadratic time, and every unclosed opener was scanned to the end.
  for (const unit of ['\\( x ', '\\[ ', '$a ', '$$ b ', '[a](javascript:x) ', '`x` **y** ']) {
    const source = unit.repeat(Math.ceil(100000 / unit.length));
    const t0 = performance.now();
    md.toHtml(source);
    const ms = performance.now() - t0;
    // Generous for a loaded machine; the quadratic cases took 50-170 s.
    assert.ok(ms < 20000, `${JSON.stringify(unit)} x ${source.length / unit.length}: ${Math.round(ms)} ms`);
  }
});

test('random mixes of markdown, math and markup stay safe', () => {
  const pieces = ['<', '>', '"', "'", '&', '*', '**', '_', '`', '```', '~~~', '[', ']', '(', ')',
    '](', 'https://e.example/', 'javascript:', '<script>', '</code>', '<img src=x onerror=y>',
    '\n', '\n\n', '- ', '1. ', '# ', '  ', 'text', '\u0000', '0', 'onerror=', '=', '~~', '\\',
    '\t', '$', '$$', '\\(', '\\)', '\\[', '\\]', '|', '|---|', ' | ', '![', 'x^2', '- [ ] '];
  let seed = 12345;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648);
  for (let n = 0; n < 3000; n++) {
    let s = '';
    const len = 1 + (next() % 40);
    for (let k = 0; k < len; k++) s += pieces[next() % pieces.length];
    checkSafe(md.toHtml(s));
  }
});

test('the renderer needs marked; render() needs DOMPurify', () => {
  assert.throws(() => new MarkdownRenderer({}), /marked is not loaded/);
  assert.throws(() => md.render('x'), /DOMPurify is not loaded/);
});
