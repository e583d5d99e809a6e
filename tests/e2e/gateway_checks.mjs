// What the e2e scripts share: a chat call on the gateway's OpenAI API and a
// PASS/FAIL line per check, the exit code remembering any failure.
let failures = 0;

export function check(ok, what) {
  console.log(`${ok ? "PASS" : "FAIL"} ${what}`);
  if (!ok) failures = 1;
}

// Exits 1 when any check failed.
export function finish() {
  process.exit(failures);
}

// POST /v1/chat/completions on HOST:PORT: the status and the parsed body.
export async function chat(hostPort, body) {
  const r = await fetch(`http://${hostPort}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: r.status, json: await r.json() };
}
