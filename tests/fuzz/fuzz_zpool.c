/*
 * fuzz_zpool.c - libFuzzer target for zf_pool: each input is an op stream for the
 * interpreter in zpool_ops.c, which runs it against a fresh pool and a shadow model and
 * aborts on the first disagreement (zpool_ops.h has the format and the checks).
 *
 * Built twice, like the codec targets: fuzz_zpool (ZF_FUZZ=ON, clang, -fsanitize=fuzzer,
 * linked with the coverage-instrumented zfolio_fuzzcov so that libFuzzer sees src/zpool's
 * branches) and fuzz_replay_zpool (every build: this file, zpool_ops.c and fuzz_replay.c's
 * main(), over corpus/zpool/).
 *
 * The corpus: seed-* from `test_zpool_model --seeds DIR` (scenarios made with the
 * encoder: fill, fragment and compact; pinned compaction; class edges; 2 MiB units; calls
 * that must be refused), found-* kept from libFuzzer runs, crash-* for open bugs.
 * Run it as tests/fuzz/README.md says for the codecs, e.g.
 *
 *   mkdir -p /tmp/zpool && cp -r tests/fuzz/corpus/zpool/. /tmp/zpool/
 *   build/fuzz/tests/fuzz/fuzz_zpool -max_total_time=600 -timeout=30 -rss_limit_mb=2048 /tmp/zpool
 *
 * A pool and its 64 MiB arena are made and destroyed per input; the model caps live
 * objects at 32 MiB, so rss stays well under libFuzzer's default limit.
 */
#include <stddef.h>
#include <stdint.h>

#include "zpool_ops.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	zpool_ops_run(data, size);
	return 0;
}
