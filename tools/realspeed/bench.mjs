// The client half of tools/realspeed/bench.sh: against a gateway (a k3-slice
// behind run-local.sh --drive-mbps), a chat prompt of about --prompt-tokens
// tokens read twice, streamed: first as it is, then with its last words
// changed (an edit at its end). JSON lines on stdout, one per figure:
//   prompt          the prompt's size as rendered (tokens) and its words
//   stream_gap_max  the longest time with no byte from the gateway during the
//                   first read (seconds; a proxy's idle timer sees this), with
//                   the number of comment lines and prefill reports
//   first_read      prompt tokens, tokens computed (prompt - cached), cached,
//                   restored, time to first token
//   edited_read     the same for the edited prompt, and its computed tokens
//                   and time to first token as fractions of the first read's
//   node tools/realspeed/bench.mjs --http HOST:PORT [--prompt-tokens N]
import { maxGap, prefillReports, promptText, streamTimed, timeToFirstToken } from './sse_timing.mjs';

function usage(message) {
  console.error(`bench.mjs: ${message}\nusage: node tools/realspeed/bench.mjs --http HOST:PORT [--prompt-tokens N] [--seed N]`);
  process.exit(2);
}

const args = { http: '', promptTokens: 2000, seed: Date.now() % 100000 };
for (let i = 2; i < process.argv.length; i += 2) {
  const [flag, value] = [process.argv[i], process.argv[i + 1]];
  if (value === undefined) usage(`${flag} needs a value`);
  if (flag === '--http') args.http = value;
  else if (flag === '--prompt-tokens') args.promptTokens = Number(value);
  else if (flag === '--seed') args.seed = Number(value);
  else usage(`unknown argument '${flag}'`);
}
if (!args.http) usage('--http is required');
if (!Number.isInteger(args.promptTokens) || args.promptTokens < 64 || args.promptTokens > 200000) {
  usage(`--prompt-tokens ${args.promptTokens} must be a whole number in [64, 200000]`);
}
if (!Number.isInteger(args.seed) || args.seed < 0) usage(`--seed ${args.seed} must be a whole number >= 0`);

const emit = (j) => console.log(JSON.stringify(j));
const round = (x, digits = 2) => (x === null ? null : Number(x.toFixed(digits)));

function request(content) {
  return { messages: [{ role: 'user', content }], max_tokens: 2, temperature: 0, thinking: false };
}

// The prompt's size as the gateway renders it.
async function rendered(content) {
  const res = await fetch(`http://${args.http}/apply-template`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(request(content)),
  });
  if (!res.ok) throw new Error(`/apply-template answered ${res.status}: ${await res.text()}`);
  return (await res.json()).tokens.length;
}

// Words for about `target` tokens: the tokenizer cuts these words evenly, so
// two measures give the rate and a third checks it.
async function sizedPrompt(target, seed) {
  const a = await rendered(promptText(seed, 10));
  const b = await rendered(promptText(seed, 110));
  const perWord = (b - a) / 100;
  let words = Math.max(1, Math.round(10 + (target - a) / perWord));
  let text = promptText(seed, words);
  let tokens = await rendered(text);
  words = Math.max(1, words + Math.round((target - tokens) / perWord));
  text = promptText(seed, words);
  tokens = await rendered(text);
  return { text, words, tokens };
}

function figures(r) {
  if (r.status !== 200 || !r.done || r.error) {
    throw new Error(`the request failed: status ${r.status}, error ${r.error}, done ${r.done}`);
  }
  const u = r.usage;
  const cached = u.prompt_tokens_details?.cached_tokens ?? 0;
  return {
    prompt_tokens: u.prompt_tokens,
    computed_tokens: u.prompt_tokens - cached,
    cached_tokens: cached,
    restored_tokens: u.k3_restored_tokens ?? 0,
    ttft_s: round(timeToFirstToken(r)),
  };
}

try {
  const prompt = await sizedPrompt(args.promptTokens, args.seed);
  emit({ metric: 'prompt', tokens: prompt.tokens, words: prompt.words, seed: args.seed });

  const first = await streamTimed(args.http, request(prompt.text));
  const f = figures(first);
  const reports = prefillReports(first);
  emit({
    metric: 'stream_gap_max', value: round(maxGap(first)), unit: 's', prompt_tokens: f.prompt_tokens,
    comments: first.events.filter((e) => e.comment).length, prefill_reports: reports.length,
    seconds: round(first.tEnd - first.tSend, 1),
  });
  emit({ metric: 'first_read', ...f });

  // The edit: the last two words replaced (what an agent's next turn or a
  // corrected question does to a long prompt).
  const words = prompt.text.split(' ');
  const edited = [...words.slice(0, -2), 'edited', 'ending'].join(' ');
  const second = await streamTimed(args.http, request(edited));
  const e = figures(second);
  emit({
    metric: 'edited_read', ...e,
    computed_fraction: round(e.computed_tokens / f.computed_tokens, 4),
    ttft_fraction: round(e.ttft_s / f.ttft_s, 4),
    max_gap_s: round(maxGap(second)),
  });
} catch (err) {
  console.error(`bench.mjs: ${err.message ?? err}`);
  process.exit(1);
}
