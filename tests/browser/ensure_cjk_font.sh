#!/usr/bin/env bash
# Make sure Chromium can draw Chinese: the zh-CN browser test checks that headings render
# with a CJK font (without one, Chromium draws boxes). Debian's fonts-noto-cjk is
# installed with apt-get when we are root and no Chinese font is there; otherwise we say
# what to do. Usage: ensure_cjk_font.sh
set -euo pipefail

has_cjk_font() {
    command -v fc-list >/dev/null && [ -n "$(fc-list :lang=zh family 2>/dev/null)" ]
}

if has_cjk_font; then
    exit 0
fi

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "make test-browser: no Chinese font; installing Debian's fonts-noto-cjk with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends fonts-noto-cjk fontconfig
    if has_cjk_font; then
        echo "make test-browser: installed $(dpkg-query -W -f '${Package} ${Version}' fonts-noto-cjk)"
        exit 0
    fi
    echo "make test-browser: apt-get installed fonts-noto-cjk, but fc-list finds no Chinese font." >&2
    exit 1
fi

cat >&2 <<EOF
make test-browser needs a Chinese (CJK) font for the zh-CN notebook, and none is installed.
  - On Debian or Ubuntu: sudo apt-get install fonts-noto-cjk   (then run make test-browser again)
  - Or run make test-browser as root on a Debian-like machine: it installs the font itself.
EOF
exit 1
