#!/bin/bash
# The session-30 device calls r3-r5, as they ran from the repository root (bundle in .gpubundle/,
# gpu-env.sh in .gpu/); each call was one of the blocks below.
. bench/gpu-setup.sh >/dev/null 2>&1
# r3: test_model whole -> test-model.txt (its mma-units run failed; fixed in 593fce2)
(cd build-gpu/tests && timeout 400 ./test_model) > $OUT/test-model.txt 2>&1
# r4: -> test-mma-parts.txt
native_limited 120 mma-units mma-tiny mma mma-wide
# r5: -> test-mma-units.txt
native_limited 420 mma-units
