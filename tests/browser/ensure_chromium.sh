#!/usr/bin/env bash
# Make sure the browser that `make test-browser` drives is there.
#
# Playwright's own browser download is not used (it is not available on every
# machine): the tests drive Debian's `chromium` package. If the executable is
# missing, install it with apt-get when we are root; otherwise say what to do.
# Usage: ensure_chromium.sh [PATH]   (default /usr/bin/chromium)
set -euo pipefail
chromium="${1:-/usr/bin/chromium}"

if [ -x "$chromium" ]; then
    exit 0
fi

if [ "$chromium" != /usr/bin/chromium ]; then
    echo "make test-browser: CHROMIUM=$chromium does not exist or is not executable." >&2
    exit 1
fi

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "make test-browser: /usr/bin/chromium is missing; installing Debian's chromium with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends chromium
    if [ -x "$chromium" ]; then
        echo "make test-browser: installed $(dpkg-query -W -f '${Package} ${Version}' chromium)"
        exit 0
    fi
    echo "make test-browser: apt-get installed chromium, but $chromium is still missing." >&2
    exit 1
fi

cat >&2 <<EOF
make test-browser needs a Chromium browser at $chromium, and it is missing.
  - On Debian or Ubuntu: sudo apt-get install chromium   (then run make test-browser again)
  - Or run make test-browser as root on a Debian-like machine: it installs chromium itself.
  - Or point it at a Chromium or Chrome you have: make test-browser CHROMIUM=/path/to/chromium
(Playwright's own browser download is not used by this course.)
EOF
exit 1
