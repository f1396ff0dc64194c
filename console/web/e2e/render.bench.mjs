// Render timing of the Messages page in headless Chromium: from the API's answer to the rows
// being in the DOM. Run against a console whose TOPIC holds >= LIMIT messages:
//   CONSOLE_URL=http://127.0.0.1:8080 CONSOLE_PASSWORD=pw TOPIC=t LIMIT=1000 node render.bench.mjs
import { chromium } from "playwright-core";

const { CONSOLE_URL: url, CONSOLE_PASSWORD: password, TOPIC: topic } = process.env;
const limit = Number(process.env.LIMIT || 1000);
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
  for (let run = 0; run < 5; run++) {
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
        if (w.__apiDone && document.querySelectorAll('[data-testid="message-row"]').length >= n && !w.__rendered) {
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
  results.sort((a, b) => a - b);
  console.log(`render of ${limit} messages after the API answered: min ${results[0].toFixed(0)} ms, median ${results[2].toFixed(0)} ms, max ${results[4].toFixed(0)} ms`);
} finally {
  await browser.close();
}
