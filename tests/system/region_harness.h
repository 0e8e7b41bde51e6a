/*
 * region_harness.h - what the region_test cases share: failing with the phase named,
 * deadlines that stretch under a sanitizer, the page contents every case writes and
 * checks (gen_page()), a region under test and the copy of what it must hold (struct rg),
 * waiting for the region's counters, and running a configuration in a child process.
 *
 * Over the public header only (include/zfolio.h); region_test_corrupt.c alone adds the
 * test build's store_corrupt().
 */
#ifndef ZF_REGION_HARNESS_H
#define ZF_REGION_HARNESS_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>

#include "zfolio.h"
#include "../stress/stress.h"

enum { PASS = 0, FAIL = 1, SKIP = 77 };

#define PAGE ZF_PAGE_SIZE
#define KiB(x) ((size_t)(x) << 10)
#define MiB(x) ((size_t)(x) << 20)
#define OWNER 7u
#define U(x) ((unsigned long long)(x))

/* TSan checks each suppressed race on region memory at full cost: less memory there. */
#ifdef ZF_TSAN
#define TSAN_DIV 4
#else
#define TSAN_DIV 1
#endif

/* How long a wait for an event may take before the test calls it lost. */
#define WAIT_MS DEADLINE_MS(5000)

extern const char *case_name;
extern char phase[200];
extern const uint8_t *sample; /* the sample image, or NULL: text pages instead */
extern size_t sample_pages;
extern int failures; /* of child configurations, in the parent of a case */

/* ---------------------------------------------------------------------------------- */
/* Failing, timing, waiting                                                           */
/* ---------------------------------------------------------------------------------- */

__attribute__((format(printf, 3, 4), noreturn)) void fail_at(int line, const char *expr,
							     const char *fmt, ...);
#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond))                                                                       \
			fail_at(__LINE__, #cond, __VA_ARGS__);                                     \
	} while (0)
#define FAILF(...) fail_at(__LINE__, "check", __VA_ARGS__)

__attribute__((format(printf, 1, 2))) void set_phase(const char *fmt, ...);
/* Ends the process with the phase named once seconds have passed (SIGALRM). */
void watchdog(unsigned seconds);
void set_sig(int sig, void (*handler)(int));
uint64_t now_ns(void);
void sleep_us(unsigned us);
void sleep_ms(unsigned ms);

/*
 * Polls cond (which may refresh stats) until it holds or ms milliseconds have passed
 * (then it says so on stderr); the caller then checks what it needs and says what was
 * wrong. The poll interval is no duration anything relies on: cond is the event.
 */
