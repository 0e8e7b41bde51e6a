/* Description: the region (transparent compressed swap through userfaultfd) from the
 * outside, one case per row of docs/region.md's failure modes that applies and per
 * behaviour that include/zfolio.h promises. Every case runs both fault-service modes
 * (ZF_FAULT_THREAD, ZF_FAULT_SIGBUS) and several unit sizes (4 KiB, 64 KiB, 2 MiB), on
 * memory filled from the sample image (data/sample.bin.zst), with zero and same-filled
 * pages and units among it, so that compression is real.
 *
 *   region_test CASE      (no CASE, or "all": every case, each in a child process)
 *
 * The cases, by file:
 *   region_test_basic.c    basic          the counters exact, swap-in, read(2)/write(2),
 *                                         the stats text, bad options
 *   region_test_races.c    evict_race     writers against a pageout without pause
 *                          many_faulters  8 threads fault one evicted unit at once
 *   region_test_events.c   events         madvise(DONTNEED), munmap, mremap, and those
 *                                         racing pageouts and faults
 *   region_test_fork.c     fork           the MADV_DONTFORK policy
 *                          fork_copy      ZF_FORK_COPY: a child gets a copy
 *                          exit_inflight  exit() and destroy with faults in flight
 *   region_test_corrupt.c  corrupt        a bad stored unit: SIGBUS, never a zero page
 *                          full           a store that fills up or refuses units
 *   region_test_limit.c    limit, clean,  the residency limit, clean copies, readahead,
 *                          readahead,     zf_region_advise()
 *                          advise
 *   region_test_signal.c   signal         faults in signal handlers, signal storms,
 *                                         SIGBUS chaining
 *   region_test_remap.c    remap,         mremap() and munmap() at the worst moments
 *                          evict_meets    (test points)
 *   region_test_zap.c      zap_late,      a DONTNEED whose zap comes late, an mremap
 *                          remap_late,    whose UNMAP comes late, one whose REMAP comes
 *                          remap_early    after another thread's
 *                          free           MADV_FREE, whose zap never comes
 *                          wp_eagain      a write to a fresh frame while an event is unread
 *   region_test_split.c    split          units that span two mappings (mprotect)
 *   region_test_fresh.c    fill           fresh frames the reader writes ahead, evicted
 *                                         or dropped between its look and its write
 *                          premap         frames premapped a block at a time, a write
 *                                         between a frame's move and its protection
 * Each file's top comment says what its cases check.
 *
 * Cases that may crash or hang the process when the region is wrong run each
 * configuration in a child with a timeout; a watchdog (alarm) names the phase that hung.
 * Waits are for events (a counter reaching a value, a thread's signal), with deadlines
 * that stretch under a sanitizer. ZF_REGION_ONLY=text runs only the child
 * configurations whose name contains text. ZF_TEST_FRAME=2m runs every case with 2 MiB
 * frames (zf_region_options.frame) where its options allow them: the unit sizes are then
 * the store's, in frames of 2 MiB that the region places and evicts whole (CTest's
 * region_<case>_frames; region_harness.h). Returns 0 pass, 1 fail, 77 skip
 * (zf_region_create() says userfaultfd is unavailable: -EPERM, -ENOSYS, -ENOTSUP).
 */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "image.h" /* the sample image (tools/zfolio) */
#include "region_harness.h"

/*
 * Under TSan: the evictor reads a unit (zf_same_filled(), the copy of a unit with holes,
 * the compressor) after UFFDIO_WRITEPROTECT, and a program write that races waits in the
 * kernel for the write-protect fault to be served: the kernel orders them, TSan cannot
 * see it and reports a race on region memory. Those readers are suppressed, and the
 * test's own accesses to its pages when they are the other side (its helpers touch only
 * region memory and what one thread owns). (The SIGBUS handler's free() is allowed by
 * TSAN_OPTIONS of zf_add_test in tests/CMakeLists.txt.) TSan cannot start threads in a child
 * of a multithreaded fork(): that part of the fork case is left out under TSan.
 */
#ifdef ZF_TSAN
__attribute__((visibility("default"))) const char *__tsan_default_suppressions(void);
__attribute__((visibility("default"))) const char *__tsan_default_suppressions(void)
{
	return "race:zf_same_filled\nrace:store_holed\nrace:zf_codec_compress\n"
	       "race_top:race_writer_main\nrace:verify_at\nrace:rg_fill\nrace:on_alarm\n";
}
#endif

static const struct {
	const char *name;
	int (*fn)(void);
	unsigned timeout_s; /* the watchdog; CTest allows 120 s */
} cases[] = {
	{ "basic", case_basic, 110 },
	{ "evict_race", case_evict_race, 110 },
	{ "many_faulters", case_many_faulters, 110 },
	{ "events", case_events, 110 },
	{ "fork", case_fork, 110 },
	{ "fork_copy", case_fork_copy, 110 },
	{ "exit_inflight", case_exit_inflight, 110 },
	{ "corrupt", case_corrupt, 110 },
	{ "limit", case_limit, 110 },
	{ "clean", case_clean, 110 },
	{ "readahead", case_readahead, 110 },
	{ "signal", case_signal, 110 },
	{ "advise", case_advise, 110 },
	{ "full", case_full, 110 },
	{ "remap", case_remap, 110 },
	{ "evict_meets", case_evict_meets, 110 },
	{ "zap_late", case_zap_late, 110 },
	{ "split", case_split, 110 },
	{ "remap_late", case_remap_late, 110 },
	{ "remap_early", case_remap_early, 110 },
	{ "free", case_free, 110 },
	{ "wp_eagain", case_wp_eagain, 110 },
	{ "fill", case_fill, 110 },
	{ "premap", case_premap, 110 },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static int run_case(size_t i)
{
	const uint64_t t0 = now_ns();
	int ret;

	case_name = cases[i].name;
	set_phase("%s", case_name);
	watchdog(cases[i].timeout_s);
	ret = cases[i].fn();
	alarm(0);
	printf("%s %s (%.1f s)\n",
	       ret == PASS   ? "PASS"
	       : ret == SKIP ? "SKIP"
			     : "FAIL",
	       case_name, (double)(now_ns() - t0) / 1e9);
	return ret;
}

int main(int argc, char **argv)
{
	zf_image *img = NULL;
	int ret;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (stress_open_sample(&img, &sample, &sample_pages))
		printf("region_test: no sample image: text-like pages instead\n");
	if (argc > 1 && strcmp(argv[1], "all")) {
		for (size_t i = 0; i < NCASES; i++)
			if (!strcmp(argv[1], cases[i].name)) {
				ret = run_case(i);
				zf_image_close(img);
				return ret;
			}
		fprintf(stderr, "usage: region_test [all");
		for (size_t i = 0; i < NCASES; i++)
			fprintf(stderr, " | %s", cases[i].name);
		fprintf(stderr, "]\n");
		return FAIL;
	}
	/* Every case, each in a child. */
	ret = PASS;
	for (size_t i = 0; i < NCASES; i++) {
		pid_t pid;
		int st;

		fflush(stdout);
		pid = fork();
		if (pid == 0)
			_exit(run_case(i));
		waitpid(pid, &st, 0);
		if (!WIFEXITED(st) || (WEXITSTATUS(st) != PASS && WEXITSTATUS(st) != SKIP)) {
			printf("FAIL %s: %s\n", cases[i].name, status_text(st));
			ret = FAIL;
		}
	}
	zf_image_close(img);
	return ret;
}
