/*
 * frames_test.c - a region with 2 MiB frames (zf_region_options.frame), over the public
 * API: every byte back, and the way each frame went (the counters), in the cases the
 * frame code branches on.
 *
 *   fresh     never-written frames read zeros with no fault and no memory (the huge zero
 *             page, premapped), and a first write gives a frame (thp_fault_alloc)
 *   ahead     frames written in order: the next ones are opened ahead (fresh_ahead),
 *             written first by the region's reader (fresh_filled) and by the program with
 *             no fault; those it never writes stay zeros, evicted and back; under a
 *             limit, no further than the limit
 *   swapin    frames evicted and read back, as huge pages (thp_swpin)
 *   dropped   a never-written frame the program dropped (MADV_DONTNEED): its first read
 *             maps the huge zero page by a move, its first write a zeroed huge page
 *   partial   part of a resident frame dropped (the huge page splits), then evicted and
 *             read back: zeros there, the rest intact (frame_split)
 *   mprotect  part of an evicted frame made read-only (its mapping split): the move is
 *             refused and the frame placed page by page (frame_fallback), bytes intact
 *   unmapped  the second half of an evicted frame unmapped: the first half reads back
 *   racing    writer threads, MADV_DONTNEED and pageouts at once, every page checked
 *   nothp     no huge pages for the process (PR_SET_THP_DISABLE, as THP "never"
 *             would do for everyone): the same bytes, by the fallback paths, and no
 *             thp_* counted
 *
 * Each in thread and SIGBUS mode, with 4 KiB and 64 KiB store units, in a child process
 * (SIGBUS mode installs a handler; nothp changes the process). Exits 0, 1 (a failure),
 * 77 (no userfaultfd, or no huge pages on this system for the cases that need them).
 *
 * usage: frames_test [case]
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zfolio.h"
#include "../stress/sanitized.h"
#include "../unit/codec_pick.h"

#define PAGE 4096u
#define FRAME ZF_FRAME_2M
#define NFRAMES 8u
#define SKIP 77

static const char *config; /* "thread 64k", for messages */

