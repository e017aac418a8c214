#!/usr/bin/env bash
# Make the viewer's browser test runnable: Debian's Chromium at $CHROMIUM (default /usr/bin/chromium)
# and playwright-core (pinned in tests/browser/package-lock.json) in tests/browser/node_modules.
# Only the distribution's chromium package is installed (apt, as root); no browser build is ever
# downloaded (PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1, npm --ignore-scripts).
# Exit status: 0 ready; 3 cannot be made ready here (not root, no apt-get or no npm), with the reason on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"

if [ ! -x "$CHROMIUM" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "ensure_browser: $CHROMIUM is missing and installing it needs root (apt-get install chromium)" >&2
    exit 3
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure_browser: $CHROMIUM is missing and there is no apt-get to install Debian's chromium" >&2
    exit 3
  fi
  echo "ensure_browser: installing Debian's chromium (apt-get)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium >/dev/null
fi

if [ ! -f tests/browser/node_modules/playwright-core/package.json ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "ensure_browser: playwright-core is not installed in tests/browser and there is no npm to install it" >&2
    exit 3
  fi
  echo "ensure_browser: installing playwright-core from tests/browser/package-lock.json (npm ci)" >&2
  (cd tests/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
"$CHROMIUM" --version >&2
