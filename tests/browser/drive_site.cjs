// Drives Debian's headless Chromium over the built documentation site for tests/integration/test_docs_site.py.
//
//   node drive_site.cjs config.json   ->  one JSON report on stdout
//
// config: {chromium, base (the site's URL: a local HTTP server, or file:///.../site/), home (the home page's URL;
// default: base), out, query, pages: [{label, path, selector}], nav: [href suffixes]}.
// The script opens the home page, types `query` into the search box and reads the results, takes screenshots
// (the search, then the home page), then opens each page and reads its title and whether `selector` is there,
// then, from the home page, clicks each navigation link of `nav` (in the left sidebar) and reads where it
// landed. It records every console error, page error, failed request and request outside `base`; the Python
// test makes the assertions.
"use strict";
const path = require("path");
const { drive } = require("./harness.cjs");

const SEARCH_TIMEOUT = 60000;  // the worker indexes the whole site first: slow on a busy 2-core machine

const report = { errors: [], external_requests: [], pages: [], nav: [], search: null, screenshots: [] };

function watch(page, base, where) {
  page.on("console", (msg) => { if (msg.type() === "error") report.errors.push(`${where} console: ${msg.text()}`); });
  page.on("pageerror", (err) => report.errors.push(`${where} pageerror: ${err.message}`));
  page.on("request", (req) => {
    const url = req.url();
    if (!url.startsWith(base) && !/^(data|blob|about):/.test(url)) report.external_requests.push(url);
  });
  page.on("requestfailed", (req) => report.errors.push(`${where} request failed: ${req.url()}`));
  page.on("response", (res) => { if (res.status() >= 400) report.errors.push(`${where} HTTP ${res.status()}: ${res.url()}`); });
}

drive(report, async (browser, config) => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const home = config.home || config.base;
  const page = await context.newPage();
  watch(page, config.base, "home");
  await page.goto(home, { waitUntil: "networkidle" });

  // the search box: Material's worker indexes search/search_index.json, results appear as the query is typed
  // typed key by key: Material's search listens to the keyboard (page.fill's one input event finds nothing)
  await page.click("input.md-search__input");  // in the header at this width
  await page.keyboard.type(config.query, { delay: 30 });
  await page.waitForFunction(() => document.querySelectorAll(".md-search-result__item").length > 0,
    null, { timeout: SEARCH_TIMEOUT, polling: 250 });
  report.search = await page.evaluate(() => ({
    meta: document.querySelector(".md-search-result__meta").textContent,
    results: [...document.querySelectorAll(".md-search-result__item a")].map((a) => ({
      href: a.getAttribute("href"), text: a.textContent.replace(/\s+/g, " ").trim().slice(0, 200) })),
  }));
  const search = path.join(config.out, "search.png");
  await page.screenshot({ path: search });
  report.screenshots.push(search);
  await page.goto(home, { waitUntil: "networkidle" });
  report.home = await page.evaluate(() => ({ title: document.title, h1: document.querySelector("article h1").textContent }));
  const shot = path.join(config.out, "home.png");
  await page.screenshot({ path: shot });
  report.screenshots.push(shot);
  await page.close();

  for (const want of config.pages) {
    const p = await context.newPage();
    watch(p, config.base, want.label);
    await p.goto(config.base + want.path, { waitUntil: "networkidle" });
    report.pages.push(await p.evaluate((w) => ({
      label: w.label,
      title: document.title,
      h1: (document.querySelector("article h1") || {}).textContent || null,
      found: document.querySelector(w.selector) !== null,
      text_length: (document.querySelector("article") || document.body).innerText.length,
    }), want));
    const file = path.join(config.out, `${want.label}.png`);
    await p.screenshot({ path: file });
    report.screenshots.push(file);
    await p.close();
  }

  for (const suffix of config.nav || []) {
    const p = await context.newPage();
    watch(p, config.base, `nav ${suffix}`);
    await p.goto(home, { waitUntil: "load" });
    const link = p.locator(`.md-sidebar--primary a.md-nav__link[href$="${suffix}"]`).first();
    await Promise.all([p.waitForURL((url) => url.href.endsWith(suffix), { waitUntil: "load" }), link.click()]);
    report.nav.push(await p.evaluate((s) => ({
      suffix: s,
      href: location.href,
      title: document.title,
      h1: (document.querySelector("article h1") || {}).textContent || null,
      text_length: (document.querySelector("article") || document.body).innerText.length,
    }), suffix));
    await p.close();
  }
});
