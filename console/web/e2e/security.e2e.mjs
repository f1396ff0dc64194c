// The console's Security and Transactions pages against a SASL cluster with the ACL authorizer,
// in Debian's headless Chromium (playwright-core). tests/console/test_security.py starts the
// broker and console and runs: node security.e2e.mjs. Settings from the environment:
// CONSOLE_URL, ARTIFACTS, TOPIC, ADMIN_USER, ADMIN_PASSWORD (a super user), BOB_PASSWORD (a
// user without rights), NEW_USER (a SCRAM user to create, rotate and delete), TXN_TOPIC (holds a
// hanging transaction to abort).
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const env = process.env;
const artifacts = env.ARTIFACTS;
mkdirSync(artifacts, { recursive: true });

const browser = await chromium.launch({
  executablePath: env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const step = (name) => console.log(`security e2e: ${name}`);
let page;
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  page = await context.newPage();
  page.setDefaultTimeout(20000);
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  const shot = (name) => page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: true });
  const signIn = async (user, password) => {
    await page.getByLabel("Kafka user").fill(user);
    await page.getByLabel("Password").fill(password);
    await page.keyboard.press("Enter");
  };
  const goTo = async (label) => {
    await page.getByRole("link", { name: label, exact: true }).focus();
    await page.keyboard.press("Enter");
  };

  step("sign in with Kafka credentials (a wrong password first)");
  await page.goto(env.CONSOLE_URL);
  await signIn(env.ADMIN_USER, "not-the-password");
  await page.getByRole("alert").filter({ hasText: "wrong user name or password" }).waitFor();
  await shot("s0-sign-in");
  await signIn(env.ADMIN_USER, env.ADMIN_PASSWORD);
  await page.getByRole("heading", { name: "Overview" }).waitFor();

  step("ACLs from a template");
  await goTo("Security");
  await page.getByRole("heading", { name: "ACLs" }).waitFor();
  await page.getByTestId("acl-table").waitFor();
  await shot("s1-security-acls");
  const template = page.getByRole("form", { name: "ACL template" });
  await template.getByLabel("Template").selectOption("producer");
  await template.getByLabel("Principal").fill("User:bob");
  await template.getByLabel("Topic", { exact: true }).fill(env.TOPIC);
  await template.getByRole("button", { name: "Preview" }).click();
  await page.getByTestId("template-preview").getByRole("listitem").nth(2).waitFor();
  await template.getByRole("button", { name: "Create ACLs" }).click();
  await page.getByRole("status").filter({ hasText: "Created 3 ACLs." }).waitFor();
  const filters = page.getByRole("form", { name: "ACL filters" });
  await filters.getByLabel("Resource name").fill(env.TOPIC);
  await filters.getByRole("button", { name: "Filter" }).click();
  // The filtered list replaces the whole one: wait for exactly the topic's three rows.
  await page.waitForFunction((topic) => {
    const rows = [...document.querySelectorAll('[data-testid="acl-row"]')];
    return rows.length === 3 && rows.every((r) => r.textContent.includes(topic));
  }, env.TOPIC);
  await shot("s2-acls-created");

  step("one ACL, keyboard only");
  await page.getByText("Create one ACL").focus();
  await page.keyboard.press("Enter"); // opens the form
  await page.keyboard.press("Tab"); // resource type: TOPIC
  await page.keyboard.press("Tab"); // resource name
  await page.keyboard.type(env.TOPIC);
  await page.keyboard.press("Tab"); // pattern: LITERAL
  await page.keyboard.press("Tab"); // principal
  await page.keyboard.type("User:alice");
  for (let i = 0; i < 4; i++) await page.keyboard.press("Tab"); // host, operation READ, ALLOW, the button
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="acl-row"]')]
    .some((r) => r.textContent.includes("User:alice") && r.textContent.includes("READ")));

  step("SCRAM users: create, rotate, delete");
  await page.getByText("Create a user").click();
  const create = page.getByRole("form", { name: "New user" });
  await create.getByLabel("User name").fill(env.NEW_USER);
  await create.getByLabel("Password").fill("first-password");
  await create.getByRole("button", { name: "Create user" }).click();
  await page.getByTestId(`user-row-${env.NEW_USER}`).waitFor();
  await page.getByRole("button", { name: `Rotate password of ${env.NEW_USER}` }).click();
  await page.getByRole("textbox", { name: "New password" }).fill("second-password");
  await page.getByRole("button", { name: "Save password" }).click();
  await page.getByRole("status").filter({ hasText: `Rotated the password of ${env.NEW_USER}.` }).waitFor();
  await shot("s3-users");
  await page.getByRole("button", { name: `Delete user ${env.NEW_USER}` }).click();
  await page.getByRole("textbox", { name: `Type ${env.NEW_USER} to delete` }).fill(env.NEW_USER);
  await page.getByRole("button", { name: "Delete user", exact: true }).click();
  await page.getByRole("status").filter({ hasText: `Deleted user ${env.NEW_USER}.` }).waitFor();
  await page.getByTestId(`user-row-${env.NEW_USER}`).waitFor({ state: "detached" });

  step("transactions page: abort the hanging transaction");
  await goTo("Transactions");
  await page.getByRole("heading", { name: "Transactions" }).waitFor();
  await page.getByRole("button", { name: `Abort the transaction on ${env.TXN_TOPIC}-0` }).click();
  await page.getByRole("button", { name: "Confirm abort" }).click();
  await page.getByRole("status").filter({ hasText: `Aborted the transaction on ${env.TXN_TOPIC}-0` }).waitFor();
  await shot("s4-transactions");

  step("a user without rights sees the refusal in words");
  await page.getByRole("button", { name: "Sign out" }).click();
  await signIn("bob", env.BOB_PASSWORD);
  await page.getByText("· bob").waitFor(); // signed in; the page stays where it was
  await goTo("Security");
  await page.getByRole("alert").filter({ hasText: "You are not allowed to list ACLs (CLUSTER_AUTHORIZATION_FAILED)" }).waitFor();
  await page.getByRole("alert").filter({ hasText: "You are not allowed to describe SCRAM users (CLUSTER_AUTHORIZATION_FAILED)" }).waitFor();
  await shot("s5-denied");

  if (errors.length) throw new Error(`page errors: ${errors.join("; ")}`);
  step("done");
} catch (error) {
  if (page) await page.screenshot({ path: join(artifacts, "failure.png"), fullPage: true }).catch(() => {});
  console.error(error);
  process.exitCode = 1;
} finally {
  await browser.close();
}
