// What every driver of Debian's headless Chromium shares (drive_viewer.cjs, drive_site.cjs): the flags, the
// config read from argv, the browser's launch and close, and one JSON report on stdout (on a failure, the
// error and the report so far on stderr, exit 1).
//
//   drive(report, async (browser, config) => { ... fill report ... });
"use strict";
const fs = require("fs");
const { chromium } = require("playwright-core");

const ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
  "--disable-sync", "--no-first-run", "--disable-quic", "--disable-dev-shm-usage"];

async function run(report, body) {
  const config = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
  fs.mkdirSync(config.out, { recursive: true });
  const browser = await chromium.launch({ executablePath: config.chromium, args: ARGS, headless: true });
  try {
    await body(browser, config);
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(report));
}

function drive(report, body) {
  run(report, body).catch((err) => {
    process.stderr.write(String(err && err.stack ? err.stack : err) + "\nreport so far: " + JSON.stringify(report) + "\n");
    process.exit(1);
  });
}

module.exports = { drive };
