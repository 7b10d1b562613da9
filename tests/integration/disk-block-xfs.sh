#!/usr/bin/env bash
# Block mode on xfs through the kernel: see tests/integration/block/mount-check.sh.
# Skips when mkfs.xfs is missing (Debian package xfsprogs, scripts/bootstrap).
FS=xfs exec bash "$(dirname "$0")/block/mount-check.sh"
