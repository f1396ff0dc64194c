// Render timing of the Messages page in headless Chromium: from the API's answer to the page
// showing them (the count says LIMIT messages and the first rows are in the DOM), then the
// next paint. Run against a console whose TOPIC holds >= LIMIT messages (bench/console_bench.py
// render does all of it):
//   CONSOLE_URL=http://127.0.0.1:8080 CONSOLE_PASSWORD=pw TOPIC=t LIMIT=1000 RUNS=20 node render.bench.mjs
// Prints one line of words, then one JSON line {"render_ms": [...every run...]}.
import { chromium } from "playwright-core";

const { CONSOLE_URL: url, CONSOLE_PASSWORD: password, TOPIC: topic } = process.env;
const limit = Number(process.env.LIMIT || 1000);
const runs = Number(process.env.RUNS || 5);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.goto(url);
  await page.getByLabel("Password").fill(password);
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Overview" }).waitFor();
  await page.goto(`${url}/#/messages/${encodeURIComponent(topic)}`);
  await page.getByTestId("message-count").waitFor();
  await page.getByLabel("From").selectOption("oldest");
  await page.getByLabel("Limit").fill(String(limit));
  const results = [];
  for (let run = 0; run < runs; run++) {
    // Down to one row first, so each run renders every row anew.
    await page.getByLabel("Limit").fill("1");
    await page.getByRole("button", { name: "Load" }).click();
    await page.getByTestId("message-count").filter({ hasText: /^1 messages/ }).waitFor();
    await page.getByLabel("Limit").fill(String(limit));
    await page.evaluate((n) => {
      const w = window;
      w.__apiDone = 0;
      w.__rendered = 0;
      const original = w.__origFetch || (w.__origFetch = w.fetch);
      w.fetch = async (...args) => {
        const response = await original(...args);
        const text = await response.text();
        if (String(args[0]).includes("/messages?")) w.__apiDone = performance.now();
        return new Response(text, { status: response.status, headers: response.headers });
      };
      const observer = new MutationObserver(() => {
        const count = document.querySelector('[data-testid="message-count"]');
        if (w.__apiDone && !w.__rendered && count && count.textContent.startsWith(`${n} messages`) &&
            document.querySelectorAll('[data-testid="message-row"]').length >= Math.min(n, 20)) {
          // After the next paint: what the user sees.
          requestAnimationFrame(() => setTimeout(() => (w.__rendered = performance.now()), 0));
          observer.disconnect();
        }
      });
      observer.observe(document.body, { childList: true, subtree: true });
    }, limit);
    await page.getByRole("button", { name: "Load" }).click();
    await page.waitForFunction(() => window.__rendered > 0, null, { timeout: 60000 });
    results.push(await page.evaluate(() => window.__rendered - window.__apiDone));
  }
  const sorted = [...results].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.round(q * (sorted.length - 1)))];
  console.log(`render of ${limit} messages after the API answered, ${runs} runs: min ${at(0).toFixed(0)} ms, median ${at(0.5).toFixed(0)} ms, p95 ${at(0.95).toFixed(0)} ms, max ${at(1).toFixed(0)} ms`);
  console.log(JSON.stringify({ render_ms: results.map((r) => Math.round(r * 10) / 10) }));
} finally {
  await browser.close();
}
