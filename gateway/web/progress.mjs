// The line a reply shows while it has no text yet, from the gateway's
// progress comments (parsed by chat_api.mjs): "waiting in line (2 ahead)",
// "reading your prompt: 3,200 of 10,000 tokens, about 14 min left". At the
// real model's speed a long prompt takes minutes to hours to read, and this
// line is how a user tells a slow service from a dead one. No DOM here.
// k3ctl chat prints the same words (tools/k3ctl/chat_progress.cpp).

// 10000 -> "10,000" (the same in every locale, as k3ctl prints it).
export function formatCount(n) {
  return String(Math.trunc(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

// A time left, rounded to what a person reads: "45 s" under a minute, "14 min"
// under an hour (never "0 min"), then "2 h 5 min" (or "3 h").
export function formatDuration(seconds) {
  const s = Math.max(1, Math.round(seconds));
  if (s < 60) return `${s} s`;
  const minutes = Math.round(s / 60);
  if (minutes < 60) return `${minutes} min`;
  const h = Math.floor(minutes / 60);
  const m = minutes % 60;
  return m === 0 ? `${h} h` : `${h} h ${m} min`;
}

// The words for a progress report (docs/openai-api.md): {queued: N}, N the
// place in the gateway's queue (1 = next to run), or {done, total, etaS}
// (etaS negative or absent: no rate measured yet; 0 of 0: admitted, before
// engined's first report). '' for anything else.
export function progressText(p) {
  if (!p) return '';
  if (Number.isInteger(p.queued) && p.queued > 0) {
    return p.queued === 1 ? 'waiting in line (next)' : `waiting in line (${formatCount(p.queued - 1)} ahead)`;
  }
  if (!Number.isInteger(p.done) || !Number.isInteger(p.total)) return '';
  if (p.total === 0) return 'starting';
  let text = `reading your prompt: ${formatCount(p.done)} of ${formatCount(p.total)} tokens`;
  if (p.done < p.total && Number.isFinite(p.etaS) && p.etaS >= 0) {
    text += `, about ${formatDuration(p.etaS)} left`;
  }
  return text;
}
