// Drives Debian's headless Chromium over the binding_lens viewer for tests/integration/test_viewer_in_browser.py.
//
//   node drive_viewer.cjs config.json   ->  one JSON report on stdout
//
// config: {chromium, viewer, notebook, circuits, out, patch: [row, col]}. The script opens the viewer
// from file://, clicks a patch, moves the layer slider, switches probe, image and model, reads the
// heatmap canvases' pixels (an FNV-1a hash) and the decoded rows after each step, takes screenshots
// into `out`, then opens the notebook iframe page and the circuitsvis page. It records every console
// error, page error and non-file request; the Python test makes the assertions.
"use strict";
const path = require("path");
const { pathToFileURL } = require("url");
const { drive } = require("./harness.cjs");

const TIMEOUT = 20000;

function watch(page, report, where) {
  page.on("console", (msg) => { if (msg.type() === "error") report.errors.push(`${where} console: ${msg.text()}`); });
  page.on("pageerror", (err) => report.errors.push(`${where} pageerror: ${err.message}`));
  page.on("request", (req) => {
    const url = req.url();
    if (!/^(file|data|blob|about):/.test(url)) report.external_requests.push(url);
  });
  page.on("requestfailed", (req) => report.errors.push(`${where} request failed: ${req.url()}`));
}

// Hash of a canvas's pixels plus how many are not transparent, read inside the page.
function canvasInfo(target, selector) {
  return target.evaluate((sel) => {
    const c = document.querySelector(sel);
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let h = 2166136261, painted = 0;
    for (let i = 0; i < d.length; i++) { h ^= d[i]; h = Math.imul(h, 16777619); }
    for (let i = 3; i < d.length; i += 4) if (d[i] > 0) painted++;
    return { hash: (h >>> 0).toString(16), painted, pixels: c.width * c.height, state: c.dataset.state || "" };
  }, selector);
}

async function snapshot(target, label) {
  const [score, attn] = await Promise.all([canvasInfo(target, "#heat-score"), canvasInfo(target, "#heat-attn")]);
  const view = await target.evaluate(() => {
    const v = window.bindingLensViewer;
    return { state: { ...v.state }, layerLabel: document.getElementById("layer-label").textContent,
             captions: [...document.querySelectorAll(".caption")].map((p) => p.textContent),
             error: document.getElementById("error").hidden ? null : document.getElementById("error").textContent };
  });
  return { label, score, attn, ...view };
}

// Wait until the heatmap shows exactly this (model, image, probe, layer, patch).
async function waitForState(page, expected) {
  await page.waitForFunction((want) => {
    const c = document.querySelector("#heat-score");
    return c && c.dataset.state === want;
  }, expected, { timeout: TIMEOUT });
}

async function rows(page, s) {
  return page.evaluate(async (s) => {
    const v = window.bindingLensViewer;
    const block = s.layer + 1;
    const hasAttn = v.meta.attention[[s.model, s.image, block].join("|")] !== undefined;
    return { key: [s.model, s.image, s.probe, s.layer, s.patch],
             score: await v.scoreRow(s.model, s.image, s.probe, s.layer, s.patch),
             attention: hasAttn ? await v.attentionRow(s.model, s.image, block, s.patch) : null };
  }, s);
}

const report = { errors: [], external_requests: [], steps: [], rows: [], screenshots: [] };

