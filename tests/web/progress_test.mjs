// The progress line of a reply before its first text (gateway/web/progress.mjs)
// under node:test: counts with thousands separators, times left as a person
// reads them, and the words for each phase.
//   node --test tests/web/progress_test.mjs
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { formatCount, formatDuration, progressText } from '../../gateway/web/progress.mjs';

test('counts: thousands separators whatever the locale', () => {
  assert.equal(formatCount(0), '0');
  assert.equal(formatCount(999), '999');
  assert.equal(formatCount(1000), '1,000');
  assert.equal(formatCount(3200), '3,200');
  assert.equal(formatCount(1234567), '1,234,567');
});

test('durations: seconds, then minutes, then hours and minutes', () => {
  assert.equal(formatDuration(0), '1 s');
  assert.equal(formatDuration(0.4), '1 s');
  assert.equal(formatDuration(44.6), '45 s');
  assert.equal(formatDuration(59.4), '59 s');
  assert.equal(formatDuration(60), '1 min');
  assert.equal(formatDuration(89), '1 min');
  assert.equal(formatDuration(91), '2 min');
  assert.equal(formatDuration(14 * 60 + 10), '14 min');
  assert.equal(formatDuration(3569), '59 min');
  assert.equal(formatDuration(3590), '1 h');
  assert.equal(formatDuration(2 * 3600 + 5 * 60 + 10), '2 h 5 min');
  assert.equal(formatDuration(26 * 3600), '26 h');
});

test('the words: queued, reading the prompt with and without a time left', () => {
  // `: queued N`: N is the place in line, 1 = next to run.
  assert.equal(progressText({ queued: 1 }), 'waiting in line (next)');
  assert.equal(progressText({ queued: 2 }), 'waiting in line (1 ahead)');
  assert.equal(progressText({ queued: 1201 }), 'waiting in line (1,200 ahead)');
  assert.equal(progressText({ queued: 0 }), '');
  // Admitted, engined has not reported yet (gRPC's 0/0).
  assert.equal(progressText({ done: 0, total: 0 }), 'starting');
  assert.equal(progressText({ done: 3200, total: 10000, etaS: 14 * 60 }),
    'reading your prompt: 3,200 of 10,000 tokens, about 14 min left');
  // No measured rate yet (negative, or absent): no time left is guessed.
  assert.equal(progressText({ done: 0, total: 10000, etaS: -1 }), 'reading your prompt: 0 of 10,000 tokens');
  assert.equal(progressText({ done: 0, total: 512 }), 'reading your prompt: 0 of 512 tokens');
  // Read: the answer is about to start.
  assert.equal(progressText({ done: 512, total: 512, etaS: 0 }), 'reading your prompt: 512 of 512 tokens');
  assert.equal(progressText(null), '');
  assert.equal(progressText(undefined), '');
  assert.equal(progressText({}), '');
});