static void fail(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FAIL frames_test [%s] line %d: ", config, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond))                                                                       \
			fail(__LINE__, __VA_ARGS__);                                               \
	} while (0)

/* Page p's bytes at version v: compressible, and different for every (p, v). */
static void gen_page(uint8_t *dst, uint64_t p, uint32_t v)
{
	char line[64];
	int n = snprintf(line, sizeof(line), "page %llu version %u of the frames test. ",
			 (unsigned long long)p, v);

	for (unsigned off = 0; off < PAGE; off += (unsigned)n)
		memcpy(dst + off, line, off + (unsigned)n <= PAGE ? (size_t)n : PAGE - off);
}

static int page_is(const uint8_t *p, uint64_t page, uint32_t v)
{
	uint8_t want[PAGE];

	if (v == 0) {
		for (unsigned i = 0; i < PAGE; i++)
			if (p[i])
				return 0;
		return 1;
	}
	gen_page(want, page, v);
	return !memcmp(p, want, PAGE);
}

struct frames {
	zf_region *r;
	uint8_t *base;
	uint32_t *ver; /* per page: the version it must read (0: zeros) */
	size_t pages;
};

static zf_region_stats stats(const struct frames *f)
{
	zf_region_stats s;

	CHECK(zf_region_get_stats(f->r, &s, sizeof(s)) == 0, "zf_region_get_stats");
	return s;
}

/*
 * s = the counters, once cond holds of them or 20 s have passed: in thread mode a service
 * thread counts a fault just after it woke the faulting thread.
 */
#define STATS_WHEN(f, s, cond)                                                                     \
	do {                                                                                       \
		for (int i_ = 0;; i_++) {                                                          \
			(s) = stats(f);                                                            \
			if ((cond) || i_ >= 20000)                                                 \
				break;                                                             \
			usleep(1000);                                                              \
		}                                                                                  \
	} while (0)

static void open_frames(struct frames *f, enum zf_fault_mode mode, uint32_t unit)
{
	zf_region_options o;
	int ret;

	zf_region_options_init(&o);
	o.codec = test_codec_name();
	o.unit = unit;
	o.fault_mode = mode;
	o.frame = FRAME;
	o.engines = 2; /* a frame's units decompress on them */
	memset(f, 0, sizeof(*f));
	ret = zf_region_create(NULL, (size_t)NFRAMES * FRAME, &o, &f->r);
	if (ret == -EPERM || ret == -ENOSYS || ret == -ENOTSUP) {
		printf("SKIP frames_test: zf_region_create: %s\n", zf_strerror(ret));
		exit(SKIP);
	}
	CHECK(ret == 0, "zf_region_create: %s", zf_strerror(ret));
	f->base = zf_region_base(f->r);
	CHECK(((uintptr_t)f->base & (FRAME - 1)) == 0, "base %p not 2 MiB-aligned",
	      (void *)f->base);
	CHECK(zf_region_unit(f->r) == FRAME, "zf_region_unit() %u", zf_region_unit(f->r));
	f->pages = (size_t)NFRAMES * FRAME / PAGE;
	f->ver = calloc(f->pages, sizeof(*f->ver));
	CHECK(f->ver, "out of memory");
}

static void close_frames(struct frames *f)
{
	zf_region_destroy(f->r);
	free(f->ver);
}

/* Writes version v over pages [p0, p1). */
static void write_pages(struct frames *f, size_t p0, size_t p1, uint32_t v)
{
	for (size_t p = p0; p < p1; p++) {
		gen_page(f->base + p * PAGE, p, v);
		f->ver[p] = v;
	}
}

/* Every page of [p0, p1) must read its version. */
static void verify(const struct frames *f, size_t p0, size_t p1, const char *what)
{
	for (size_t p = p0; p < p1; p++)
		if (f->ver[p] != UINT32_MAX)
			CHECK(page_is(f->base + p * PAGE, p, f->ver[p]),
			      "%s: page %zu (frame %zu) does not read version %u%s", what, p,
			      p / (FRAME / PAGE), f->ver[p],
			      page_is(f->base + p * PAGE, p, 0) ? " (it reads zeros)" : "");
}

static void pageout_frames(struct frames *f, size_t f0, size_t f1, long want)
{
	const long n = zf_region_pageout(f->r, f->base + f0 * FRAME, (f1 - f0) * FRAME);

	CHECK(want < 0 ? n >= 0 : n == want, "zf_region_pageout(frames %zu..%zu): %ld, want %ld",
	      f0, f1, n, want);
}

/* Whether this system gives huge pages (THP not "never"). */
static int thp_available(void)
{
	char buf[128] = "";
	FILE *fp = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");

	if (!fp)
		return 0;
	if (!fgets(buf, sizeof(buf), fp))
		buf[0] = 0;
	fclose(fp);
	return !strstr(buf, "[never]");
}

#define FP (FRAME / PAGE) /* pages of a frame */

/* The frames counted resident: those faulted in and those opened ahead. */
static void check_opened(const struct frames *f, const zf_region_stats *s, const char *what)
{
	CHECK(s->resident_bytes == (s->thp_fault_alloc + s->fresh_ahead) * (uint64_t)FRAME,
	      "%s: resident %llu bytes, thp_fault_alloc %llu + fresh_ahead %llu frames", what,
	      (unsigned long long)s->resident_bytes, (unsigned long long)s->thp_fault_alloc,
	      (unsigned long long)s->fresh_ahead);
	(void)f;
}

static void case_fresh(enum zf_fault_mode mode, uint32_t unit)
{
	struct frames f;
	zf_region_stats s;
	uint64_t sum = 0;

	open_frames(&f, mode, unit);
	s = stats(&f);
	CHECK(s.thp_zero == NFRAMES, "thp_zero %llu at creation, want every frame (%u)",
	      (unsigned long long)s.thp_zero, NFRAMES);
	for (size_t off = 0; off < (size_t)NFRAMES * FRAME; off += PAGE)
		sum += f.base[off];
	s = stats(&f);
	CHECK(sum == 0, "never-written memory does not read zeros");
	CHECK(s.pgfault_zero == 0 && s.resident_bytes == 0,
	      "reads of never-written frames faulted (%llu) or took memory (%llu bytes)",
	      (unsigned long long)s.pgfault_zero, (unsigned long long)s.resident_bytes);
	/* Out of order: no frame follows the one before it, none is opened ahead. */
	write_pages(&f, 3 * FP, 4 * FP, 2);
	write_pages(&f, 0, FP, 2);
	write_pages(&f, 5 * FP, 6 * FP, 2);
	STATS_WHEN(&f, s, s.thp_fault_alloc >= 3);
	CHECK(s.thp_fault_alloc == 3 && s.fresh_ahead == 0,
	      "3 frames written: thp_fault_alloc %llu, fresh_ahead %llu",
	      (unsigned long long)s.thp_fault_alloc, (unsigned long long)s.fresh_ahead);
	check_opened(&f, &s, "fresh");
	verify(&f, 0, f.pages, "fresh");
	close_frames(&f);
}

/*
 * Frames 0 and 1 written in order: the fault of frame 1 opens frames 2-5 ahead
 * (RG_FRESH_AHEAD, 4), and nothing touches them before the counters are read.
 */
static void case_ahead(enum zf_fault_mode mode, uint32_t unit)
{
	struct frames f;
	zf_region_stats s;
	zf_region_options o;
	int ret;

	open_frames(&f, mode, unit);
	write_pages(&f, 0, 2 * FP, 2);
	STATS_WHEN(&f, s, s.thp_fault_alloc + s.fresh_ahead >= 6);
	check_opened(&f, &s, "frames 0-1 written");
	CHECK(s.thp_fault_alloc == 2 && s.fresh_ahead == 4,
	      "frames 0-1 written: thp_fault_alloc %llu, fresh_ahead %llu (want 2 and 4)",
	      (unsigned long long)s.thp_fault_alloc, (unsigned long long)s.fresh_ahead);
	/* The region's reader writes them before the program does (fresh_filled). */
	STATS_WHEN(&f, s, s.fresh_filled >= 4);
	CHECK(s.fresh_filled == 4, "frames 2-5 opened ahead: fresh_filled %llu, want 4",
	      (unsigned long long)s.fresh_filled);
	/* Frame 2 written, 3-5 opened and never written (the huge zero page, unprotected). */
	write_pages(&f, 2 * FP, 3 * FP, 3);
	verify(&f, 0, f.pages, "frames opened ahead");
	pageout_frames(&f, 0, NFRAMES, -1);
	s = stats(&f);
	CHECK(s.resident_bytes == 0, "after a pageout of everything, %llu bytes resident",
	      (unsigned long long)s.resident_bytes);
	verify(&f, 0, f.pages, "frames opened ahead, evicted and back");
	write_pages(&f, 3 * FP, 8 * FP, 4);
	verify(&f, 0, f.pages, "frames opened ahead, written after an eviction");
	pageout_frames(&f, 0, NFRAMES, -1);
	verify(&f, 0, f.pages, "evicted again");
	close_frames(&f);

	/* A limit of 3 frames: frame 1's fault opens one frame ahead, no more. */
	zf_region_options_init(&o);
	o.codec = test_codec_name();
	o.unit = unit;
	o.fault_mode = mode;
	o.frame = FRAME;
	o.limit = 3 * (uint64_t)FRAME;
	memset(&f, 0, sizeof(f));
	ret = zf_region_create(NULL, (size_t)NFRAMES * FRAME, &o, &f.r);
	CHECK(ret == 0, "zf_region_create: %s", zf_strerror(ret));
	f.base = zf_region_base(f.r);
	f.pages = (size_t)NFRAMES * FRAME / PAGE;
	f.ver = calloc(f.pages, sizeof(*f.ver));
	CHECK(f.ver, "out of memory");
	write_pages(&f, 0, 2 * FP, 2);
	STATS_WHEN(&f, s, s.thp_fault_alloc + s.fresh_ahead >= 3);
	CHECK(s.fresh_ahead <= 1 && s.resident_bytes <= 3 * (uint64_t)FRAME,
	      "under a limit of 3 frames: fresh_ahead %llu, resident %llu bytes",
	      (unsigned long long)s.fresh_ahead, (unsigned long long)s.resident_bytes);
	write_pages(&f, 2 * FP, f.pages, 5);
	verify(&f, 0, f.pages, "written in order under a limit");
	close_frames(&f);
}

static void case_swapin(enum zf_fault_mode mode, uint32_t unit)
{
	struct frames f;
	zf_region_stats s;

	open_frames(&f, mode, unit);
	write_pages(&f, 0, f.pages, 2);
	for (int round = 0; round < 3; round++) {
		pageout_frames(&f, 0, NFRAMES, NFRAMES);
		verify(&f, 0, f.pages, "swapped in");
		write_pages(&f, (size_t)round * FP, (size_t)round * FP + 7, 3 + (uint32_t)round);
	}
	STATS_WHEN(&f, s, s.swpin_units[9] >= 3 * NFRAMES);
	CHECK(s.swpin_units[9] == 3 * NFRAMES, "swpin_2048k %llu, want %u",
	      (unsigned long long)s.swpin_units[9], 3 * NFRAMES);
	CHECK(s.thp_swpin + s.frame_split + s.frame_fallback == s.swpin_units[9],
	      "thp_swpin %llu + frame_split %llu + frame_fallback %llu != swap-ins %llu",
	      (unsigned long long)s.thp_swpin, (unsigned long long)s.frame_split,
	      (unsigned long long)s.frame_fallback, (unsigned long long)s.swpin_units[9]);
	CHECK(s.thp_swpin > 0, "no frame came back as a huge page");
	/*
	 * Each swap-in filled a nursery and moved it into the region: none holds a huge page
	 * now, one did while it was filled; the bookkeeping has at least the state words.
	 */
	CHECK(s.staging_bytes == 0 && s.staging_max >= FRAME,
	      "staging %llu bytes now (want 0), at most %llu (want a frame at least)",
	      (unsigned long long)s.staging_bytes, (unsigned long long)s.staging_max);
	CHECK(s.meta_bytes >= NFRAMES * sizeof(uint32_t), "meta_bytes %llu",
	      (unsigned long long)s.meta_bytes);
	close_frames(&f);
}

static void case_dropped(enum zf_fault_mode mode, uint32_t unit)
{
	struct frames f;
	zf_region_stats s0, s;

	open_frames(&f, mode, unit);
	CHECK(madvise(f.base, 2 * FRAME, MADV_DONTNEED) == 0, "madvise: %s", strerror(errno));
	s0 = stats(&f);
	verify(&f, 0, FP, "a dropped never-written frame read");
	write_pages(&f, FP, FP + 1, 2);
	verify(&f, 0, 2 * FP, "dropped frames");
	STATS_WHEN(&f, s, s.pgfault_zero - s0.pgfault_zero >= 2);
	CHECK(s.pgfault_zero - s0.pgfault_zero == 2, "pgfault_zero moved by %llu, want 2",
	      (unsigned long long)(s.pgfault_zero - s0.pgfault_zero));
	/* The read: the huge zero page; the write: a zeroed huge page; either split. */
	CHECK(s.thp_zero - s0.thp_zero <= 1 && s.thp_fault_alloc - s0.thp_fault_alloc <= 1 &&
		      s.thp_zero - s0.thp_zero + s.thp_fault_alloc - s0.thp_fault_alloc +
				      s.frame_split - s0.frame_split ==
			      2,
	      "two dropped frames touched: thp_zero +%llu, thp_fault_alloc +%llu, frame_split "
	      "+%llu",
	      (unsigned long long)(s.thp_zero - s0.thp_zero),
	      (unsigned long long)(s.thp_fault_alloc - s0.thp_fault_alloc),
	      (unsigned long long)(s.frame_split - s0.frame_split));
	pageout_frames(&f, 0, 2, 2);
	verify(&f, 0, 2 * FP, "dropped frames, swapped in");
	close_frames(&f);
}

static void case_partial(enum zf_fault_mode mode, uint32_t unit)
{
	struct frames f;

	open_frames(&f, mode, unit);
	write_pages(&f, 0, 2 * FP, 2);
	/* 64 KiB in the middle of frame 1 dropped: the kernel splits its huge page. */
	CHECK(madvise(f.base + FRAME + 100 * PAGE, 16 * PAGE, MADV_DONTNEED) == 0, "madvise: %s",
	      strerror(errno));
	for (size_t p = FP + 100; p < FP + 116; p++)
		f.ver[p] = 0;
	verify(&f, 0, 2 * FP, "part of frame 1 dropped");
	for (int round = 0; round < 2; round++) {
		pageout_frames(&f, 0, 2, 2);
		verify(&f, 0, 2 * FP, "a partly dropped frame, swapped in");
	}
	close_frames(&f);
}

static void case_mprotect(enum zf_fault_mode mode, uint32_t unit)
{
	struct frames f;

	open_frames(&f, mode, unit);
	write_pages(&f, 0, 2 * FP, 2);
	pageout_frames(&f, 0, 2, 2);
	/* Frame 1's second half read-only while evicted: its mapping is split in two. */
	CHECK(mprotect(f.base + FRAME + FRAME / 2, FRAME / 2, PROT_READ) == 0, "mprotect: %s",
	      strerror(errno));
	verify(&f, 0, 2 * FP, "frame 1 split by mprotect(), swapped in");
	CHECK(mprotect(f.base + FRAME + FRAME / 2, FRAME / 2, PROT_READ | PROT_WRITE) == 0,
	      "mprotect: %s", strerror(errno));
	write_pages(&f, FP, FP + 3, 3);
	pageout_frames(&f, 0, 2, -1);
	verify(&f, 0, 2 * FP, "after mprotect() back, evicted again");
	close_frames(&f);
}

static void case_unmapped(enum zf_fault_mode mode, uint32_t unit)
{
	struct frames f;

	open_frames(&f, mode, unit);
	write_pages(&f, 0, 3 * FP, 2);
	pageout_frames(&f, 0, 3, 3);
	CHECK(munmap(f.base + FRAME + FRAME / 2, FRAME / 2) == 0, "munmap: %s", strerror(errno));
	for (size_t p = FP + FP / 2; p < 2 * FP; p++)
		f.ver[p] = UINT32_MAX; /* gone */
	verify(&f, 0, 3 * FP, "half of frame 1 unmapped while evicted");
	/* Mapped again: plain memory of the program's, zeros. */
	CHECK(mmap(f.base + FRAME + FRAME / 2, FRAME / 2, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == f.base + FRAME + FRAME / 2,
	      "mmap: %s", strerror(errno));
	for (size_t p = FP + FP / 2; p < 2 * FP; p++)
		f.ver[p] = 0;
	verify(&f, 0, 3 * FP, "the hole mapped again");
	close_frames(&f);
}

/* racing: each writer owns a quarter of the pages; main drops and pages out at random. */
struct racer {
	struct frames *f;
	size_t p0, p1;
	atomic_int *stop;
	uint64_t seed;
	pthread_mutex_t *lock; /* a page's write and its version, against main's drop */
};

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void *racer_main(void *arg)
{
	struct racer *w = arg;

	while (!atomic_load(w->stop)) {
		const size_t p = w->p0 + rnd(&w->seed) % (w->p1 - w->p0);

		pthread_mutex_lock(&w->lock[p % 64]);
		if (w->f->ver[p] != 0 && !page_is(w->f->base + p * PAGE, p, w->f->ver[p]))
			fail(__LINE__, "racing: page %zu lost version %u", p, w->f->ver[p]);
		write_pages(w->f, p, p + 1, w->f->ver[p] + 1 < 2 ? 2 : w->f->ver[p] + 1);
		pthread_mutex_unlock(&w->lock[p % 64]);
	}
	return NULL;
}

static void case_racing(enum zf_fault_mode mode, uint32_t unit)
{
	struct frames f;
	pthread_mutex_t lock[64];
	atomic_int stop = 0;
	struct racer w[3];
	pthread_t t[3];
	uint64_t x = 0x2545f4914f6cdd1dull;

	open_frames(&f, mode, unit);
	for (int i = 0; i < 64; i++)
		pthread_mutex_init(&lock[i], NULL);
	for (int i = 0; i < 3; i++) {
		w[i] = (struct racer){ .f = &f,
				       .p0 = f.pages * (size_t)i / 3,
				       .p1 = f.pages * (size_t)(i + 1) / 3,
				       .stop = &stop,
				       .seed = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1),
				       .lock = lock };
		CHECK(!pthread_create(&t[i], NULL, racer_main, &w[i]), "pthread_create");
	}
	for (int k = 0; k < 300; k++) {
		const size_t fr = rnd(&x) % NFRAMES;

		if (k % 3 == 0) {
			/* A page dropped: zeros from now on. */
			const size_t p = fr * FP + rnd(&x) % FP;

			pthread_mutex_lock(&lock[p % 64]);
			CHECK(madvise(f.base + p * PAGE, PAGE, MADV_DONTNEED) == 0, "madvise: %s",
			      strerror(errno));
			f.ver[p] = 0;
			pthread_mutex_unlock(&lock[p % 64]);
		} else {
			pageout_frames(&f, fr, fr + 1 + rnd(&x) % 2 * (fr + 1 < NFRAMES), -1);
		}
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	verify(&f, 0, f.pages, "racing, at the end");
	pageout_frames(&f, 0, NFRAMES, -1);
	verify(&f, 0, f.pages, "racing, evicted at the end");
	close_frames(&f);
}

static void case_nothp(enum zf_fault_mode mode, uint32_t unit)
{
	struct frames f;
	zf_region_stats s;
	uint64_t sum = 0;

	CHECK(prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0, "prctl(PR_SET_THP_DISABLE): %s",
	      strerror(errno));
	open_frames(&f, mode, unit);
	for (size_t off = 0; off < (size_t)NFRAMES * FRAME; off += PAGE)
		sum += f.base[off];
	CHECK(sum == 0, "never-written memory does not read zeros");
	write_pages(&f, 0, f.pages / 2, 2);
	verify(&f, 0, f.pages, "no huge pages: written");
	pageout_frames(&f, 0, NFRAMES / 2, NFRAMES / 2);
	verify(&f, 0, f.pages, "no huge pages: swapped in");
	STATS_WHEN(&f, s, s.swpin_units[9] >= NFRAMES / 2);
	/* Each frame swapped in (and each written first) went in as 4 KiB pages. */
	CHECK(s.frame_split + s.frame_fallback >= s.swpin_units[9] + NFRAMES / 2,
	      "frames placed as 4 KiB pages: frame_split %llu + frame_fallback %llu, want at "
	      "least the %llu swap-ins and %u first writes",
	      (unsigned long long)s.frame_split, (unsigned long long)s.frame_fallback,
	      (unsigned long long)s.swpin_units[9], NFRAMES / 2);
	CHECK(!s.thp_swpin && !s.thp_fault_alloc && !s.thp_zero,
	      "huge pages counted without huge pages: thp_swpin %llu thp_fault_alloc %llu "
	      "thp_zero %llu",
	      (unsigned long long)s.thp_swpin, (unsigned long long)s.thp_fault_alloc,
	      (unsigned long long)s.thp_zero);
	close_frames(&f);
}

static const struct {
	const char *name;
	void (*fn)(enum zf_fault_mode, uint32_t);
	int needs_thp;
} cases[] = {
	{ "fresh", case_fresh, 1 },	  { "ahead", case_ahead, 1 },
	{ "swapin", case_swapin, 1 },	  { "dropped", case_dropped, 1 },
	{ "partial", case_partial, 0 },	  { "mprotect", case_mprotect, 0 },
	{ "unmapped", case_unmapped, 0 }, { "racing", case_racing, 0 },
	{ "nothp", case_nothp, 0 },
};

int main(int argc, char **argv)
{
	static const uint32_t units[] = { 4096, 65536 };
	int failed = 0, ran = 0;

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		if (argc > 1 && strcmp(argv[1], cases[c].name))
			continue;
		if (cases[c].needs_thp && !thp_available()) {
			printf("skip %s: THP is never on this system\n", cases[c].name);
			continue;
		}
		for (int m = 0; m < 2; m++) {
			for (size_t u = 0; u < 2; u++) {
				char name[64];
				pid_t pid;
				int st;

				snprintf(name, sizeof(name), "%s %s %uk", cases[c].name,
					 m ? "sigbus" : "thread", units[u] >> 10);
				fflush(stdout);
				pid = fork();
				if (pid == 0) {
					config = name;
					alarm(DEADLINE_S(60));
					cases[c].fn(m ? ZF_FAULT_SIGBUS : ZF_FAULT_THREAD,
						    units[u]);
					_exit(0);
				}
				CHECK(pid > 0, "fork: %s", strerror(errno));
				CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
				if (WIFEXITED(st) && WEXITSTATUS(st) == SKIP)
					return SKIP;
				ran++;
				if (!WIFEXITED(st) || WEXITSTATUS(st)) {
					failed++;
					printf("FAIL %s: %s %d\n", name,
					       WIFEXITED(st) ? "exit" : "signal",
					       WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
				} else {
					printf("ok %s\n", name);
				}
			}
		}
	}
	if (!ran)
		return argc > 1 ? (fprintf(stderr, "no case %s\n", argv[1]), 2) : SKIP;
	return failed ? 1 : 0;
}
