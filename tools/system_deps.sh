#!/usr/bin/env bash
# Install the Debian packages the course needs, when missing and when we can.
# bubblewrap: the grading sandbox.  g++: the runner's kernel tripwires (autograder/sandbox/kernel_tripwires.py).  chromium + chromium-driver + fonts-noto-cjk: browser tests.
set -euo pipefail
missing=()
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v g++ >/dev/null || missing+=(g++)
command -v chromium >/dev/null || missing+=(chromium chromium-driver)
# CJK fonts, so the Chinese lesson and feedback render in browser screenshots.
fc-list :lang=zh 2>/dev/null | grep -q . || missing+=(fonts-noto-cjk)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing ${missing[*]} (apt-get)"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null && command -v apt-get >/dev/null; then
  sudo apt-get update -qq >/dev/null
  sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "WARNING: missing ${missing[*]}; install them (e.g. sudo apt-get install ${missing[*]})." >&2
  echo "         Without bubblewrap grading runs WITHOUT a sandbox; browser tests are skipped." >&2
fi
