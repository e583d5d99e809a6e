// The web chat page in a real browser: Debian's Chromium, headless, driven by
// playwright-core, against the three daemons on the synthetic model (started
// by run_browser_test.sh). Environment:
//   K3_HTTP         HOST:PORT of the gateway
//   K3_HTTP_KEYED   HOST:PORT of a second gateway with --api-keys, K3_API_KEY its key
//   K3_ENGINED      engined's address (its Stats counts cancelled requests)
//   K3_SCREENSHOTS  directory for the screenshots of each state
// Prints PASS/FAIL per step; exits 1 on a failure.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

import { INJECTIONS } from './injections.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const base = `http://${process.env.K3_HTTP}`;
const keyedBase = process.env.K3_HTTP_KEYED ? `http://${process.env.K3_HTTP_KEYED}` : '';
const apiKey = process.env.K3_API_KEY ?? '';
const shots = process.env.K3_SCREENSHOTS ?? path.join(here, 'screenshots');
fs.mkdirSync(shots, { recursive: true });

let failed = 0;
async function step(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    console.log(`PASS ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e.stack ?? e}`);
  }
}
function check(cond, message) {
  if (!cond) throw new Error(message);
}

function enginedStats() {
  const out = execFileSync('/usr/bin/python3', [path.join(here, 'engined_stats.py'), process.env.K3_ENGINED],
    { encoding: 'utf8', timeout: 30000 });
  return JSON.parse(out);
}

async function until(what, fn, timeoutMs = 20000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const executablePath = ['/usr/lib/chromium/chromium', '/usr/bin/chromium']
  .find((p) => fs.existsSync(p));
const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});

