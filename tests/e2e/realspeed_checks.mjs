// The service at the real model's speed (issue 25, item 5), against a k3-slice
// behind deploy/run-local.sh --drive-mbps (tests/e2e/realspeed_test.sh starts
// it): seconds per token, tens of seconds per prompt. One check per argument:
//   cadence     a streamed long prompt: the first chunk at once, ": prefill"
//               comments from 0 to the prompt's size with a time left, and no
//               gap between bytes over 10 s
//   cancel      a hang-up during prefill: engined's prefill-token counter
//               stops within a sub-chunk of the last report, short of the
//               prompt
//   long-reply  a reply that runs past a short --request-timeout-s, with no
//               deadline set (the default); the capped gateway beside it cuts
//               the same kind of reply
// Environment: K3_HTTP (the default gateway), K3_HTTP_CAPPED and K3_CAP_S (a
// gateway on the same engined with --request-timeout-s K3_CAP_S), K3_MODEL
// (the model directory: its stop tokens), K3_ENGINED (engined's address, for
// its Stats). Prints PASS/FAIL per check and one JSON line of figures; exits
// 1 on a failure. Counts and orderings are asserted; times only where the
// drive cap bounds them from below.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import {
  maxGap, prefillReports, promptText, stopTokenIds, streamTimed, timeToFirstToken,
} from '../../tools/realspeed/sse_timing.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const http = process.env.K3_HTTP;
const model = process.env.K3_MODEL;
if (!http || !model || !process.env.K3_ENGINED) {
  console.error('K3_HTTP, K3_MODEL and K3_ENGINED must be set');
  process.exit(2);
}

let failed = 0;
function check(cond, message) {
  if (!cond) throw new Error(message);
}
async function step(name, fn) {
  const t0 = Date.now();
  try {
    const figures = await fn();
    console.log(`PASS ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    if (figures) console.log(JSON.stringify({ check: name, ...figures }));
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e.stack ?? e}`);
  }
}

function enginedStats() {
  const out = execFileSync('/usr/bin/python3', [path.join(here, '..', 'web', 'engined_stats.py'), process.env.K3_ENGINED],
    { encoding: 'utf8', timeout: 60000 });
  return JSON.parse(out);
}

async function until(what, fn, timeoutS) {
  const end = Date.now() + timeoutS * 1000;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutS} s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

const banStops = Object.fromEntries((await stopTokenIds(model)).map((id) => [String(id), -100]));

// A streamed chat request with thinking off (the reply is all content).
function chat(seed, words, maxTokens, extra = {}) {
  return {
    messages: [{ role: 'user', content: promptText(seed, words) }],
    max_tokens: maxTokens,
    temperature: 0,
    thinking: false,
    ...extra,
  };
}

const checks = process.argv.slice(2);

if (checks.includes('cadence')) {
  await step('cadence: a streamed long prompt is never silent for 10 s', async () => {
    const r = await streamTimed(http, chat(101, 15, 2));
    check(r.status === 200, `status ${r.status}`);
    check(r.done && r.error === null, `the stream did not end with [DONE] (error ${r.error})`);
    // The head and a first chunk (role, empty content) before anything else.
    const first = r.events[0];
    check(first?.json?.choices?.[0]?.delta?.role === 'assistant' && !first.generated,
      `the first event is not the role chunk: ${JSON.stringify(first)}`);
    const reports = prefillReports(r);
    const firstText = r.events.findIndex((e) => e.generated);
    check(firstText > 0, 'no generated text');
    check(r.events.slice(firstText).every((e) => !e.progress || !('done' in e.progress)),
      'a prefill comment after the first text');
    check(reports.length >= 3, `${reports.length} prefill comments`);
    const total = reports[0].total;
    check(reports[0].done === 0, `the first report is ${reports[0].done}/${total}, not 0/${total}`);
    check(reports.every((p, i) => p.total === total && (i === 0 || p.done >= reports[i - 1].done)),
      `reports not monotonic: ${reports.map((p) => `${p.done}/${p.total}`).join(' ')}`);
    check(reports.at(-1).done === total, `the last report is ${reports.at(-1).done}/${total}`);
    check(new Set(reports.map((p) => p.done)).size >= 3, 'fewer than three distinct prefill reports');
    check(reports.some((p) => p.done > 0 && p.done < total && Number.isInteger(p.etaS)),
      'no report with a time left while reading');
    check(total >= r.usage.prompt_tokens - r.usage.prompt_tokens_details.cached_tokens,
      `TOTAL ${total} against usage ${JSON.stringify(r.usage)}`);
    const gap = maxGap(r);
    const prefillS = reports.at(-1).t - reports[0].t;
    // The drive cap bounds the prompt's reading from below (each 32-token
    // chunk reads at least the 68 experts a 28-slot cache lacks): seconds.
    check(prefillS > 5, `the prompt was read in ${prefillS.toFixed(1)} s: is the drive throttled?`);
    check(gap < 10, `a gap of ${gap.toFixed(1)} s between bytes`);
    return {
      prompt_tokens: r.usage.prompt_tokens, prefill_tokens: total, prefill_s: +prefillS.toFixed(1),
      comments: r.events.filter((e) => e.comment).length, max_gap_s: +gap.toFixed(2),
      ttft_s: +timeToFirstToken(r).toFixed(1),
    };
  });
}

