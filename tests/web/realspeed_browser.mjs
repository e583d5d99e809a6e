// The web chat page at the real model's speed (issue 25, item 5): headless
// Chromium (playwright-core, as browser_test.mjs) against a k3-slice behind
// deploy/run-local.sh --drive-mbps (tests/e2e/realspeed_test.sh starts it).
// A long message: while the prompt is read the reply shows "reading your
// prompt: D of T tokens, about X left" (screenshot), the line goes when the
// text starts, and the reply ends whole. Environment:
//   K3_HTTP         HOST:PORT of the gateway
//   K3_SCREENSHOTS  directory for the screenshots
//   K3_WORDS        words of the message (its prompt: tens of seconds to read)
// Prints PASS/FAIL; exits 1 on a failure.
import fs from 'node:fs';
import path from 'node:path';

import { chromium } from 'playwright-core';

import { promptText } from '../../tools/realspeed/sse_timing.mjs';

const base = `http://${process.env.K3_HTTP}`;
const shots = process.env.K3_SCREENSHOTS;
const words = Number(process.env.K3_WORDS ?? 15);
fs.mkdirSync(shots, { recursive: true });

function check(cond, message) {
  if (!cond) throw new Error(message);
}

async function until(what, fn, timeoutMs) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const executablePath = ['/usr/lib/chromium/chromium', '/usr/bin/chromium'].find((p) => fs.existsSync(p));
const browser = await chromium.launch({
  executablePath, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const page = await (await browser.newContext({ viewport: { width: 1100, height: 760 } })).newPage();
const problems = [];
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
page.on('console', (m) => m.type() === 'error' && problems.push(`console: ${m.text()}`));

// The reply's state as the page shows it.
const reply = () => page.evaluate(() => {
  const a = [...document.querySelectorAll('article.msg.assistant')].at(-1);
  if (!a) return null;
  const p = a.querySelector('.progress');
  return {
    streaming: a.classList.contains('streaming'),
    progress: p.textContent,
    progressShown: !p.hidden && p.getBoundingClientRect().height > 0,
    content: a.querySelector('.content').textContent,
    status: a.querySelector('.status').textContent,
    tokens: a.querySelector('.stats').dataset.completionTokens,
  };
});

let failed = 0;
try {
  await page.goto(`${base}/`);
  await until('the model name', async () => (await page.textContent('#model')) !== '', 30000);
  await page.click('#open-settings');
  await page.fill('#set-max-tokens', '3');
  await page.fill('#set-temperature', '0');
  await page.setChecked('#set-thinking', false);
  await page.click('#settings-save');
  await page.fill('#input', promptText(404, words));
  await page.press('#input', 'Enter');

  // Reading the prompt, past its first sub-chunk: the count and a time left.
  const pattern = /^reading your prompt: ([\d,]+) of ([\d,]+) tokens, about \d+ (s|min|h)( \d+ min)? left$/;
  const seen = new Set();
  const during = await until('the progress line with a count and a time left', async () => {
    const r = await reply();
    if (r?.progress) seen.add(r.progress);
    const m = r?.progressShown ? pattern.exec(r.progress) : null;
    return m && Number(m[1].replace(/,/g, '')) > 0 ? { ...r, done: m[1], total: m[2] } : null;
  }, 240000);
  check(during.streaming && during.content === '', `text beside the progress line: ${JSON.stringify(during)}`);
  await page.screenshot({ path: path.join(shots, 'realspeed-01-reading-prompt.png') });
  console.log(`PASS the page shows '${during.progress}'`);

  // The text starts: the line goes; the reply ends whole.
  const done = await until('the reply to end', async () => {
    const r = await reply();
    if (r?.progress) seen.add(r.progress);
    return r && !r.streaming ? r : null;
  }, 240000);
  check(done.status === '' && Number(done.tokens) >= 1 && !done.progressShown && !done.progress,
    `the reply ended as ${JSON.stringify(done)}`);
  check([...seen].some((t) => /^reading your prompt: 0 of /.test(t)) || seen.size >= 2,
    `progress lines seen: ${JSON.stringify([...seen])}`);
  await page.screenshot({ path: path.join(shots, 'realspeed-02-answered.png') });
  check(problems.length === 0, problems.join('; '));
  console.log(`PASS the line went when the text started; lines seen: ${JSON.stringify([...seen])}`);
} catch (e) {
  failed++;
  console.log(`FAIL ${e.stack ?? e}`);
  await page.screenshot({ path: path.join(shots, 'realspeed-failed.png') }).catch(() => {});
}
await browser.close();
process.exit(failed === 0 ? 0 : 1);
