// The e2e scripts' minimal runner: every check runs, failures are collected,
// one line per check, then "N passed, N failed" and exit 1 on a failure.
export class CheckError extends Error {}

export function check(cond, message) {
  if (!cond) throw new CheckError(message);
}

// A value for a failure message, cut at `limit` characters.
export function show(value, limit = 400) {
  const s = JSON.stringify(value);
  return s && s.length > limit ? `${s.slice(0, limit)}...` : s;
}

let passed = 0;
let failed = 0;

export async function step(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`PASS ${name}`);
  } catch (e) {
    failed++;
    const what = e instanceof CheckError ? e.message : `${e.constructor.name}: ${e.message}`;
    console.log(`FAIL ${name}: ${what}`);
  }
}

// Prints the counts and exits: 1 when a check failed.
export function finish() {
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}