drive(report, async (browser, config) => {
  const shot = async (target, name) => {
    const file = path.join(config.out, name);
    await target.screenshot({ path: file, fullPage: true });
    report.screenshots.push(file);
  };
  const context = await browser.newContext({ viewport: { width: 1180, height: 860 } });
  const page = await context.newPage();
  watch(page, report, "viewer");
  await page.goto(pathToFileURL(config.viewer).href);
  await page.evaluate(() => window.bindingLensViewer.ready);
  report.steps.push(await snapshot(page, "initial"));
  await shot(page, "01-initial.png");

  // Click a patch of the IsSameObject panel: the heatmap follows it and the patch locks.
  const meta = await page.evaluate(() => window.bindingLensViewer.meta);
  const [rowsN, colsN] = meta.models[0].grids[0];
  const [r, c] = config.patch;
  const box = await page.locator("#panel-score canvas.marks").boundingBox();
  await page.mouse.click(box.x + ((c + 0.5) * box.width) / colsN, box.y + ((r + 0.5) * box.height) / rowsN);
  const patch = r * colsN + c;
  let s = await page.evaluate(() => ({ ...window.bindingLensViewer.state }));
  await waitForState(page, [s.model, s.image, s.probe, s.layer, patch].join("|"));
  report.steps.push(await snapshot(page, "clicked"));
  report.rows.push(await rows(page, { ...s, patch }));
  await shot(page, "02-clicked-patch.png");

  // Arrow keys move the locked patch (one row down, then back up).
  await page.keyboard.press("ArrowDown");
  await waitForState(page, [s.model, s.image, s.probe, s.layer, patch + colsN].join("|"));
  report.steps.push(await snapshot(page, "arrow-down"));
  await page.keyboard.press("ArrowUp");
  await waitForState(page, [s.model, s.image, s.probe, s.layer, patch].join("|"));

  // Move the layer slider one step with the keyboard, as a user would.
  const layers = meta.models[0].probes[s.probe];
  await page.focus("#layer");
  await page.keyboard.press("ArrowRight");
  await waitForState(page, [s.model, s.image, s.probe, layers[1], patch].join("|"));
  report.steps.push(await snapshot(page, "next-layer"));
  s = await page.evaluate(() => ({ ...window.bindingLensViewer.state }));
  report.rows.push(await rows(page, s));
  await shot(page, "03-next-layer.png");

  // The last probed layer: no block after it, so the attention panel empties.
  await page.keyboard.press("End");
  await waitForState(page, [s.model, s.image, s.probe, layers[layers.length - 1], patch].join("|"));
  report.steps.push(await snapshot(page, "last-layer"));
  await shot(page, "04-last-layer.png");

  // Switch probe, image and model.
  const probes = Object.keys(meta.models[0].probes);
  if (probes.length > 1) {
    await page.selectOption("#probe", probes[1]);
    s = await page.evaluate(() => ({ ...window.bindingLensViewer.state }));
    await waitForState(page, [0, 0, probes[1], s.layer, s.patch].join("|"));
    report.steps.push(await snapshot(page, "probe"));
    await shot(page, "05-other-probe.png");
  }
  if (meta.images.length > 1) {
    await page.selectOption("#image", "1");
    s = await page.evaluate(() => ({ ...window.bindingLensViewer.state }));
    await waitForState(page, [0, 1, s.probe, s.layer, s.patch].join("|"));
    report.steps.push(await snapshot(page, "image"));
    await shot(page, "06-other-image.png");
  }
  if (meta.models.length > 1) {
    await page.selectOption("#model", "1");
    s = await page.evaluate(() => ({ ...window.bindingLensViewer.state }));
    await waitForState(page, [1, s.image, s.probe, s.layer, s.patch].join("|"));
    report.steps.push(await snapshot(page, "model"));
    report.rows.push(await rows(page, s));
    await shot(page, "07-other-model.png");
  }
  await page.close();

  if (config.notebook) {  // the viewer inside an iframe's srcdoc, as a notebook shows it
    const nb = await context.newPage();
    watch(nb, report, "notebook");
    await nb.goto(pathToFileURL(config.notebook).href);
    const frame = (await (await nb.waitForSelector("iframe")).contentFrame());
    await frame.waitForFunction(() => window.bindingLensViewer !== undefined, null, { timeout: TIMEOUT });
    await frame.evaluate(() => window.bindingLensViewer.ready);
    report.notebook = await snapshot(frame, "notebook");
    await shot(nb, "08-notebook-iframe.png");
    await nb.close();
  }
  if (config.circuits) {  // the circuitsvis page renders offline (its token labels are drawn on a canvas)
    const cv = await context.newPage();
    watch(cv, report, "circuitsvis");
    await cv.goto(pathToFileURL(config.circuits).href);
    await cv.waitForFunction(() => document.body.innerText.includes("Zoomed") && document.querySelector("canvas"),
      null, { timeout: TIMEOUT });
    report.circuits = await cv.evaluate(() => ({
      text: document.body.innerText.slice(0, 2000), canvases: document.querySelectorAll("canvas").length }));
    await shot(cv, "09-circuitsvis.png");
    await cv.close();
  }
});