// A page that records everything that must not happen: script errors,
// dialogs (alert), CSP violations, console errors.
async function newPage(options = {}) {
  const context = await browser.newContext({ viewport: { width: 1100, height: 760 }, ...options });
  await context.addInitScript(() => {
    window.__k3_violations = [];
    document.addEventListener('securitypolicyviolation',
      (e) => window.__k3_violations.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  return watch(await context.newPage());
}

// Records the page's script errors, dialogs and console errors.
function watch(page) {
  page.problems = [];
  page.on('pageerror', (e) => page.problems.push(`page error: ${e.message}`));
  page.on('dialog', (d) => {
    page.problems.push(`dialog: ${d.message()}`);
    d.dismiss();
  });
  page.on('console', (m) => {
    // The keyed gateway's 401s are expected there; anything else is a fault.
    if (m.type() === 'error' && !/401/.test(m.text())) page.problems.push(`console: ${m.text()}`);
  });
  return page;
}

async function noProblems(page) {
  const violations = await page.evaluate(() => window.__k3_violations);
  check(violations.length === 0, `CSP violations: ${violations.join('; ')}`);
  check(page.problems.length === 0, page.problems.join('; '));
}

async function settings(page, values) {
  await page.click('#open-settings');
  if ('apiKey' in values) await page.fill('#set-api-key', values.apiKey);
  if ('maxTokens' in values) await page.fill('#set-max-tokens', String(values.maxTokens));
  if ('temperature' in values) await page.fill('#set-temperature', String(values.temperature));
  if ('thinking' in values) await page.setChecked('#set-thinking', values.thinking);
  if ('effort' in values) await page.selectOption('#set-effort', values.effort);
  if ('system' in values) await page.fill('#set-system', values.system);
  await page.click('#settings-save');
  await until('the settings dialog to close', () => page.evaluate(() => !document.getElementById('settings').open));
}

// The last reply's state as the page shows it.
function lastReply(page) {
  return page.evaluate(() => {
    const all = document.querySelectorAll('article.msg.assistant');
    const a = all[all.length - 1];
    if (!a) return null;
    const stats = a.querySelector('.stats').dataset;
    return {
      streaming: a.classList.contains('streaming'),
      content: a.querySelector('.content').textContent,
      html: a.querySelector('.content').innerHTML,
      reasoning: a.querySelector('.reasoning-text').textContent,
      status: a.querySelector('.status').textContent,
      stats: { ...stats },
      count: all.length,
    };
  });
}

async function sendMessage(page, text) {
  await page.fill('#input', text);
  await page.press('#input', 'Enter');
}

async function waitDone(page, timeoutMs = 60000) {
  return until('the reply to finish', async () => {
    const r = await lastReply(page);
    return r && !r.streaming && (r.stats.completionTokens !== undefined || r.status) ? r : null;
  }, timeoutMs);
}

const page = await newPage();

await step('the page loads with its security headers and finds the model', async () => {
  const res = await page.goto(`${base}/`);
  check(res.status() === 200, `GET / answered ${res.status()}`);
  const h = res.headers();
  check(h['content-type'] === 'text/html; charset=utf-8', `content-type ${h['content-type']}`);
  check(/script-src 'self'/.test(h['content-security-policy']) &&
    !/unsafe-inline/.test(h['content-security-policy']), `CSP ${h['content-security-policy']}`);
  check(h['cache-control'] === 'no-cache' && /^"[0-9a-f]{16}"$/.test(h.etag), 'caching headers');
  await until('the model name', async () => (await page.textContent('#model')) !== '');
  await page.screenshot({ path: path.join(shots, '01-loaded.png') });
  await noProblems(page);
});

await step('a reply with thinking: reasoning in its own block, TTFT and tokens/s', async () => {
  // Greedy: the tiny model's reply is the same each run.
  await settings(page, { maxTokens: 48, temperature: 0, thinking: true, effort: 'high', system: 'Be brief.' });
  await sendMessage(page, 'Hello! Who are you?');
  const r = await waitDone(page);
  check(r.status === '', `status ${r.status}`);
  check(r.reasoning.length > 0, 'no reasoning text');
  const n = Number(r.stats.completionTokens);
  check(n > 0 && n <= 48, `completion tokens ${r.stats.completionTokens}`);
  check(Number(r.stats.ttftMs) > 0 && Number(r.stats.tokensPerSecond) > 0, JSON.stringify(r.stats));
  const open = await page.evaluate(() => document.querySelector('article.msg.assistant details').open);
  await page.click('article.msg.assistant details summary');
  const after = await page.evaluate(() => document.querySelector('article.msg.assistant details').open);
  check(open !== after, 'the reasoning block does not toggle');
  if (!after) await page.click('article.msg.assistant details summary');
  await page.screenshot({ path: path.join(shots, '02-reasoning.png') });
});

await step('regenerate: the same prompt again, restored or cached in usage', async () => {
  await page.click('article.msg.assistant:last-of-type .actions button.regenerate');
  const r = await waitDone(page);
  check(r.count === 1, `${r.count} replies after regenerate`);
  // cached_tokens counts every prompt token not computed again; the restored
  // ones are a part of them (issue 25, item 4).
  const cached = Number(r.stats.cachedTokens);
  check(cached > 0 && cached <= Number(r.stats.promptTokens) && Number(r.stats.restoredTokens) <= cached,
    `usage ${JSON.stringify(r.stats)}`);
  console.log(`  regenerate usage: prompt ${r.stats.promptTokens}, cached ${r.stats.cachedTokens}, restored ${r.stats.restoredTokens}`);
});

await step('a long reply streams (grows) and Stop cancels it in engined', async () => {
  await settings(page, { maxTokens: 3000, thinking: false });
  const before = enginedStats().requests_cancelled;
  await sendMessage(page, 'Write a long story, please.');
  const first = await until('streamed text', async () => {
    const r = await lastReply(page);
    return r && r.count === 2 && r.streaming && r.content.length > 0 ? r : null;
  });
  const grown = await until('the reply to grow', async () => {
    const r = await lastReply(page);
    return r.streaming && r.content.length > first.content.length + 40 ? r : null;
  });
  check(grown.content.startsWith(first.content.slice(0, 20)), 'the reply changed instead of growing');
  await page.screenshot({ path: path.join(shots, '03-streaming.png') });
  await page.click('#stop');
  const r = await waitDone(page);
  check(r.status === 'Stopped', `status '${r.status}'`);
  check(await page.isHidden('#stop') && await page.isVisible('#send'), 'buttons after stop');
  await until('engined to count the cancelled request',
    () => enginedStats().requests_cancelled === before + 1, 15000);
  await page.screenshot({ path: path.join(shots, '04-stopped.png') });
});

await step('edit the last message: the turn before it is restored or cached', async () => {
  await settings(page, { maxTokens: 24 });
  await page.click('article.msg.user:nth-last-of-type(2) .actions button.edit');
  await page.fill('article.msg.user .edit-text', 'Write a short poem instead.');
  check(await page.isHidden('article.msg.user:nth-last-of-type(2) .actions'), 'the Edit button shows while editing');
  await page.screenshot({ path: path.join(shots, '05-editing.png') });
  await page.click('article.msg.user .save-edit');
  const r = await waitDone(page);
  check(r.count === 2 && r.status === '', `replies ${r.count}, status '${r.status}'`);
  const users = await page.$$eval('article.msg.user .content', (n) => n.map((e) => e.textContent));
  check(users.at(-1) === 'Write a short poem instead.', `last user message ${users.at(-1)}`);
  check(Number(r.stats.cachedTokens) > 0 && Number(r.stats.restoredTokens) <= Number(r.stats.cachedTokens),
    `usage ${JSON.stringify(r.stats)}`);
  console.log(`  edit-last usage: prompt ${r.stats.promptTokens}, cached ${r.stats.cachedTokens}, restored ${r.stats.restoredTokens}`);
});

await step('reload: the conversation is still there, and a second one beside it', async () => {
  const before = await page.$$eval('article.msg .content', (n) => n.map((e) => e.textContent));
  await page.click('#new-chat');
  await settings(page, { maxTokens: 8 });
  await sendMessage(page, 'A second conversation');
  await waitDone(page);
  await page.reload();
  await until('the sidebar', async () => (await page.$$('#conversations li')).length === 2);
  const titles = await page.$$eval('#conversations li .open', (n) => n.map((e) => e.textContent));
  check(titles.includes('Hello! Who are you?') && titles.includes('A second conversation'),
    `titles ${JSON.stringify(titles)}`);
  await page.click('#conversations li:has-text("Hello! Who are you?") .open');
  const after = await page.$$eval('article.msg .content', (n) => n.map((e) => e.textContent));
  check(JSON.stringify(after) === JSON.stringify(before), 'the messages differ after reload');
  await page.screenshot({ path: path.join(shots, '06-reloaded.png') });
  await noProblems(page);
});

await step('two tabs: a conversation made in one appears in the other and neither overwrites the other', async () => {
  const titles = (p) => p.$$eval('#conversations li .open', (n) => n.map((e) => e.textContent));
  const before = await titles(page);
  const tab = watch(await page.context().newPage());
  await tab.goto(`${base}/`);
  await until('the second tab to find the model', async () => (await tab.textContent('#model')) !== '');
  await tab.click('#new-chat');
  await sendMessage(tab, 'From the second tab');
  await waitDone(tab);
  await until('the first tab to show it', async () => (await titles(page)).includes('From the second tab'));
  // The first tab writes its own conversation: the second tab's must stay.
  await sendMessage(page, 'And one more from the first tab');
  await waitDone(page);
  await until('the second tab to list the first tab\'s conversation as the newest', async () =>
    (await titles(tab))[0] === 'Hello! Who are you?');
  await page.reload();
  await until('the sidebar', async () => (await titles(page)).length === before.length + 1);
  const after = await titles(page);
  check(after.includes('From the second tab') && before.every((t) => after.includes(t)),
    `titles ${JSON.stringify(after)}, before ${JSON.stringify(before)}`);
  await page.click('#conversations li:has-text("Hello! Who are you?") .open');
  const users = await page.$$eval('article.msg.user .content', (n) => n.map((e) => e.textContent));
  check(users.at(-1) === 'And one more from the first tab', `the first tab's message was lost: ${JSON.stringify(users)}`);
  await noProblems(tab);
  await tab.close();
  await noProblems(page);
});

async function api(route, body) {
  const res = await fetch(`${base}${route}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  check(res.ok, `${route} answered ${res.status}`);
  return res.json();
}

// The page's own request, rewritten on its way to the gateway so that the
// model writes `payload`: its tokens biased in decreasing order (7 apart, more
// than the tiny model's logit spread) and a repetition penalty of 10 that
// pushes each one below the next once written; greedy, exactly that many
// tokens. Needs the payload's tokens distinct and absent from the prompt
// (the repetition penalty covers the prompt too).
async function steer(page, payload) {
  const ids = (await api('/tokenize', { content: payload })).tokens;
  check(new Set(ids).size === ids.length, `the tokens of ${payload} repeat: ${ids}`);
  await page.unroute('**/v1/chat/completions').catch(() => {});
  await page.route('**/v1/chat/completions', async (route) => {
    const body = JSON.parse(route.request().postData());
    const prompt = new Set((await api('/apply-template', body)).tokens);
    const clash = ids.filter((t) => prompt.has(t));
    if (clash.length > 0) page.problems.push(`payload tokens ${clash} are in the prompt`);
    body.logit_bias = Object.fromEntries(ids.map((t, i) => [String(t), 100 - 7 * i]));
    body.repetition_penalty = 10;
    body.temperature = 0;
    body.max_tokens = ids.length;
    await route.continue({ postData: JSON.stringify(body) });
  });
}

await step('model output with <script> and <img onerror> shows as text', async () => {
  const ip = await newPage();
  await ip.addInitScript(() => {
    window.__k3_ran = [];
    window.f = () => window.__k3_ran.push('f()');
  });
  await ip.goto(`${base}/`);
  await settings(ip, { thinking: false });
  for (const payload of ['<script>f()', '<img src onError=f()>']) {
    await steer(ip, payload);
    await ip.click('#new-chat');
    await sendMessage(ip, 'Go');
    const r = await waitDone(ip);
    check(r.content === payload, `the model wrote ${JSON.stringify(r.content)}, not ${payload}`);
    await ip.waitForTimeout(300);  // an error event would have fired by now
    const dom = await ip.evaluate(() => ({
      elements: document.querySelectorAll('#messages script, #messages img, #messages [onerror]').length,
      // The page's own: the libraries' and app.mjs, all in <head>.
      scripts: document.scripts.length - document.head.querySelectorAll('script[src^="/web/"]').length,
      images: document.images.length,
      ran: window.__k3_ran,
    }));
    check(dom.elements === 0 && dom.images === 0 && dom.scripts === 0, `elements appeared: ${JSON.stringify(dom)}`);
    check(dom.ran.length === 0, `model text ran: ${dom.ran}`);
  }
  await ip.screenshot({ path: path.join(shots, '07-injection.png') });
  await noProblems(ip);
  await ip.context().close();
});

await step('tool calls, reasoning and hostile names render as text (view.mjs)', async () => {
  const result = await page.evaluate(async () => {
    const view = await import('/web/view.mjs');
    const msg = {
      role: 'assistant',
      content: 'Calling **the tool**: <img src=x onerror=f()>',
      reasoning: 'I think <script>f()</script>',
      toolCalls: [{ id: 'call_1', name: 'get_weather<img src=x onerror=f()>', arguments: '{"city": "<b>Paris</b>"}' }],
      stats: { ttftMs: 12, completionTokens: 5 },
    };
    const a = view.createMessage(msg);
    view.updateMessage(a, msg);
    document.getElementById('messages').append(a);
    const out = {
      tool: a.querySelector('.tool-name').textContent,
      args: a.querySelector('.tool-args').textContent,
      strong: a.querySelector('.content strong')?.textContent,
      reasoning: a.querySelector('.reasoning-text').textContent,
      elements: a.querySelectorAll('img, script, b').length,
    };
    a.remove();
    return out;
  });
  check(result.tool === 'Tool call: get_weather<img src=x onerror=f()>', result.tool);
  check(result.args === '{\n  "city": "<b>Paris</b>"\n}', result.args);
  check(result.strong === 'the tool' && result.reasoning === 'I think <script>f()</script>', JSON.stringify(result));
  check(result.elements === 0, `${result.elements} elements from model text`);
  await noProblems(page);
});

await step('the progress line shows before the first text and goes with it (view.mjs)', async () => {
  const seen = await page.evaluate(async () => {
    const view = await import('/web/view.mjs');
    const msg = { role: 'assistant', content: '', reasoning: '', toolCalls: [], progress: { queued: 2 } };
    const a = view.createMessage(msg);
    document.getElementById('messages').append(a);
    const line = a.querySelector('.progress');
    const state = () => ({ text: line.textContent, shown: !line.hidden && line.getBoundingClientRect().height > 0 });
    const out = [];
    view.updateMessage(a, msg, { streaming: true });
    out.push(state());
    msg.progress = { done: 3200, total: 10000, etaS: 840 };
    view.updateMessage(a, msg, { streaming: true });
    out.push(state());
    msg.reasoning = 'Let me think';
    view.updateMessage(a, msg, { streaming: true });
    out.push(state());
    msg.reasoning = '';
    view.updateMessage(a, msg, { streaming: false });
    out.push(state());
    a.remove();
    return out;
  });
  check(JSON.stringify(seen) === JSON.stringify([
    { text: 'waiting in line (1 ahead)', shown: true },
    { text: 'reading your prompt: 3,200 of 10,000 tokens, about 14 min left', shown: true },
    { text: '', shown: false },
    { text: '', shown: false },
  ]), JSON.stringify(seen));
  await noProblems(page);
});

// Renders `content` as a finished reply through view.mjs (the page's own
// MarkdownRenderer: marked, DOMPurify, highlight.js, KaTeX) into #messages;
// returns the article's selector.
async function renderReply(p, content, extra = {}) {
  await p.evaluate(({ content, extra }) => import('/web/view.mjs').then((view) => {
    document.getElementById('probe')?.remove();
    const msg = { role: 'assistant', content, reasoning: '', toolCalls: [], ...extra };
    const a = view.createMessage(msg);
    a.id = 'probe';
    view.updateMessage(a, msg);
    document.getElementById('messages').append(a);
  }), { content, extra });
  return '#probe';
}

await step('rich Markdown: a table, highlighted code with a Copy button, math typeset (view.mjs)', async () => {
  const rp = await newPage();
  await rp.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
  await rp.goto(`${base}/`);
  await until('the model name', async () => (await rp.textContent('#model')) !== '');
  const code = 'def area(r):\n    return 3.14159 * r ** 2  # <b>not bold</b>';
  await renderReply(rp, [
    '## Results', '',
    '| Shape | Area |', '|:------|-----:|', '| circle | $\\pi r^2$ |', '| square | `a * a` |', '',
    '```python', code, '```', '',
    'Euler: $e^{i\\pi} + 1 = 0$ and \\(\\sqrt{2}\\), set apart:', '',
    '$$', '\\int_0^1 x^2\\,dx = \\frac{1}{3}', '$$', '',
    '\\[ \\sum_{n=1}^{\\infty} \\frac{1}{n^2} = \\frac{\\pi^2}{6} \\]',
  ].join('\n'));
  const got = await rp.evaluate(async () => {
    await document.fonts.ready;
    const a = document.getElementById('probe');
    const q = (s) => a.querySelectorAll(s);
    return {
      headers: [...q('table th')].map((e) => e.textContent),
      cells: [...q('table td')].map((e) => e.textContent.trim().slice(0, 12)),
      align: q('table td')[1].getAttribute('align'),
      hljsClass: q('pre code')[0].className,
      keywords: [...q('pre code .hljs-keyword')].map((e) => e.textContent),
      comment: q('pre code .hljs-comment')[0]?.textContent,
      codeBold: q('pre b').length,
      copyButtons: q('.code-block > button.code-copy').length,
      inlineMath: q('.math-inline .katex').length,
      displayMath: q('.math-display .katex-display').length,
      mathml: q('.katex math annotation')[0]?.textContent,
      katexFont: getComputedStyle(q('.katex')[0]).fontFamily,
      fontLoaded: document.fonts.check('16px KaTeX_Main'),
      mathErrors: q('.katex-error').length,
    };
  });
  check(JSON.stringify(got.headers) === '["Shape","Area"]' && got.align === 'right', JSON.stringify(got));
  check(got.cells[0] === 'circle' && got.cells[2] === 'square' && got.cells[3] === 'a * a', JSON.stringify(got.cells));
  check(got.hljsClass === 'hljs language-python' && got.keywords.includes('def') && got.keywords.includes('return'),
    `highlighting ${JSON.stringify(got)}`);
  check(got.comment === '# <b>not bold</b>' && got.codeBold === 0, `the code's comment ${got.comment}`);
  check(got.copyButtons === 1, `${got.copyButtons} Copy buttons`);
  // $\pi r^2$ in the table, Euler's and \(\sqrt{2}\) inline; $$..$$ and \[..\] set apart.
  check(got.inlineMath === 3 && got.displayMath === 2 && got.mathErrors === 0, `math ${JSON.stringify(got)}`);
  check(got.mathml === '\\pi r^2', `MathML annotation ${got.mathml}`);
  check(/KaTeX_Main/.test(got.katexFont) && got.fontLoaded, `KaTeX's font: ${got.katexFont}, loaded ${got.fontLoaded}`);
  await rp.click('#probe .code-copy');
  await until('the Copied state', async () => (await rp.getAttribute('#probe .code-copy', 'data-state')) === 'copied');
  check(await rp.textContent('#probe .code-copy') === 'Copied', 'the button does not say Copied');
  const clip = await rp.evaluate(() => navigator.clipboard.readText());
  check(clip === code, `the clipboard holds ${JSON.stringify(clip)}`);
  await rp.screenshot({ path: path.join(shots, '11-rich-markdown.png') });
  await noProblems(rp);
  await rp.context().close();
});

await step('injection cases stay inert in the page: marked, DOMPurify and KaTeX (view.mjs)', async () => {
  const ip = await newPage();
  await ip.goto(`${base}/`);
  await until('the model name', async () => (await ip.textContent('#model')) !== '');
  for (const input of INJECTIONS) {
    await renderReply(ip, input);
    const found = await ip.evaluate(() => {
      const content = document.querySelector('#probe .content');
      const bad = [];
      for (const e of content.querySelectorAll('*')) {
        const tag = e.tagName.toLowerCase();
        if (['script', 'img', 'svg', 'iframe', 'style', 'input', 'b', 'object', 'embed', 'form'].includes(tag)) bad.push(`<${tag}>`);
        for (const attr of e.attributes) {
          if (/^on/i.test(attr.name)) bad.push(`${tag}[${attr.name}]`);
          if (['href', 'src', 'action', 'xlink:href'].includes(attr.name) && !/^https?:\/\//i.test(attr.value)) {
            bad.push(`${tag}[${attr.name}=${attr.value}]`);
          }
        }
      }
      return { bad, text: content.textContent };
    });
    check(found.bad.length === 0, `${JSON.stringify(input)} made ${found.bad.join(', ')}`);
    if (input.startsWith('<script>')) check(found.text.includes('<script>alert(1)</script>'), found.text);
  }
  await ip.waitForTimeout(300);  // an error or load event would have fired by now
  await noProblems(ip);
  // DOMPurify on its own (the second layer), given the cases as raw HTML:
  // only the adapter's tags and attributes survive, links http(s) only.
  // (DOMPurify parses its input in an inert document, where Chromium still
  // reports to the page the inline handlers and styles the CSP refuses:
  // nothing runs there, and those reports are expected here only, since the
  // page never gives DOMPurify a tag the model wrote.)
  const raw = INJECTIONS.concat([
    '<a href="javascript:alert(1)" onclick="alert(1)">x</a><a href="https://ok.example/" title="t">ok</a>',
    '<table><tr><td align="left" style="color:red" onmouseover="alert(1)">c</td></tr></table>',
    '<svg><a xlink:href="javascript:alert(1)"><text>x</text></a></svg><math><mi xlink:href="javascript:alert(1)">x</mi></math>',
    '<form action="javascript:alert(1)"><input type="submit"></form><details open ontoggle="alert(1)">',
  ]);
  const problemsBefore = ip.problems.length;
  const purified = await ip.evaluate((cases) => import('/web/markdown.mjs').then((m) => {
    const r = m.pageRenderer();
    const bad = [];
    const box = document.createElement('div');
    for (const c of cases) {
      box.innerHTML = r.sanitize(c);
      for (const e of box.querySelectorAll('*')) {
        const tag = e.tagName.toLowerCase();
        if (!m.ALLOWED_TAGS.includes(tag)) bad.push(`<${tag}> from ${c}`);
        for (const a of e.attributes) {
          const ok = m.ALLOWED_ATTR.includes(a.name) || (tag === 'a' && ['target', 'rel'].includes(a.name));
          if (!ok || (a.name === 'href' && !/^https:\/\/ok\.example\//.test(a.value))) bad.push(`${tag}[${a.name}] from ${c}`);
        }
      }
    }
    box.innerHTML = r.sanitize('<a href="https://ok.example/">x</a>');
    const a = box.querySelector('a');
    return { bad, target: a?.target, rel: a?.rel };
  }), raw);
  check(purified.bad.length === 0, purified.bad.join('; '));
  check(purified.target === '_blank' && purified.rel === 'noopener noreferrer nofollow', JSON.stringify(purified));
  await ip.waitForTimeout(300);
  await ip.evaluate(() => { window.__k3_violations = []; });
  // The same reports as console errors; anything else (a dialog, a script
  // error) stays a failure.
  const raised = ip.problems.splice(problemsBefore);
  ip.problems.push(...raised.filter((p) => !/^console: .*violates the following Content Security Policy directive.*has been blocked/.test(p)));
  await ip.screenshot({ path: path.join(shots, '12-injection-cases.png') });
  await noProblems(ip);
  await ip.context().close();
});

await step('a reply cut off while thinking says so; a cut-off answer says so too', async () => {
  const fp = await newPage();
  await fp.goto(`${base}/`);
  await until('the model name', async () => (await fp.textContent('#model')) !== '');
  const finish = () => fp.evaluate(() => {
    const all = document.querySelectorAll('article.msg.assistant .finish');
    const f = all[all.length - 1];
    return { text: f.hidden ? '' : f.textContent, reason: f.dataset.reason ?? '' };
  });
  // Thinking on, greedy: the tiny model's first tokens are reasoning.
  await settings(fp, { maxTokens: 6, temperature: 0, thinking: true, effort: 'high' });
  await sendMessage(fp, 'Think about the sea.');
  let r = await waitDone(fp);
  let f = await finish();
  check(r.content === '' && r.reasoning !== '' && r.status === '', `reply ${JSON.stringify(r)}`);
  check(f.reason === 'length' && /^Max tokens reached while thinking: no answer yet/.test(f.text), JSON.stringify(f));
  await fp.screenshot({ path: path.join(shots, '13-cut-off-thinking.png') });
  // Kept with the conversation: still there after a reload.
  await fp.reload();
  await until('the reply after reload', async () => (await lastReply(fp))?.reasoning !== '');
  check((await finish()).text === f.text, 'the notice is gone after reload');
  // Thinking off: the answer itself is cut.
  await settings(fp, { maxTokens: 4, thinking: false });
  await fp.click('#new-chat');
  await sendMessage(fp, 'Tell me about the sea.');
  r = await waitDone(fp);
  f = await finish();
  check(r.content !== '' && /^Max tokens reached: the answer is cut off/.test(f.text), `${JSON.stringify(r)} ${JSON.stringify(f)}`);
  // A reply that ends as it should shows no notice.
  await renderReply(fp, 'Done.', { finishReason: 'stop' });
  check(await fp.isHidden('#probe .finish'), 'a notice for finish_reason stop');
  await renderReply(fp, '', { finishReason: 'tool_calls', toolCalls: [{ id: 'c', name: 'f', arguments: '{}' }] });
  check(await fp.textContent('#probe .finish') === 'Ended with a tool call: this page does not run tools.', 'tool_calls notice');
  await noProblems(fp);
  await fp.context().close();
});

await step('export: the conversation downloads as JSON and as Markdown', async () => {
  const ep = await newPage();
  await ep.goto(`${base}/`);
  await until('the model name', async () => (await ep.textContent('#model')) !== '');
  check(await ep.isDisabled('#export-json'), 'export is possible with no messages');
  await settings(ep, { maxTokens: 8, temperature: 0, thinking: false, apiKey: 'sk-not-exported' });
  await sendMessage(ep, 'Export me');
  const r = await waitDone(ep);
  const model = await ep.textContent('#model');
  const take = async (button) => {
    await ep.click('#export summary');
    const [download] = await Promise.all([ep.waitForEvent('download'), ep.click(button)]);
    return { name: download.suggestedFilename(), text: fs.readFileSync(await download.path(), 'utf8') };
  };
  const json = await take('#export-json');
  check(json.name === 'k3serve-export-me.json', json.name);
  check(!json.text.includes('sk-not-exported'), 'the API key was exported');
  const doc = JSON.parse(json.text);
  check(doc.format === 'k3serve.conversation' && doc.title === 'Export me' && doc.model === model, json.text);
  // The reply as written (the page shows it rendered: compare the words).
  const answer = doc.messages[1]?.content ?? '';
  check(doc.messages.length === 2 && doc.messages[0].content === 'Export me' && answer.trim() !== '' &&
    answer.trim() === r.content.trim() && doc.messages[1].finish_reason === 'length', json.text);
  check(doc.settings.max_tokens === 8 && doc.settings.thinking === false, JSON.stringify(doc.settings));
  const md = await take('#export-markdown');
  check(md.name === 'k3serve-export-me.md', md.name);
  check(md.text.startsWith('# Export me\n') && md.text.includes(`## You\n\nExport me\n\n## K3\n\n${answer}\n`) &&
    md.text.includes('*Max tokens reached: the answer is cut off.'), md.text);
  check(await ep.evaluate(() => !document.getElementById('export').open), 'the menu stays open');
  await noProblems(ep);
  await ep.context().close();
});

await step('phone-sized and dark', async () => {
  const phone = await newPage({ viewport: { width: 390, height: 780 }, colorScheme: 'dark', isMobile: true });
  await phone.goto(`${base}/`);
  await until('the model name', async () => (await phone.textContent('#model')) !== '' ||
    (await phone.evaluate(() => document.getElementById('model').textContent)) !== '');
  await settings(phone, { maxTokens: 40, thinking: false });
  await sendMessage(phone, 'Show me **markdown** and `code`, please: ```\n<b>not bold</b>\n```');
  await waitDone(phone);
  const bg = await phone.evaluate(() => getComputedStyle(document.body).backgroundColor);
  check(bg === 'rgb(21, 23, 27)', `dark background ${bg}`);
  const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check(overflow <= 0, `the page is ${overflow}px wider than the phone`);
  check(await phone.isHidden('#sidebar') || (await phone.evaluate(() =>
    document.getElementById('sidebar').getBoundingClientRect().right <= 0)), 'sidebar covers the chat');
  await phone.screenshot({ path: path.join(shots, '08-phone-dark.png') });
  await phone.click('#toggle-sidebar');
  await until('the sidebar to slide in', () => phone.evaluate(() =>
    document.getElementById('sidebar').getBoundingClientRect().left >= 0));
  await phone.screenshot({ path: path.join(shots, '09-phone-sidebar.png') });
  await noProblems(phone);
  await phone.context().close();
});

await step('settings refuse bad values; Defaults and Cancel change nothing; bad storage falls back', async () => {
  const sp = await newPage();
  await sp.goto(`${base}/`);
  await settings(sp, { maxTokens: 77, system: 'Keep me.' });
  const saved = await sp.evaluate(() => localStorage.getItem('k3serve.settings'));
  await sp.click('#open-settings');
  await sp.fill('#set-temperature', '3');
  await sp.click('#settings-save');
  check(/Temperature/.test(await sp.textContent('#settings-error')), 'no error for temperature 3');
  check(await sp.evaluate(() => document.getElementById('settings').open), 'the dialog closed on a bad value');
  await sp.fill('#set-temperature', '0.5');
  await sp.fill('#set-max-tokens', '1.5');
  await sp.click('#settings-save');
  check(/Max tokens/.test(await sp.textContent('#settings-error')), 'no error for max tokens 1.5');
  await sp.click('#settings-reset');
  check(await sp.inputValue('#set-max-tokens') === '8192' && await sp.inputValue('#set-system') === '', 'Defaults did not fill the form');
  await sp.click('#settings-cancel');
  check(await sp.evaluate(() => localStorage.getItem('k3serve.settings')) === saved, 'Cancel changed the settings');
  await sp.click('#open-settings');
  check(await sp.inputValue('#set-max-tokens') === '77', 'the form lost the saved settings');
  await sp.click('#settings-cancel');
  // Storage written by hand or by another page: defaults, no crash.
  await sp.evaluate(() => {
    localStorage.setItem('k3serve.settings', '{"temperature": "hot", "maxTokens": -1, "effort": "medium"');
    localStorage.setItem('k3serve.conversations', '[{"id": 5}, null, {"id": "x", "messages": [{"role": "tool"}, {"role": "user", "content": "kept"}]}]');
    localStorage.setItem('k3serve.conversation.y', '{not json');
    localStorage.setItem('k3serve.conversation.z', '{"id": "other", "messages": [{"role": "user", "content": "misfiled"}]}');
    localStorage.setItem('k3serve.current', 'x');
  });
  await sp.reload();
  await until('the model name', async () => (await sp.textContent('#model')) !== '');
  const texts = await sp.$$eval('article.msg .content', (n) => n.map((e) => e.textContent));
  check(JSON.stringify(texts) === '["kept"]', `messages after bad storage: ${JSON.stringify(texts)}`);
  const listed = await sp.$$eval('#conversations li .open', (n) => n.map((e) => e.textContent));
  check(!listed.includes('misfiled'), `a conversation under another id's key is listed: ${JSON.stringify(listed)}`);
  check(await sp.evaluate(() => localStorage.getItem('k3serve.conversations')) === null,
    'the old single-key conversations were not migrated');
  await sp.click('#open-settings');
  check(await sp.inputValue('#set-max-tokens') === '8192' && await sp.inputValue('#set-temperature') === '0.6', 'bad settings not replaced by defaults');
  check(await sp.inputValue('#set-effort') === 'max', 'an unknown stored effort did not fall back to max');
  await sp.click('#settings-cancel');
  // An older page saved its default of 1,024 unversioned: read as today's
  // default; a chosen 1,024 (saved by this page) stays.
  for (const [stored, shown] of [['{"maxTokens": 1024}', '8192'], ['{"maxTokens": 1024, "version": 2}', '1024'],
    ['{"maxTokens": 500}', '500']]) {
    await sp.evaluate((v) => localStorage.setItem('k3serve.settings', v), stored);
    await sp.reload();
    await sp.click('#open-settings');
    check(await sp.inputValue('#set-max-tokens') === shown, `${stored} shows ${await sp.inputValue('#set-max-tokens')}`);
    await sp.click('#settings-cancel');
  }
  await noProblems(sp);
  await sp.context().close();
});

await step('with API keys: the page loads without a key, the API only with it', async () => {
  check(keyedBase !== '', 'K3_HTTP_KEYED is not set');
  const kp = await newPage();
  const res = await kp.goto(`${keyedBase}/`);
  check(res.status() === 200, `GET / answered ${res.status()} without a key`);
  await until('the key notice', async () => /API key/.test(await kp.textContent('#notice')));
  await settings(kp, { maxTokens: 8 });
  await sendMessage(kp, 'no key');
  let r = await waitDone(kp);
  check(/API key/.test(r.status), `status without key '${r.status}'`);
  await kp.screenshot({ path: path.join(shots, '10-needs-key.png') });
  await settings(kp, { apiKey });
  await until('the model name', async () => (await kp.textContent('#model')) !== '');
  await sendMessage(kp, 'with the key');
  r = await waitDone(kp);
  const n = Number(r.stats.completionTokens);
  check(r.status === '' && n > 0 && n <= 8, `with key: ${JSON.stringify(r)}`);
  const stored = await kp.evaluate(() => JSON.parse(localStorage.getItem('k3serve.settings')).apiKey);
  check(stored === apiKey, 'the key is not kept in localStorage');
  await kp.context().close();
});

await browser.close();
console.log(failed === 0 ? 'browser test: all passed' : `browser test: ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
