#!/usr/bin/env bash
# Installs Debian's headless-capable `chromium`, which the report test uses to render report.html and
# screenshot it (a self-contained HTML file is only proven self-contained by a real browser loading it).
# Idempotent: does nothing when /usr/bin/chromium is already there. Needs root (or sudo) and apt-get.
# Not part of set-up: `make browser` runs it; `make test` runs it with --if-possible (sudo never prompts, and a
# failure is a note, exit 0: the report's browser tests then skip, saying why).
set -euo pipefail

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}

if [ "${1:-}" = "--if-possible" ]; then
  if ! SUDO_FLAGS=-n bash "$0"; then
    echo "install-chromium: no Chromium; the report's headless-browser tests will skip (\`make browser\` as root)" >&2
  fi
  exit 0
fi
if [ -x "$CHROMIUM" ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-chromium: apt-get not found; install Chromium by hand so that $CHROMIUM exists" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "install-chromium: not root and no sudo; run as root: apt-get install chromium" >&2
    exit 1
  fi
  SUDO="sudo ${SUDO_FLAGS:-}"
fi

echo "install-chromium: installing Debian's chromium (headless report check)" >&2
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1; then
  # A fresh image may have empty package lists: refresh once, then try again (showing errors this time).
  $SUDO apt-get update -qq >/dev/null
  $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
if [ ! -x "$CHROMIUM" ]; then
  echo "install-chromium: apt-get finished but $CHROMIUM is still missing" >&2
  exit 1
fi
echo "install-chromium: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM installed")" >&2
