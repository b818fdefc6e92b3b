#!/usr/bin/env bash
# The browser test (tests/test_browser.py) drives Debian's Chromium with Playwright.
# Install Chromium if it is missing and this user may: as root, or with password-less sudo.
# Elsewhere, say how; the browser test then reports itself skipped.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "note: no chromium and no apt-get here: the browser test will be skipped. Install Chromium to run it."
    exit 0
fi
if [ "$(id -u)" = "0" ]; then
    SUDO=()
elif sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
else
    echo "note: no chromium here: the browser test will be skipped. To run it: sudo apt-get install chromium"
    exit 0
fi
echo "==> installing Debian's chromium for the browser test"
export DEBIAN_FRONTEND=noninteractive
if ! "${SUDO[@]}" apt-get install -y -q --no-install-recommends chromium >/dev/null; then
    "${SUDO[@]}" apt-get update -q >/dev/null
    "${SUDO[@]}" apt-get install -y -q --no-install-recommends chromium >/dev/null
fi
command -v chromium >/dev/null
