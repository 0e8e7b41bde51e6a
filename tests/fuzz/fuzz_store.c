/*
 * fuzz_store.c - libFuzzer target for zf_store: each input is an op stream for the
 * interpreter in store_ops.c, which makes a store with the options of the first bytes,
 * runs the ops against it and a shadow model, and aborts on the first disagreement
 * (store_ops.h has the format and the checks).
 *
 * Built twice, like the zpool target: fuzz_store (ZF_FUZZ=ON, clang, -fsanitize=fuzzer,
 * linked with the coverage-instrumented zfolio_fuzzcov, which has the test hooks) and
 * fuzz_replay_store (every build: this file, store_ops.c and fuzz_replay.c's main(),
 * linked with zfolio_testlib for the hooks that corrupt units and fail backing I/O),
 * over corpus/store/.
 *
 * The corpus: seed-* from make_op_seeds (scenarios made with the encoder: split and
 * unit modes, folios of every size over each other, puts in flight, a pool limit with
 * and without writeback, a backing file too small, injected errors, corruption), found-*
 * kept from libFuzzer runs, crash-* for open bugs. Backing files go to an unnamed file in
 * a directory made under $TMPDIR (default /tmp) and removed at exit. Run it as
 * tests/fuzz/README.md says, e.g.
 *
 *   mkdir -p /tmp/store && cp -r tests/fuzz/corpus/store/. /tmp/store/
 *   build/fuzz/tests/fuzz/fuzz_store -max_total_time=600 -timeout=60 -rss_limit_mb=4096 /tmp/store
 *
 * A store holds at most 16 MiB of pages (store_ops.h), and an input moves at most 96 MiB
 * through puts and gets, so an input runs in well under a second.
 */
#include <stddef.h>
#include <stdint.h>

#include "store_ops.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	store_ops_run(data, size);
	return 0;
}