#define WAIT_UNTIL(cond, ms)                                                                       \
	do {                                                                                       \
		const uint64_t wait_end_ = now_ns() + 1000000ull * (ms);                           \
		while (!(cond)) {                                                                  \
			if (now_ns() > wait_end_) {                                                \
				wait_timed_out(__LINE__, #cond, ms);                               \
				break;                                                             \
			}                                                                          \
			sleep_us(200);                                                             \
		}                                                                                  \
	} while (0)
void wait_timed_out(int line, const char *cond, unsigned ms);

const char *mode_name(enum zf_fault_mode m);
const char *unit_name(uint32_t unit);

/* ---------------------------------------------------------------------------------- */
/* Content                                                                            */
/* ---------------------------------------------------------------------------------- */

void fill_u64(uint8_t *p, size_t len, uint64_t v);
/*
 * Page `page` of a region (units of upages pages) at version ver. Version 0 is the zero
 * page (memory never written). Version 1 has whole zero units (unit % 7 == 3), zero pages
 * and half-zero pages; every version has whole same-filled units (unit % 7 == 5) and
 * same-filled pages; the rest are pages of the sample image (or of text, without it)
 * stamped with (page, version). Versions >= 2 are never zero, and any two versions of a
 * page differ, so that a lost write or a page dropped to zeros always shows.
 */
void gen_page(uint8_t *p, uint64_t page, uint32_t ver, unsigned upages);
int page_is_zero(const uint8_t *p);

/* ---------------------------------------------------------------------------------- */
/* A region under test and what it must hold                                          */
/* ---------------------------------------------------------------------------------- */

struct rg {
	zf_region *r;
	zf_store *store; /* ours (own_store) or the region's */
	int own_store;
	enum zf_fault_mode mode;
	uint8_t *base, *want;
	size_t size, unit, nunits, npages;
	unsigned upages, order;
	size_t sunit; /* the unit the store compresses: unit, or a part of a frame */
	/*
	 * With frames, never-written frames [0, zero_mapped) map the huge zero page,
	 * write-protected, from the region's creation (zf_region_stats.thp_zero then): a read
	 * of one does not fault and leaves it empty (mincore() sees its pages, which are no
	 * memory, and a pageout takes nothing of it); its first write faults. 0 otherwise.
	 */
	size_t zero_mapped;
};

/*
 * Options with the defaults but for the codec: the tests' (../unit/codec_pick.h), as a
 * build without lz4 refuses the default one.
 */
zf_region_options ropts(enum zf_fault_mode mode, uint32_t unit);
zf_store_options sopts(void);
/* A store for a region of this unit (unit mode, or split mode for 4 KiB units). */
zf_store *store_make_with(zf_store_options so, uint32_t unit, unsigned engines);
zf_store *store_make(uint32_t unit, unsigned engines);
/*
 * Frames: with ZF_TEST_FRAME=2m in the environment, rg_open() makes its regions with 2 MiB
 * frames (zf_region_options.frame) where the options allow them (neither clean copies nor
 * per-page swap-in), and gives the region as many frames as the case asked units of
 * o->unit, at most RG_FRAMES_MAX (a case's 1024 units of 4 KiB would be 2 GiB). The
 * region then places and evicts a frame whole (g->unit, g->nunits, g->upages are the
 * frame's) while the store compresses units of o->unit. So a case counts what the region
 * places and evicts in g->unit and g->nunits after rg_open(), and in o->unit only what the
 * store compresses (a stored unit's index, the store's own unit). What it must know
 * before rg_open() (a limit, a reclaim batch) comes from rg_place_unit() and
 * rg_size_for().
 */
#define RG_FRAMES_MAX 16
/* The frame rg_open() makes a region of o with: ZF_FRAME_2M or 0. */
uint32_t rg_frame(const zf_region_options *o);
/* The unit such a region places and evicts whole (what g->unit will be). */
size_t rg_place_unit(const zf_region_options *o);
/* The size rg_open() asks for when a case asks for size bytes (g->size, rounded up). */
size_t rg_size_for(const zf_region_options *o, size_t size);
/* Makes g's region (of store, or of a store of its own when store is NULL); exits 77
 * when userfaultfd is unavailable. */
void rg_open(struct rg *g, const zf_region_options *o, size_t size, zf_store *store);
/* Destroys it; a store of the test's own must then hold nothing of it. */
void rg_close(struct rg *g);
zf_region_stats rst(zf_region *r);
zf_store_stats sst(zf_store *s);
uint64_t lat_sum(const zf_region_stats *st);

/* want of units [u0, u1) at version ver. */
void want_units(struct rg *g, size_t u0, size_t u1, uint32_t ver);
/* Units [u0, u1) at version ver, in want and in the region. */
void rg_fill(struct rg *g, size_t u0, size_t u1, uint32_t ver);
/* [off, off + len) reads zeros from now on (in want). */
void zero_want(struct rg *g, size_t off, size_t len);
/* [off, off + len) of the region must equal want. */
void verify_at(const struct rg *g, size_t off, size_t len, const char *what, int line);
#define VERIFY(g, off, len, what) verify_at(g, off, len, what, __LINE__)
#define VERIFY_UNITS(g, u0, u1, what)                                                              \
	verify_at(g, (u0) * (g)->unit, ((u1) - (u0)) * (g)->unit, what, __LINE__)

/* Pages of [addr, addr + len) mapped (mincore): memory, or the zero page. */
size_t present_pages(const void *addr, size_t len);
/*
 * Those of them with memory behind them: not the zero page (read of memory never written;
 * with frames, never-written frames map the huge zero page from the start). A kernel
 * without PAGEMAP_SCAN cannot tell: all of them (and no frame maps the huge zero page
 * there, as the region needs PAGEMAP_SCAN for that).
 */
size_t memory_pages(const void *addr, size_t len);
int unit_present(const struct rg *g, size_t u);
int unit_absent(const struct rg *g, size_t u);
/* Units of [u0, u1) with a page in memory: what a zf_region_pageout() of them evicts. */
size_t units_in_memory(const struct rg *g, size_t u0, size_t u1);
/* zf_region_pageout() of units [u0, u1), which must evict exactly want of them. */
void pageout_units(struct rg *g, size_t u0, size_t u1, size_t want, int line);
#define PAGEOUT(g, u0, u1, want) pageout_units(g, u0, u1, want, __LINE__)
/* The first unit >= from that is not same-filled in want. */
size_t pick_compressible(const struct rg *g, size_t from);

static inline void touch_read(const uint8_t *p)
{
	(void)*(const volatile uint8_t *)p;
}

/* ---------------------------------------------------------------------------------- */
/* Children                                                                           */
/* ---------------------------------------------------------------------------------- */

struct cfg {
	enum zf_fault_mode mode;
	uint32_t unit;
	int variant;
};

typedef int child_fn(const struct cfg *cfg);

/*
 * Runs fn(cfg) in a child process (SIGSEGV and SIGBUS at their defaults, so that a
 * sanitizer's handlers do not turn a crash into an exit code, and a watchdog of
 * timeout_s seconds, stretched under a sanitizer); returns wait_child()'s status.
 */
int run_child(child_fn *fn, const struct cfg *cfg, unsigned timeout_s);
/* The same with SIGBUS as the parent has it (a SIGBUS-mode region's handler, say). */
int run_child_keep_sigbus(child_fn *fn, const struct cfg *cfg, unsigned timeout_s);
const char *status_text(int st);
/* A child must have exited 0; 77 skips the whole case. */
void expect_ok(int st, const char *what);
/* A child must have died of signal sig. */
void expect_signal(int st, int sig, const char *what);
/*
 * Runs fn(cfg) in a child that must die of sig after it called child_mark() (just
 * before the access that must kill it): a child that ends before its mark is a failure
 * of its own, not the death looked for.
 */
void expect_death_after_mark(child_fn *fn, const struct cfg *cfg, unsigned timeout_s, int sig,
			     const char *what);
void child_mark(void);
/* ZF_REGION_ONLY=text runs only the child configurations whose name has text. */
int selected(const char *name);
/* Runs fn for each mode x unit in a child, expecting it to pass. */
void each_config(const char *what, child_fn *fn, const uint32_t *units, size_t nunits, int variant,
		 unsigned timeout_s);
enum config_modes { THREAD_MODE_ONLY = 1, BOTH_MODES = 2 };
/* The same, in thread mode only or in both modes. */
void each_config_modes(const char *what, child_fn *fn, const uint32_t *units, size_t nunits,
		       int variant, unsigned timeout_s, enum config_modes modes);

/* ---------------------------------------------------------------------------------- */
/* The cases (region_test_*.c)                                                        */
/* ---------------------------------------------------------------------------------- */

int case_basic(void);
int case_evict_race(void);
int case_many_faulters(void);
int case_events(void);
int case_fork(void);
int case_fork_copy(void);
int case_exit_inflight(void);
int case_corrupt(void);
int case_full(void);
int case_limit(void);
int case_clean(void);
int case_readahead(void);
int case_advise(void);
int case_signal(void);
int case_remap(void);
int case_evict_meets(void);
int case_zap_late(void);
int case_split(void);
int case_remap_late(void);
int case_remap_early(void);
int case_free(void);
int case_wp_eagain(void);
int case_fill(void);
int case_premap(void);

#endif /* ZF_REGION_HARNESS_H */