if (checks.includes('cancel')) {
  await step('cancel during prefill: engined stops reading the prompt', async () => {
    const before = enginedStats();
    let reported = null;
    const r = await streamTimed(http, chat(202, 26, 2), {
      onEvent: (e) => {
        if (e.progress && e.progress.done > 0) {
          reported = e.progress;
          return 'abort';
        }
        return undefined;
      },
    });
    check(r.aborted && reported !== null, 'the stream ended before a prefill report past 0');
    // The sub-chunk: the tokens of the first report past 0.
    const subChunk = reported.done;
    check(reported.total >= reported.done + 3 * subChunk,
      `the prompt (${reported.total} tokens) is too short for this check (sub-chunk ${subChunk})`);
    const after = await until('engined to end the cancelled request', () => {
      const s = enginedStats();
      return s.requests_cancelled === before.requests_cancelled + 1 && s.sessions_busy === 0 ? s : null;
    }, 120);
    const read = after.prefill_tokens - before.prefill_tokens;
    // What it had reported, then at most the sub-chunk in flight at the
    // hang-up and the one whose report was on its way.
    check(read >= reported.done, `engined counted ${read} prefilled tokens, fewer than the ${reported.done} reported`);
    check(read <= reported.done + 2 * subChunk,
      `engined read ${read} of ${reported.total} prompt tokens after a hang-up at ${reported.done}`);
    // And stays there.
    await new Promise((res) => setTimeout(res, 3000));
    const later = enginedStats();
    check(later.prefill_tokens === after.prefill_tokens, 'the prefill counter moved after the cancel');
    return { prompt_tokens: reported.total, reported_at_hangup: reported.done, prefilled: read, sub_chunk: subChunk };
  });
}

if (checks.includes('long-reply')) {
  const capped = process.env.K3_HTTP_CAPPED;
  const capS = Number(process.env.K3_CAP_S);
  await step('a reply runs past a short --request-timeout-s when none is set', async () => {
    check(capped && capS > 0, 'K3_HTTP_CAPPED and K3_CAP_S must be set');
    // Every decoded token reads at least 20 experts (48 asked, 28 slots): at
    // the drive cap 12 tokens take longer than the cap.
    const maxTokens = 12;
    const r = await streamTimed(http, chat(303, 1, maxTokens, { logit_bias: banStops }));
    const seconds = r.tEnd - r.tSend;
    check(r.status === 200 && r.done && r.error === null, `status ${r.status}, error ${r.error}`);
    check(r.finishReason === 'length' && r.usage.completion_tokens === maxTokens,
      `finish ${r.finishReason}, ${r.usage?.completion_tokens} tokens`);
    check(seconds > capS, `the reply took ${seconds.toFixed(1)} s, within the ${capS} s cap: too fast to tell`);
    check(maxGap(r) < 10, `a gap of ${maxGap(r).toFixed(1)} s between bytes`);

    // The same kind of reply on the gateway with --request-timeout-s: cut.
    const t0 = performance.now();
    const res = await fetch(`http://${capped}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(chat(304, 1, maxTokens, { logit_bias: banStops })),
    });
    const cappedS = (performance.now() - t0) / 1000;
    const j = await res.json();
    if (res.status === 200) {
      check(res.headers.get('x-k3-truncated') === 'deadline', `X-K3-Truncated ${res.headers.get('x-k3-truncated')}`);
      check(j.choices[0].finish_reason === 'length' && j.usage.completion_tokens < maxTokens,
        `capped: ${JSON.stringify(j.usage)}, finish ${j.choices[0].finish_reason}`);
    } else {
      check(res.status === 504 && j.error?.code === 'timeout', `capped: ${res.status} ${JSON.stringify(j)}`);
    }
    return {
      seconds: +seconds.toFixed(1), tokens: r.usage.completion_tokens, cap_s: capS,
      capped_status: res.status, capped_tokens: j.usage?.completion_tokens ?? 0, capped_s: +cappedS.toFixed(1),
    };
  });
}

console.log(failed === 0 ? 'realspeed checks: all passed' : `realspeed checks: ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
