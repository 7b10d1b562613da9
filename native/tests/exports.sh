#!/usr/bin/env bash
# The shim must export exactly the interposed libc functions (version script
# + -fvisibility=hidden): anything else could clash with the host program.
# Checks both the build under test and the installed-path build/libdeception.so.
set -eu
expected="__open64_2 __open_2 __openat64_2 __openat_2 __pread64_chk __pread_chk __read_chk
close fork mmap mmap64 open open64 openat openat64 pread pread64 preadv preadv2 preadv64
preadv64v2 read readv sendfile sendfile64"
want=$(echo $expected | tr ' ' '\n' | LC_ALL=C sort)
status=0
for lib in "$LCP_TEST_SHIM" "$LCP_TEST_BUILD/libdeception.so"; do
  got=$(nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | LC_ALL=C sort)
  if [ "$got" != "$want" ]; then
    echo "FAIL: $lib exports differ from the interposed list:"
    diff <(echo "$want") <(echo "$got") || true
    status=1
  fi
  # Unversioned: a versioned definition would not bind GLIBC_* references.
  if nm -D --defined-only "$lib" | grep -q '@'; then
    echo "FAIL: $lib exports versioned symbols"; status=1
  fi
done
exit $status
