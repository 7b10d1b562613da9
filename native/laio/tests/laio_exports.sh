#!/usr/bin/env bash
# liblaio.so must export exactly the LAIO API of <laio/laio.h> (version script
# + -fvisibility=hidden), all at version LAIO_1: anything else could clash with
# the program using it. Checks the variant under test and build/liblaio.so.
set -eu
want="laio_backend@@LAIO_1 laio_gethandle@@LAIO_1 laio_poll@@LAIO_1 laio_syscall@@LAIO_1"
status=0
for lib in "$LCP_TEST_BUILD/native/$LCP_TEST_VARIANT/lib/liblaio.so" "$LCP_TEST_BUILD/liblaio.so"; do
  got=$(nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' | LC_ALL=C sort | tr '\n' ' ')
  if [ "$got" != "$want " ]; then
    echo "FAIL: $lib exports [$got], want [$want]"
    status=1
  fi
done
exit $status
