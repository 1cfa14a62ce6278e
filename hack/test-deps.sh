#!/usr/bin/env bash
# Installs what the test suites need beyond Go, when missing: e2fsprogs (mkfs.ext4) and util-linux
# (mount, losetup, findmnt) for the full-disk and read-only data-dir suites in test/disk.
set -euo pipefail
missing=()
command -v mkfs.ext4 >/dev/null 2>&1 || missing+=(e2fsprogs)
{ command -v mount >/dev/null 2>&1 && command -v findmnt >/dev/null 2>&1; } || missing+=(util-linux mount)
if [ ${#missing[@]} -gt 0 ]; then
  echo "test-deps: installing ${missing[*]}"
  if [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq && apt-get install -y -qq "${missing[@]}"
  else
    sudo apt-get update -qq && sudo apt-get install -y -qq "${missing[@]}"
  fi
fi
