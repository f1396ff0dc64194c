// End-to-end run of the console in Debian's headless Chromium, driven by playwright-core
// (no browser download). tests/console/test_e2e.py starts the broker and console, prepares a
// consumer group, then runs: node console.e2e.mjs. Settings come from the environment:
// CONSOLE_URL, CONSOLE_PASSWORD, ARTIFACTS (screenshots, downloads), TOPIC, GROUP, GROUP_TOPIC,
// SHARE_GROUP (an empty share group with lag 2 of 6 records).
import { chromium } from "playwright-core";
import { readFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";

const url = process.env.CONSOLE_URL;
const artifacts = process.env.ARTIFACTS;
const topic = process.env.TOPIC;
const group = process.env.GROUP;
const shareGroup = process.env.SHARE_GROUP;
mkdirSync(artifacts, { recursive: true });

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  // Without the networking flags Chromium stalls on a closed network.
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const started = Date.now();
const step = (name) => console.log(`e2e: ${name} (at ${Date.now() - started} ms)`);
let page;
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, acceptDownloads: true });
  page = await context.newPage();
  page.setDefaultTimeout(20000);
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  const shot = (name) => page.screenshot({ path: join(artifacts, `${name}.png`) });

  step("sign in");
  await page.goto(url);
  await page.getByLabel("Password").fill("wrong");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("alert").filter({ hasText: "wrong password" }).waitFor();
  await page.getByLabel("Name (for the audit log)").fill("e2e-user");
  await page.getByLabel("Password").fill(process.env.CONSOLE_PASSWORD);
  await shot("00-sign-in");
  await page.keyboard.press("Enter"); // keyboard: submit the form
  await page.getByRole("heading", { name: "Overview" }).waitFor();
  await page.getByTestId("cluster-status").filter({ hasText: "reachable" }).waitFor();
  await page.getByTestId("broker-0-status").filter({ hasText: "up" }).waitFor();

  step("create a topic");
  // Keyboard only: focus the nav link and press Enter, the same for the button.
  await page.getByRole("link", { name: "Topics" }).focus();
  await page.keyboard.press("Enter");
  await page.getByRole("button", { name: "Create topic" }).focus();
  await page.keyboard.press("Enter");
  await page.getByLabel("Name", { exact: true }).fill(topic);
  await page.getByLabel("Partitions").fill("2");
  await page.getByLabel(/Configs/).fill("retention.ms=86400000");
  await page.getByRole("button", { name: "Create", exact: true }).click();
  await page.getByTestId(`topic-row-${topic}`).waitFor();
  await shot("02-topics");
  await page.getByRole("link", { name: topic, exact: true }).click();
  await page.getByRole("heading", { name: `Topic ${topic}` }).waitFor();
  await page.getByRole("row").filter({ has: page.getByRole("cell", { name: "retention.ms", exact: true }) }).filter({ hasText: "86400000" }).waitFor();
  await shot("03-topic-detail");

  step("produce from the UI, see it in the browser and in live tail");
  await page.getByRole("link", { name: "Browse messages" }).click();
  await page.getByRole("heading", { name: `Messages in ${topic}` }).waitFor();
  await page.getByRole("button", { name: "Start live tail" }).click();
  await page.getByText("following new messages").waitFor();
  await page.getByText("Produce a message").click();
  const produce = page.getByRole("form", { name: "Produce a message" });
  await produce.locator("input[name=key]").fill("order-1");
  await produce.locator("textarea[name=value]").fill('{"item": "kayak", "qty": 2}');
  await produce.locator("textarea[name=headers]").fill("source=e2e");
  await produce.getByRole("button", { name: "Produce" }).click();
  await page.getByText(/Produced to partition \d at offset 0/).waitFor();
  await produce.locator("input[name=key]").fill("order-2");
  await produce.locator("textarea[name=value]").fill('{"item": "paddle", "qty": 1}');
  await produce.getByRole("button", { name: "Produce" }).click();
  await page.getByText(/Produced to partition \d at offset \d/).waitFor();
  await page.getByTestId("live-tail").getByText(/order-1 → .*kayak/).waitFor();
  await page.getByTestId("live-tail").getByText(/order-2 → .*paddle/).waitFor();
  await page.getByRole("button", { name: "Load" }).click();
  await page.getByTestId("message-count").filter({ hasText: "2 messages" }).waitFor();
  await page.getByRole("row").filter({ hasText: "order-1" }).focus(); // rows are focusable
  await page.keyboard.press("Enter");
  await page.getByLabel("Decode").selectOption("json");
  await page.getByRole("complementary", { name: "Selected message" }).getByText("source").waitFor();
  await page.evaluate(() => window.scrollTo(0, 0));
  await shot("04-messages");

  step("filter");
  await page.getByLabel("Filter").fill('value.item == "paddle"');
  await page.getByRole("button", { name: "Load" }).click();
  await page.getByTestId("message-count").filter({ hasText: "1 messages" }).waitFor();
  await page.getByLabel("Filter").fill("value.item ==");
  await page.getByRole("button", { name: "Load" }).click();
  await page.getByRole("alert").filter({ hasText: "filter: expected a field or a value" }).waitFor();
  await shot("05-filter-error");
  await page.getByLabel("Filter").fill('key == "order-2"');
  await page.getByRole("button", { name: "Load" }).click();
  await page.getByTestId("message-count").filter({ hasText: "1 messages" }).waitFor();

  step("export and check the files");
  for (const format of ["json", "csv"]) {
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.getByRole("link", { name: `Export ${format.toUpperCase()}` }).click(),
    ]);
    const path = join(artifacts, `export.${format}`);
    await download.saveAs(path);
    const text = readFileSync(path, "utf-8");
    if (format === "json") {
      const rows = JSON.parse(text);
      if (rows.length !== 1 || rows[0].key !== "order-2" || !rows[0].value.includes("paddle"))
        throw new Error(`bad JSON export: ${text}`);
    } else if (!text.startsWith("topic,partition,offset") || text.trim().split("\n").length !== 2 || !text.includes("order-2")) {
      throw new Error(`bad CSV export: ${text}`);
    }
  }

  step("reset a group's offsets after the preview, see the lag change");
  await page.getByRole("link", { name: "Consumer groups" }).click();
  await page.getByTestId(`group-row-${group}`).getByTestId("group-lag").filter({ hasText: /^3$/ }).waitFor();
  await shot("06-groups");
  await page.getByRole("link", { name: group }).click();
  await page.getByTestId("group-total-lag").filter({ hasText: /^3$/ }).waitFor();
  await page.getByLabel("Reset strategy").selectOption("earliest");
  await page.getByRole("button", { name: "Preview" }).click();
  const preview = page.getByRole("table", { name: "Reset preview" });
  await preview.waitFor();
  await shot("07-group-reset-preview");
  await page.getByTestId("group-total-lag").filter({ hasText: /^3$/ }).waitFor(); // unchanged
  await page.getByRole("button", { name: "Apply reset" }).click();
  await page.getByText("Offsets reset.").waitFor();
  await page.getByTestId("group-total-lag").filter({ hasText: /^8$/ }).waitFor();
  await shot("08-group-after-reset");

  step("a share group: list, detail, reset its start offsets after the preview (keyboard)");
  await page.getByRole("link", { name: "Share groups" }).focus();
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Share groups" }).waitFor();
  await page.getByTestId(`share-row-${shareGroup}`).getByTestId("share-lag").filter({ hasText: /^2$/ }).waitFor();
  await shot("10-share-groups");
  await page.getByRole("link", { name: shareGroup }).focus();
  await page.keyboard.press("Enter");
  await page.getByTestId("share-state").filter({ hasText: "EMPTY" }).waitFor();
  await page.getByTestId("share-total-lag").filter({ hasText: /^2$/ }).waitFor();
  await page.getByLabel("Reset strategy").selectOption("earliest");
  await page.getByRole("button", { name: "Preview" }).focus();
  await page.keyboard.press("Enter");
  await page.getByRole("table", { name: "Reset preview" }).waitFor();
  await shot("11-share-group-reset-preview");
  await page.getByRole("button", { name: "Apply reset" }).focus();
  await page.keyboard.press("Enter");
  await page.getByText("Start offsets reset.").waitFor();
  await page.getByTestId("share-total-lag").filter({ hasText: /^6$/ }).waitFor();
  // The lag-over-time chart drew the samples before (2) and after (6) the reset.
  await page.locator('[data-testid="share-lag-samples"][data-last="6"]').waitFor();
  const samples = Number(await page.getByTestId("share-lag-samples").getAttribute("data-samples"));
  if (samples < 2) throw new Error(`share lag chart has ${samples} samples, expected 2 or more`);
  await page.getByRole("img", { name: /Total lag/ }).locator("canvas").waitFor();
  await shot("12-share-group-lag-chart");

  step("300 messages: only a window of rows in the DOM, the keyboard reaches the last");
  await page.goto(`${url}/#/messages/${encodeURIComponent(process.env.MANY_TOPIC)}`);
  await page.getByLabel("From").selectOption("oldest");
  await page.getByLabel("Limit").fill("300");
  await page.getByRole("button", { name: "Load" }).click();
  await page.getByTestId("message-count").filter({ hasText: /^300 messages/ }).waitFor();
  const inDom = await page.getByTestId("message-row").count();
  if (inDom < 10 || inDom >= 100) throw new Error(`${inDom} rows in the DOM for 300 messages`);
  await page.getByTestId("message-row").first().focus();
  await page.keyboard.press("End");
  await page.locator('tr[data-index="299"]:focus').waitFor();
  await page.keyboard.press("ArrowUp");
  await page.locator('tr[data-index="298"]:focus').waitFor();
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: `${process.env.MANY_TOPIC}/0 @ 298` }).waitFor();
  await shot("13-messages-window");
  // Compact pages carry no base64 for text: the browser encodes it for hex and base64.
  const pane = page.getByRole("complementary", { name: "Selected message" });
  await page.getByLabel("Decode").selectOption("hex");
  await pane.getByText("7b 22 6e 22 3a 20 32 39 38 7d", { exact: true }).waitFor();
  await page.locator('tr[data-index="298"] td', { hasText: "7b 22 6e 22 3a 20 32 39 38 7d" }).waitFor();
  await page.getByLabel("Decode").selectOption("base64");
  await pane.getByText("eyJuIjogMjk4fQ==", { exact: true }).waitFor();
  await page.getByLabel("Decode").selectOption("text");

  step("search the topic list");
  await page.goto(`${url}/#/topics`);
  await page.getByLabel("Search").fill(process.env.MANY_TOPIC);
  await page.getByTestId(`topic-row-${process.env.MANY_TOPIC}`).waitFor();
  if ((await page.locator('[data-testid^="topic-row-"]').count()) !== 1) throw new Error("search kept other topics");

  step("delete the topic with typed confirmation");
  await page.goto(`${url}/#/topics/${encodeURIComponent(topic)}`);
  const del = page.getByRole("button", { name: "Delete topic" });
  if (!(await del.isDisabled())) throw new Error("delete enabled before confirmation");
  await page.getByLabel("Confirm topic name").fill(topic);
  await del.click();
  await page.getByRole("heading", { name: "Topics", exact: true }).waitFor();
  await page.waitForFunction((t) => !document.querySelector(`[data-testid="topic-row-${t}"]`), topic);

  step("overview with live charts and the audit log");
  await page.getByRole("link", { name: "Overview" }).click();
  await page.locator(".chart .u-title").first().waitFor();
  // Charts have lines once a few scrapes arrived.
  await page.getByTestId("chart-points").filter({ hasText: /^([3-9]|\d\d+) samples$/ }).waitFor({ timeout: 30000 });
  await shot("01-overview");
  await page.getByRole("link", { name: "Audit log" }).click();
  for (const action of ["create-topic", "produce", "reset-offsets", "reset-share-offsets", "delete-topic"])
    await page.getByTestId("audit-row").filter({ hasText: action }).filter({ hasText: "e2e-user" }).first().waitFor();
  await shot("09-audit");
  if (errors.length) throw new Error(`page errors: ${errors.join("; ")}`);
  step("done");
} catch (error) {
  if (page) await page.screenshot({ path: join(artifacts, "failure.png") }).catch(() => {});
  console.error(error);
  process.exitCode = 1;
} finally {
  await browser.close();
}
