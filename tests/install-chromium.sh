#!/usr/bin/env bash
# The HTML report's tests render it in a real browser: the system's Chromium (Debian's and
# Ubuntu's `chromium` package), driven headless by Playwright, which downloads no browser of its
# own. Installs it when it is missing, with apt-get (as root, or through sudo); elsewhere, says
# what to install and fails.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if command -v apt-get >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then as_root=(); else as_root=(sudo); fi
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  exit 0
fi
echo "tests/install-chromium.sh: install Chromium for the HTML report's tests" \
  "(macOS: brew install --cask chromium), then run the tests again" >&2
exit 1
