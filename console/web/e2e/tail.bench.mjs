// Browser responsiveness during a live tail of a busy topic, in headless Chromium: the
// Messages page tails TOPIC while PRODUCE_CMD (a shell command, e.g. `tidelog bench produce
// --rate 10000`) runs; meanwhile the page records the gaps between animation frames and the
// long tasks (> 50 ms) the main thread ran, then the shown and skipped counts. Recipe:
// docs/console.md ("Performance").
//   CONSOLE_URL=... CONSOLE_PASSWORD=pw TOPIC=t PRODUCE_CMD='...' node tail.bench.mjs
import { chromium } from "playwright-core";
import { spawn } from "node:child_process";

const { CONSOLE_URL: url, CONSOLE_PASSWORD: password, TOPIC: topic, PRODUCE_CMD: produce } = process.env;
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.setDefaultTimeout(30000);
  await page.goto(url);
  await page.getByLabel("Password").fill(password);
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Overview" }).waitFor();
  await page.goto(`${url}/#/messages/${encodeURIComponent(topic)}`);
  await page.getByRole("button", { name: "Start live tail" }).click();
  await page.getByText(/following new messages/).waitFor();
  await page.evaluate(() => {
    const w = window;
    w.__gaps = [];
    w.__long = [];
    let last = performance.now();
    const frame = (now) => {
      w.__gaps.push(now - last);
      last = now;
      if (!w.__stop) requestAnimationFrame(frame);
    };
    requestAnimationFrame(frame);
    new PerformanceObserver((list) => list.getEntries().forEach((e) => w.__long.push(e.duration)))
      .observe({ type: "longtask" });
  });
  const started = Date.now();
  const producer = spawn("sh", ["-c", produce], { stdio: ["ignore", "ignore", "inherit"] });
  const code = await new Promise((resolve) => producer.on("exit", resolve));
  if (code !== 0) throw new Error(`PRODUCE_CMD exited with ${code}`);
  await page.waitForTimeout(2000); // the last events
  const skippedText = await page.getByText(/following new messages/).textContent();
  const skipped = Number((skippedText.match(/skipped (\d+)/) || [])[1]);
  // An interaction at the end: stopping the tail must answer at once.
  const clickStart = Date.now();
  await page.getByRole("button", { name: "Stop live tail" }).click();
  await page.getByRole("button", { name: "Start live tail" }).waitFor();
  const clickMs = Date.now() - clickStart;
  const r = await page.evaluate(() => {
    const w = window;
    w.__stop = true;
    const gaps = w.__gaps.slice(1).sort((a, b) => a - b);
    return {
      frames: gaps.length,
      gap_p50_ms: gaps[Math.floor(gaps.length * 0.5)],
      gap_p99_ms: gaps[Math.floor(gaps.length * 0.99)],
      gap_max_ms: gaps[gaps.length - 1],
      long_tasks: w.__long.length,
      long_task_max_ms: Math.max(0, ...w.__long),
      long_task_total_ms: w.__long.reduce((a, b) => a + b, 0),
      shown: document.querySelectorAll('[data-testid="live-tail"] li').length,
    };
  });
  const seconds = (Date.now() - started) / 1000;
  console.log(JSON.stringify({ ...r, skipped, seconds, stop_click_ms: clickMs }));
} finally {
  await browser.close();
}
