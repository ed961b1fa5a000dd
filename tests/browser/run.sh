#!/usr/bin/env bash
# The report's real-browser test: installs Debian's Chromium (apt-get) when it is missing,
# writes RESULTS/index.html with `dplab report`, opens it headless and checks it
# (tests/browser/check-report.mjs). Fails loudly when Chromium cannot be had: it never passes
# without having opened the page.
#
# Usage: tests/browser/run.sh RESULTS [PIPELINES]   (from the repository root; `make browser-test`)
set -euo pipefail
results=${1:?usage: tests/browser/run.sh RESULTS [PIPELINES]}
pipelines=${2:-pipelines}
dplab=${DPLAB:-target/release/dplab}
chromium=${CHROMIUM:-/usr/bin/chromium}
work=target/browser-test

if [ ! -x "$chromium" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "browser test: installing Debian's chromium with apt-get"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
  fi
fi
if [ ! -x "$chromium" ]; then
  echo "FAIL: browser test: no Chromium at $chromium and it could not be installed (apt-get install chromium, as root)" >&2
  exit 1
fi
"$chromium" --version
for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "FAIL: browser test: $tool is not installed" >&2; exit 1; }
done
[ -d "$results" ] || { echo "FAIL: browser test: no results directory $results (run the ci profile first)" >&2; exit 1; }

# The checker's packages, pinned by tests/browser/package-lock.json, installed outside the source tree.
mkdir -p "$work"
cp tests/browser/package.json tests/browser/package-lock.json tests/browser/check-report.mjs "$work/"
(cd "$work" && npm ci --no-audit --no-fund --loglevel=error)

# Exit 1 from `dplab report` means damage in the results: the page is written and the checker says what.
status=0
"$dplab" report "$results" --pipelines "$pipelines" || status=$?
if [ "$status" -ne 0 ]; then
  echo "FAIL: dplab report exited with $status" >&2
  exit 1
fi
CHROMIUM="$chromium" node "$work/check-report.mjs" "$results" "$pipelines" "$(pwd)/target/report-screenshot.png"
