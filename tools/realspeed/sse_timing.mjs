// A streamed request to the gateway's OpenAI API with the arrival time of
// every byte it sends back: what a proxy sees of a stream (the gaps between
// bytes), its SSE events in order (data chunks and comment lines) and the
// progress the comments carry. Node's own http module, no packages. Used by
// tools/realspeed/bench.mjs and tests/e2e/realspeed_checks.mjs.
import http from 'node:http';

const now = () => performance.now() / 1000;  // seconds

// A progress comment (docs/openai-api.md, "Streams") as {queued} or {done,
// total, etaS?}; {keepAlive: true} for ": keep-alive"; null for any other.
export function parseComment(line) {
  let m = /^: queued (\d+)$/.exec(line);
  if (m) return { queued: Number(m[1]) };
  m = /^: prefill (\d+)\/(\d+)(?: eta_s=(\d+))?$/.exec(line);
  if (m) {
    const p = { done: Number(m[1]), total: Number(m[2]) };
    if (m[3] !== undefined) p.etaS = Number(m[3]);
    return p;
  }
  return line === ': keep-alive' ? { keepAlive: true } : null;
}

// POSTs `body` (stream: true is set) to http://ADDR/v1/chat/completions and
// reads the stream to its end. `onEvent(event, result)` sees each event as it
// arrives and may return 'abort' to hang up there (result.aborted). Returns
// {status, headers, tSend, tHead, tEnd (seconds, one clock), arrivals [{t,
// bytes}], events [{t, comment?, progress?, data?, json?}], text (the
// generated content), usage, finishReason, error (an error event's message)}.
export function streamTimed(addr, body, { onEvent = () => {}, path = '/v1/chat/completions', apiKey = '' } = {}) {
  const payload = JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } });
  const url = new URL(`http://${addr}${path}`);
  return new Promise((resolve, reject) => {
    const result = {
      status: 0, headers: {}, tSend: 0, tHead: 0, tEnd: 0, arrivals: [], events: [], text: '',
      usage: null, finishReason: null, error: null, aborted: false, done: false,
    };
    const headers = { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload) };
    if (apiKey) headers.Authorization = `Bearer ${apiKey}`;
    const req = http.request(url, { method: 'POST', headers });
    let buffer = '';
    const finish = () => {
      if (result.tEnd === 0) result.tEnd = now();
      resolve(result);
    };
    req.on('response', (res) => {
      result.tHead = now();
      result.status = res.statusCode;
      result.headers = res.headers;
      res.setEncoding('utf8');
      res.on('data', (piece) => {
        const t = now();
        result.arrivals.push({ t, bytes: Buffer.byteLength(piece) });
        buffer += piece;
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const raw = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event = { t };
          if (raw.startsWith(':')) {
            event.comment = raw;
            event.progress = parseComment(raw);
          } else {
            event.data = raw.split('\n').filter((l) => l.startsWith('data:'))
              .map((l) => l.slice(5).replace(/^ /, '')).join('\n');
            if (event.data === '[DONE]') {
              result.done = true;
            } else if (result.status === 200) {
              try {
                event.json = JSON.parse(event.data);
              } catch {
                event.json = null;
              }
              const j = event.json ?? {};
              if (j.error) result.error = j.error.message ?? 'error';
              if (j.usage) result.usage = j.usage;
              for (const c of j.choices ?? []) {
                const d = c.delta ?? {};
                event.generated = (typeof d.content === 'string' && d.content !== '') ||
                  (typeof d.reasoning_content === 'string' && d.reasoning_content !== '') ||
                  (Array.isArray(d.tool_calls) && d.tool_calls.length > 0);
                if (typeof d.content === 'string') result.text += d.content;
                if (c.finish_reason) result.finishReason = c.finish_reason;
              }
            }
          }
          result.events.push(event);
          if (onEvent(event, result) === 'abort' && !result.aborted) {
            result.aborted = true;
            result.tEnd = now();
            req.destroy();
            finish();
            return;
          }
        }
      });
      res.on('end', finish);
      res.on('error', () => (result.aborted ? finish() : reject(new Error('the stream broke'))));
    });
    req.on('error', (e) => (result.aborted ? finish() : reject(e)));
    req.end(payload, () => {
      result.tSend = now();
    });
  });
}

// The longest time in seconds with no byte from the gateway: from the request
// sent to the head, between the pieces of the body, to its end.
export function maxGap(result) {
  const times = [result.tSend, result.tHead, ...result.arrivals.map((a) => a.t), result.tEnd];
  let gap = 0;
  for (let i = 1; i < times.length; ++i) gap = Math.max(gap, times[i] - times[i - 1]);
  return gap;
}

// The time from the request sent to the first event with generated text
// (null: none came).
export function timeToFirstToken(result) {
  const first = result.events.find((e) => e.generated);
  return first ? first.t - result.tSend : null;
}

// The prefill progress reports of a stream, in order.
export function prefillReports(result) {
  return result.events.filter((e) => e.progress && 'done' in e.progress).map((e) => ({ t: e.t, ...e.progress }));
}

// The token ids that end a reply on the model in `modelDir` (config.json's and
// generation_config.json's eos_token_id, the tokenizer's [EOS]), for a
// logit_bias that bans them: a reply then runs to max_tokens.
export async function stopTokenIds(modelDir) {
  const fs = await import('node:fs');
  const read = (name) => {
    try {
      return JSON.parse(fs.readFileSync(`${modelDir}/${name}`, 'utf8'));
    } catch {
      return {};
    }
  };
  const ids = new Set();
  const add = (v) => [v].flat().filter(Number.isInteger).forEach((id) => ids.add(id));
  const config = read('config.json');
  add(config.eos_token_id);
  add(config.text_config?.eos_token_id);
  add(read('generation_config.json').eos_token_id);
  for (const [id, t] of Object.entries(read('tokenizer_config.json').added_tokens_decoder ?? {})) {
    if (t.content === '[EOS]' || t.content === '<|end_of_msg|>') ids.add(Number(id));
  }
  if (ids.size === 0) throw new Error(`no stop token ids found in ${modelDir}`);
  return [...ids];
}

// A prompt of about `words` words that shares nothing but its first letter
// with another seed's (so no snapshot or session of an earlier prompt serves
// it), the words distinct so the synthetic tokenizer cuts it evenly.
export function promptText(seed, words) {
  const vocab = ['amber', 'birch', 'cobalt', 'delta', 'ember', 'fjord', 'granite', 'harbor', 'indigo',
    'juniper', 'kestrel', 'lumen', 'meadow', 'nimbus', 'orchid', 'prairie', 'quartz', 'raven'];
  const out = [`Seed ${seed}:`];
  for (let i = 0; i < words; ++i) out.push(`${vocab[(i * 7 + seed) % vocab.length]}${seed}x${i}`);
  return out.join(' ');
}
