// Drives the web console in Debian's headless Chromium with playwright-core (tests/integration/suite_console.py).
//   node console_test.mjs SCENARIO BASE_URL OUT_DIR [ARGS_JSON]
// Prints one JSON object (what the scenario saw) on stdout; the Python suite asserts on it. Every console message of
// type error, every uncaught page error and every answer >= 400 is listed in "errors" (the suite decides which are
// expected). Screenshots go to OUT_DIR. Every wait is bounded.
import {chromium} from 'playwright-core';
import path from 'node:path';

const [scenario, base, out, argsJson] = process.argv.slice(2);
const args = argsJson ? JSON.parse(argsJson) : {};
const WAIT = {timeout: 30000};

const result = {errors: [], screenshots: []};

// Each scenario fills `result` with what the suite checks.
const SCENARIOS = {
  // Every page renders (its landmark element appears); a screenshot of each.
  async pages({page, shot, open}) {
    result.pages = {};
    for (const [name, hash, selector] of args.pages) {
      await open(hash, selector);
      await page.waitForTimeout(0);
      result.pages[name] = await page.textContent('#main');
      await shot(name);
    }
  },
  // The try-it form of args.model: the numbers in args.values into input args.input; the answer shown.
  async tryit({page, shot, open}) {
    await open('#/model/' + args.model, '#tryit-submit');
    await page.fill('#tryit-input-' + args.input, args.values.join(', '));
    await page.click('#tryit-submit');
    const output = await page.waitForSelector('#tryit-output-' + args.output, WAIT);
    result.values = JSON.parse(await output.getAttribute('data-values'));
    result.top1 = await output.getAttribute('data-top1');
    result.latency = await page.textContent('#tryit-latency');
    result.version = await page.getAttribute('#tryit-result', 'data-version');
    await shot('tryit');
  },
  // The try-it form of args.model with the image file args.file uploaded for input args.input (pixels 0..1).
  async image({page, shot, open}) {
    await open('#/model/' + args.model, '#tryit-submit');
    await page.setInputFiles('#tryit-input-' + args.input + '-image', args.file);
    await page.click('#tryit-submit');
    const output = await page.waitForSelector('#tryit-output-' + args.output, WAIT);
    result.values = JSON.parse(await output.getAttribute('data-values'));
    result.top1 = await output.getAttribute('data-top1');
    await shot('image');
  },
  // On-demand residency: the page of a model that is not resident loads it only when asked.
  async ondemand({page, shot, open}) {
    await open('#/model/' + args.model, '#tryit-load');
    result.before = await page.textContent('#main');
    await page.click('#tryit-load');
    await page.waitForSelector('#tryit-submit', WAIT);
    result.after = await page.textContent('#versions-table');
    await shot('ondemand');
  },
  // The chat playground of args.model: one message, greedy; the streamed answer and how many chunks it came in.
  async chat({page, shot, open}) {
    await open('#/model/' + args.model, '#chat-send');
    await page.fill('#chat-temperature', '0');
    await page.fill('#chat-max-tokens', String(args.max_tokens));
    await page.fill('#chat-input', args.message);
    // Count the answer's visible updates as they happen (a streamed answer changes many times before it is done).
    await page.evaluate(() => {
      window.__updates = 0;
      new MutationObserver(() => { window.__updates++; }).observe(document.getElementById('chat-log'),
        {subtree: true, childList: true, characterData: true});
    });
    await page.click('#chat-send');
    await page.waitForSelector('.msg.assistant[data-done="true"]', WAIT);
    result.text = await page.textContent('.msg.assistant .answer');
    result.chunks = Number(await page.getAttribute('.msg.assistant', 'data-chunks'));
    result.updates = await page.evaluate(() => window.__updates);
    result.stats = await page.textContent('#chat-stats');
    await shot('chat');
  },
  // Roll back args.model through the console (with args.token when given; without it the page shows why not).
  async rollback({page, shot, open, useToken}) {
    await open('#/model/' + args.model, '#rollback, .error');
    if (args.token) await useToken(args.token);
    if (!args.token) {
      result.status = await page.textContent('#main');
      result.banner = await page.textContent('#banner');
      result.has_button = (await page.$('#rollback')) !== null;
      await shot('no-token');
      return;
    }
    await page.waitForSelector('#rollback', WAIT);
    await page.click('#rollback');
    await page.click('#rollback-confirm');
    await page.waitForSelector('#action-status .done, #action-status .error', WAIT);
    result.status = await page.textContent('#action-status');
    result.versions = await page.textContent('#versions-table');
    await shot('rollback');
  },
  // --auth-all-routes: the console asks for the token, then works with it.
  async auth({page, shot, useToken}) {
    await page.goto(base + '/console/');
    await page.waitForSelector('#main p', WAIT);
    result.before = await page.textContent('#main');
    await useToken(args.token);
    await page.waitForSelector('#models-table', WAIT);
    result.after = await page.textContent('#models-table');
    result.stored = await page.evaluate(() => Object.keys(sessionStorage));
    result.visible_token = (await page.content()).includes(args.token);
    await shot('auth');
  },
};

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  // No sandbox as root (CI); nothing reaches out of the machine (its network is closed).
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  timeout: 60000,
});
try {
  const context = await browser.newContext({viewport: {width: 1280, height: 900}});
  const page = await context.newPage();
  page.setDefaultTimeout(30000);
  page.on('console', (m) => { if (m.type() === 'error') result.errors.push('console: ' + m.text()); });
  page.on('pageerror', (e) => result.errors.push('page: ' + e.message));
  page.on('response', (r) => { if (r.status() >= 400) result.errors.push('http ' + r.status() + ' ' + r.url()); });
  const shot = async (name) => {
    const file = path.join(out, name + '.png');
    await page.screenshot({path: file, fullPage: true});
    result.screenshots.push(file);
  };
  // What went wrong before the token was given is kept apart (errors_before_token): a page opened without it is
  // refused (401) by design.
  const useToken = async (t) => {
    result.errors_before_token = result.errors.splice(0);
    await page.click('#token-button');
    await page.fill('#token-input', t);
    await page.click('#token-save');
  };
  const open = async (hash, selector) => {
    await page.goto(base + '/console/' + hash);
    await page.waitForSelector(selector, WAIT);
  };
  await SCENARIOS[scenario]({page, shot, useToken, open});
} catch (e) {
  result.failure = String(e && e.stack || e);
} finally {
  await browser.close();
}
console.log(JSON.stringify(result));
