/*
 * fuzz_backing.c - libFuzzer target for the backing tier (src/backing/backing.h): each
 * input is an op stream for the interpreter in backing_ops.c, which opens a backing file
 * with the options of the first bytes, allocates, frees, writes and reads slots against
 * a model of the file and its slot bitmap, and aborts on the first disagreement
 * (backing_ops.h has the format and the checks).
 *
 * backing.h is internal: these targets reach it through the static libraries, which
 * keep every symbol (only libzfolio.so hides them). fuzz_backing (ZF_FUZZ=ON) links the
 * coverage-instrumented zfolio_fuzzcov, fuzz_replay_backing (every build) links
 * zfolio_testlib; both have the backing_inject_error() test hook.
 *
 * The corpus: seed-* from make_op_seeds, found-*, crash-* (tests/fuzz/README.md). The
 * files go to a directory made under $TMPDIR (default /tmp), removed at exit:
 *
 *   mkdir -p /tmp/backing && cp -r tests/fuzz/corpus/backing/. /tmp/backing/
 *   build/fuzz/tests/fuzz/fuzz_backing -max_total_time=600 -timeout=60 /tmp/backing
 *
 * The file is at most 8 MiB, and an input moves at most 64 MiB.
 */
#include <stddef.h>
#include <stdint.h>

#include "backing_ops.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	backing_ops_run(data, size);
	return 0;
}
