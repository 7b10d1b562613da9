#!/usr/bin/env bash
# Block mode on ext4 through the kernel: see tests/integration/block/mount-check.sh.
FS=ext4 exec bash "$(dirname "$0")/block/mount-check.sh"
