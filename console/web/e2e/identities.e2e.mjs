// Sign-in pages for the per-user identities, in Debian's headless Chromium (playwright-core):
// a console whose users paste an OAuth bearer token (OAUTHBEARER), and one whose users sign in
// to their client certificate (tls_users). tests/console/test_oauthbearer.py starts the broker
// and both consoles, then runs: node identities.e2e.mjs. Settings from the environment:
// OAUTH_URL, TOKEN (a valid token for carol), BAD_TOKEN (signed by a key the broker does not
// know), TLS_URL, TLS_USER, TLS_PASSWORD, ARTIFACTS.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const env = process.env;
mkdirSync(env.ARTIFACTS, { recursive: true });
const browser = await chromium.launch({
  executablePath: env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
let page;
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  page = await context.newPage();
  page.setDefaultTimeout(20000);
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  const shot = (name) => page.screenshot({ path: join(env.ARTIFACTS, `${name}.png`) });

  console.log("identities e2e: a token, pasted");
  await page.goto(env.OAUTH_URL);
  const tokenBox = page.getByLabel("Token");
  await tokenBox.fill(env.BAD_TOKEN);
  await page.keyboard.press("Tab");
  await page.keyboard.press("Enter");
  await page.getByRole("alert").filter({ hasText: "wrong token" }).waitFor();
  await shot("00-token-refused");
  await tokenBox.fill(env.TOKEN);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Overview" }).waitFor();
  await page.getByText(/· carol$/).first().waitFor();
  await shot("01-token-signed-in");

  console.log("identities e2e: a console user with a client certificate");
  await page.goto(env.TLS_URL);
  await page.getByLabel("Console user").fill(env.TLS_USER);
  await page.getByLabel("Password").fill("wrong");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("alert").filter({ hasText: "wrong user name or password" }).waitFor();
  await page.getByLabel("Password").fill(env.TLS_PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Overview" }).waitFor();
  await shot("02-certificate-signed-in");
  if (errors.length) throw new Error(`page errors: ${errors.join("; ")}`);
  console.log("identities e2e: done");
} catch (error) {
  if (page) await page.screenshot({ path: join(env.ARTIFACTS, "failure.png") }).catch(() => {});
  throw error;
} finally {
  await browser.close();
}
