/* Description: the soak test of the region: everything a program may legally do to its own
 * memory, all at once, while zfolio pages it, every page checked against a shadow copy.
 *
 *   soak [--seconds N | --rounds N] [--seed S] [--round R] [--config FILTER]
 *        [--ops N] [--workers N] [--skip LIST] [--json FILE] [--list]
 *
 * One process runs rounds one after another, one region per round, each round in one
 * configuration. The configurations (soak --list) are every unit size (4k 16k 64k 2m)
 * x fault mode (thread, sigbus) x store engines (e0, e2) x five variants (clean copies on
 * or off, readahead 0 or 2, per-page swap-in) x residency limit (limit: a quarter of the
 * region; nolimit), 160 in all; round r runs configuration r % 160 in an order where
 * every 8 rounds see every unit size in both modes (config_of()); every other 8 rounds
 * with 2 MiB frames where the options allow them (f2m). A round is fixed by the
 * seed and its number: the operations each thread draws come from (seed, round, thread),
 * so a failure names the command that runs the same round again (the interleaving of
 * threads is the machine's, so a race may need a few runs to line up again).
 *
 * In a round, worker threads each own a slice of the region (whole units) and a shadow of
 * it: per page a version (0: zeros), which fixes the page's bytes (page_word()), and where
 * the page lives. Each worker draws operations on its slice:
 *   write     new versions over a run of pages (each checked first);
 *   check     a run of pages;
 *   dontneed  madvise(MADV_DONTNEED) of a run: zeros (half the time checked at once);
 *   free      madvise(MADV_FREE) of a run: each page its version or zeros until its next
 *             write (no zap follows its REMOVE: docs/region.md, "MADV_FREE");
 *   hole      munmap() and mmap(MAP_FIXED) fresh memory there (or mmap(MAP_FIXED) over
 *             it in one call): zeros, then new versions written; the program's own
 *             memory from then on, which zfolio must never touch (docs/region.md, UNMAP);
 *   mremap    the run moved away (to a reservation, so that the kernel hands the same
 *             address out again and again) and back with MREMAP_FIXED: the data unchanged
 *             at the away address and back home, pages written while away included; a
 *             pageout of the vacated range meanwhile; the memory is the program's own
 *             after (docs/region.md, REMAP);
 *   mprotect read-only, checked, paged out and checked again, then read-write;
 *   pageout   zf_region_pageout() of a run, advise: zf_region_advise() COLD or HOT.
 * At the same time: a pager thread pages out random ranges of the whole region and
 * advises COLD and HOT; a reader checks random pages of any slice (under the slice's lock,
 * which its worker holds only while it changes the slice, so the check is exact); a forker
 * forks children that check, with a slice held still, that the program's own mappings
 * came along intact and the region did not (MADV_DONTFORK), and exit; with a limit, the
 * reclaim thread evicts all the time. The main thread samples the counters.
 *
 * At the end of a round every page is checked, all paged out (then no residency may be
 * counted), checked again; no fault may have failed; with a limit, resident_bytes must
 * come to <= limit + reclaim_batch; after zf_region_destroy() the store must hold
 * nothing. --skip leaves operations or threads out, to tell one bug from another.
 *
 * Failures: a wrong page ends the process with exit 1 and a report naming the round,
 * configuration, seed, the page, the version it should hold, what it holds instead (which
 * page's pattern at which version, zeros, or bytes of no pattern) and a map of its unit,
 * then the command that runs the round again. A crash (a signal, also SIGBUS that zfolio
 * passes on: failed closed, or not its own) is reported with the thread and what it was
 * doing; a round past its deadline, or a thread that ends no operation for 30 s (both
 * longer under a sanitizer), is reported as a hang with what every thread was doing. Returns 0 pass, 1 fail, 77 skip (no userfaultfd, or under
 * TSan: region_stress is the race test there). tests/soak/README.md says more.
 */
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zfolio.h"
#include "../stress/stress.h" /* SANITIZED, ZF_TSAN, stress_rand(), stress_mix() */
#include "../unit/codec_pick.h"

#define PAGE ZF_PAGE_SIZE
#define WORDS (PAGE / 8)
#define U(x) ((unsigned long long)(x))
#define MiB(x) ((size_t)(x) << 20)

#define DEFAULT_WORKERS 4
#define DEFAULT_OPS (SANITIZED ? 1200u : 5000u) /* per worker per round */
#define DEFAULT_SECONDS 20
#define OWNER 23u
/* A round's deadline, stretched under a sanitizer (never shrunk: a slow build is no hang). */
#define ROUND_DEADLINE_S (SANITIZED ? 4u * 120u : 120u)
/* How long a thread of a round may go without ending an operation before it is a hang. */
#define PROGRESS_S (SANITIZED ? 4u * 30u : 30u)
/* How long resident_bytes may take to come under limit + batch once a round is quiet. */
#define SETTLE_DEADLINE_NS ((SANITIZED ? 4u : 1u) * 5000000000ull)
#define CYCLE 160u /* configurations */
#define MAX_RUN 512u /* pages per operation, at most */
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* ---------------------------------------------------------------------------------- */
/* Configurations                                                                      */
/* ---------------------------------------------------------------------------------- */

struct config {
	uint32_t unit;
	uint32_t frame; /* 0, or ZF_FRAME_2M: the region places and evicts 2 MiB frames */
	enum zf_fault_mode mode;
	unsigned engines, readahead;
	int keep_clean, limit;
	enum zf_swapin_mode swapin;
	size_t size; /* the region's bytes */
	char name[64];
};

static const uint32_t units[4] = { 4u << 10, 16u << 10, 64u << 10, 2u << 20 };
static const char *const unit_names[4] = { "4k", "16k", "64k", "2m" };

/*
 * Round r's configuration. Within each 8 rounds, j = r % 8 runs every unit size in both
 * modes; the other dimensions (engines x variant x limit, 20 combinations) move by one
 * per 8 rounds from a start that differs per (unit, mode), so 160 rounds run them all and
 * any 8 consecutive rounds mix them.
 */
static void config_of(unsigned long long r, struct config *c)
{
	const unsigned j = (unsigned)(r % 8), rest = (unsigned)((r / 8 + 3 * j) % 20);
	const unsigned variant = rest % 5, u = j % 4;

	memset(c, 0, sizeof(*c));
	c->unit = units[u];
	c->mode = (j + j / 4) % 2 ? ZF_FAULT_SIGBUS : ZF_FAULT_THREAD;
	c->engines = rest / 5 % 2 ? 2 : 0;
	c->limit = rest >= 10;
	/* Per-page swap-in is whole-unit swap-in for 4 KiB units: clean copies there instead. */
	c->swapin = variant == 4 && u > 0 ? ZF_SWAPIN_PER_PAGE : ZF_SWAPIN_WHOLE;
	c->keep_clean = c->swapin == ZF_SWAPIN_WHOLE && (variant == 1 || variant >= 3);
	c->readahead = c->swapin == ZF_SWAPIN_WHOLE && variant >= 2 ? 2 : 0;
	/*
	 * Every other 8 rounds with 2 MiB frames, where the options allow them (neither
	 * clean copies nor per-page swap-in): the store still compresses units of c->unit.
	 */
	c->frame = (r / 8) % 2 && !c->keep_clean && c->swapin == ZF_SWAPIN_WHOLE ? ZF_FRAME_2M : 0;
	/* Per-page swap-in of 2 MiB units decompresses 2 MiB per page: a smaller region. */
	c->size = u == 3 || c->frame ? (c->swapin == ZF_SWAPIN_PER_PAGE ? MiB(8) : MiB(32))
		  : u == 2	     ? MiB(16)
				     : MiB(8);
	snprintf(c->name, sizeof(c->name), "%s.%s.e%u.%s.%s.ra%u.%s.%s", unit_names[u],
		 c->mode == ZF_FAULT_SIGBUS ? "sigbus" : "thread", c->engines,
		 c->keep_clean ? "clean" : "noclean",
		 c->swapin == ZF_SWAPIN_PER_PAGE ? "perpage" : "whole", c->readahead,
		 c->limit ? "limit" : "nolimit", c->frame ? "f2m" : "nf");
}

/* True when every token of filter (separated by '.', ',' or ' ') is a token of name. */
static int config_matches(const char *name, const char *filter)
{
	char f[256], n[64];
	char *save = NULL;

	if (!filter || !*filter)
		return 1;
	snprintf(f, sizeof(f), "%s", filter);
	for (char *t = strtok_r(f, "., ", &save); t; t = strtok_r(NULL, "., ", &save)) {
		char *save2 = NULL;
		int found = 0;

		snprintf(n, sizeof(n), "%s", name);
		for (char *k = strtok_r(n, ".", &save2); k && !found;
		     k = strtok_r(NULL, ".", &save2))
			found = !strcmp(k, t);
		if (!found)
			return 0;
	}
	return 1;
}

/* ---------------------------------------------------------------------------------- */
/* The shadow and page contents                                                        */
/* ---------------------------------------------------------------------------------- */

enum where {
	PG_REGION = 0, /* the region's mapping */
	PG_MAPPED, /* the program's own mapping, made by mmap(MAP_FIXED) in a hole */
	PG_MOVED, /* the program's own: region memory moved away and back by mremap */
	PG_LOST, /* a hole someone else mapped first: not ours any more, never touched */
};
static const char *const where_names[] = { "the region's", "the program's own (mmap in a hole)",
					   "the program's own (moved away and back)",
					   "lost (a hole another mapping took)" };

enum opkind {
	OP_NONE,
	OP_WRITE,
	OP_CHECK,
	OP_DONTNEED,
	OP_HOLE,
	OP_MREMAP,
	OP_MPROTECT,
	OP_PAGEOUT,
	OP_ADVISE,
	OP_HOLE_FIXED, /* a page's last change only: the hole made by one mmap(MAP_FIXED) */
	OP_FREE,
};
static const char *const op_names[] = {
	"none",
	"write",
	"check",
	"dontneed",
	"hole (munmap, mmap)",
	"mremap",
	"mprotect",
	"pageout",
	"advise",
	"hole (mmap MAP_FIXED over)",
	"free (MADV_FREE)",
};

struct page_shadow {
	uint32_t ver; /* 0: zeros */
	uint32_t prev; /* the version before the last change */
	uint32_t opno; /* the owner's operation that made the last change (0: none) */
	uint8_t where; /* enum where */
	uint8_t how; /* enum opkind of the last change */
	uint8_t freed; /* MADV_FREE'd since that change: zeros are right too */
};

/*
 * A page's bytes are a function of (page, version): word 0 is a header, (page << 32 |
 * version) ^ a class tag in the top byte, from which a wrong page tells whose it is. The
 * class, drawn from (page, version, round seed), makes the store see every kind of page:
 * same-filled (every word the header), text-like (compresses ~3x), text-like with a zero
 * second half, and random (incompressible). Every word of a page differs from the same
 * word of any other (page, version), so a page shifted, mixed or stale always shows.
 */
enum page_class { C_SAME, C_TEXT, C_HALF, C_RAND };
static const char *const class_names[] = { "same-filled", "text-like", "half-zero", "random" };
static const uint64_t class_tag[] = { 0xa1ull << 56, 0xb2ull << 56, 0xc3ull << 56, 0xd4ull << 56 };

static uint64_t round_seed;

static enum page_class page_class(uint64_t p, uint32_t v)
{
	const unsigned h = (unsigned)(stress_mix(p, v, round_seed) % 8);

	return h == 0 ? C_SAME : h < 4 ? C_TEXT : h < 6 ? C_HALF : C_RAND;
}

static inline uint64_t page_word(uint64_t hdr, enum page_class c, unsigned i)
{
	if (i == 0 || c == C_SAME)
		return hdr;
	if (c == C_RAND)
		return stress_mix(hdr, i, 0x50a4);
	if (c == C_HALF && i >= WORDS / 2)
		return 0;
	return i & 1 ? ~hdr : hdr ^ (uint64_t)i << 17;
}

static inline uint64_t page_header(uint64_t p, uint32_t v, enum page_class c)
{
	return (p << 32 | v) ^ class_tag[c];
}

static void page_fill(uint8_t *a, uint64_t p, uint32_t v)
{
	uint64_t *w = (uint64_t *)(void *)a;
	enum page_class c;
	uint64_t hdr;

	if (v == 0) {
		memset(a, 0, PAGE);
		return;
	}
	c = page_class(p, v);
	hdr = page_header(p, v, c);
	for (unsigned i = 0; i < WORDS; i++)
		w[i] = page_word(hdr, c, i);
}

/* The index of the first word of a that is not page p at version v, or -1. */
static int page_first_wrong(const uint8_t *a, uint64_t p, uint32_t v)
{
	const uint64_t *w = (const uint64_t *)(const void *)a;
	enum page_class c;
	uint64_t hdr;

	if (v == 0) {
		for (unsigned i = 0; i < WORDS; i++)
			if (w[i])
				return (int)i;
		return -1;
	}
	c = page_class(p, v);
	hdr = page_header(p, v, c);
	for (unsigned i = 0; i < WORDS; i++)
		if (w[i] != page_word(hdr, c, i))
			return (int)i;
	return -1;
}

/* ---------------------------------------------------------------------------------- */
/* The round's state                                                                   */
/* ---------------------------------------------------------------------------------- */

struct slice {
	pthread_mutex_t lock; /* held by its worker while it changes the slice */
	size_t first, pages;
};

struct worker {
	pthread_t thread;
	unsigned id;
	uint64_t rng;
	struct slice *sl;
	uint32_t clock; /* the last version it wrote */
	size_t taken; /* pages made the program's own (or lost) this round */
	unsigned long ops_done;
	atomic_int done;
	/* What it is doing now, for a hang's or a crash's report. */
	atomic_int op;
	_Atomic(const char *) step;
	atomic_ulong opno;
	atomic_size_t op_first, op_pages;
	_Atomic(uintptr_t) away; /* while mremap has the run away: where it is */
	/* What it did. */
	uint64_t checked, writes, dontneeds, frees, holes, mremaps, mprotects, pageouts, advises,
		lost, refused;
};

struct helper {
	pthread_t thread;
	uint64_t rng;
	_Atomic(const char *) step;
	atomic_ullong count; /* rounds of its loop: the watchdog's beat */
	uint64_t checked, units;
};

static struct config cfg;
static unsigned long long round_no, base_seed;
static unsigned nworkers = DEFAULT_WORKERS;
static unsigned long ops_per_worker = DEFAULT_OPS;
static unsigned long round_ops; /* this round's: fewer where operations cost more */
static const char *argv0 = "soak";
static const char *skip_list; /* --skip, for the command that runs a round again */
static zf_region *region;
static zf_store *store;
static uint8_t *base;
static size_t npages, nunits, upages;
static struct page_shadow *pg;
static uint8_t *unit_gone; /* units a hole or a move touched: the program's from then on */
static uint8_t *unit_freed; /* units a MADV_FREE touched: their pages are written at the end */
static struct slice *slices;
static struct worker *workers;
static struct helper pager, reader, forker;
static atomic_int stop_helpers, workers_left;
static pthread_mutex_t layout_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char *child_vec; /* mincore() output for fork children */
static atomic_ullong zf_warnings;
/* --skip: operations (1 << enum opkind) and threads left out, to tell bugs apart. */
enum { SKIP_PAGER = 1 << 16, SKIP_READER = 1 << 17, SKIP_FORKER = 1 << 18 };
static unsigned skip_mask;
static FILE *json;

/* Whether page p reads what the shadow says: its version, or zeros once MADV_FREE'd. */
static int page_right(const uint8_t *a, size_t p)
{
	return page_first_wrong(a, p, pg[p].ver) < 0 ||
	       (pg[p].freed && page_first_wrong(a, p, 0) < 0);
}

/* Who this thread is, for a crash report. */
static __thread const char *role = NULL;
static __thread struct worker *me;

/* ---------------------------------------------------------------------------------- */
/* Reporting                                                                           */
/* ---------------------------------------------------------------------------------- */

static atomic_int failing;
/* Preformatted at the start of each round for the crash handler (no formatting there). */
static char crash_text[512], crash_json[256];

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_us(unsigned us)
{
	struct timespec ts = { us / 1000000, (long)(us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void repro_line(char *out, size_t cap)
{
	snprintf(out, cap, "%s --seed %#llx --round %llu --rounds 1 --ops %lu --workers %u%s%s",
		 argv0, U(base_seed), U(round_no), ops_per_worker, nworkers,
		 skip_list ? " --skip " : "", skip_list ? skip_list : "");
}

/*
 * Ends the process: the report on stderr (the round, the configuration, the seeds, what
 * went wrong, the command that runs the round again), a "fail" line in the JSON file, then
 * the region's counters. The first failing thread reports; the others wait for its exit.
 */
__attribute__((format(printf, 1, 2), noreturn)) static void fail(const char *fmt, ...)
{
	char msg[8192], repro[256];
	va_list ap;
	size_t cap;

	if (atomic_exchange(&failing, 1))
		for (;;)
			pause();
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	repro_line(repro, sizeof(repro));
	fprintf(stderr,
		"soak: FAIL in round %llu, config %s (seed %#llx, round seed %#llx), %s:\n%s\n"
		"soak: reproduce (timing-dependent, may take a few runs): %s\n",
		U(round_no), cfg.name, U(base_seed), U(round_seed), role ? role : "main", msg,
		repro);
	fflush(stderr);
	if (json) {
		fprintf(json,
			"{\"round\":%llu,\"config\":\"%s\",\"seed\":\"%#llx\",\"round_seed\":"
			"\"%#llx\",\"result\":\"fail\",\"reproduce\":",
			U(round_no), cfg.name, U(base_seed), U(round_seed));
		json_string(json, repro);
		fputs(",\"failure\":", json);
		json_string(json, msg);
		fputs("}\n", json);
		fflush(json);
	}
	if (region) {
		/* Last: a broken region might hang here; the watchdog's alarm ends it. */
		static char text[1 << 16];

		alarm(10);
		cap = zf_region_stats_text(region, text, sizeof(text));
		fprintf(stderr, "soak: the region's counters:\n%s", cap ? text : "");
	}
	fflush(stderr);
	_exit(1);
}

/* The library's diagnostics: warnings and errors to stderr, counted. */
static void log_line(enum zf_log_level level, const char *msg, void *arg)
{
	(void)arg;
	if (level <= ZF_LOG_WARN) {
		atomic_fetch_add(&zf_warnings, 1);
		fprintf(stderr, "soak: round %llu (%s): zfolio says: %s\n", U(round_no), cfg.name,
			msg);
	}
}

/* Where page q can be read now: its place, or the away address of its worker's mremap. */
static const uint8_t *page_addr(size_t q)
{
	const size_t w = (q - slices[0].first) / slices[0].pages;
	struct worker *wk = &workers[w < nworkers ? w : nworkers - 1];
	const uintptr_t away = atomic_load(&wk->away);
	const size_t f = atomic_load(&wk->op_first), n = atomic_load(&wk->op_pages);

	if (away && q >= f && q < f + n)
		return (const uint8_t *)away + (q - f) * PAGE;
	return base + q * PAGE;
}

/* What the bytes at a are: whose pattern, at which version, or zeros, or no pattern. */
static void describe(const uint8_t *a, size_t p, char *out, size_t cap)
{
	const uint64_t *w = (const uint64_t *)(const void *)a;
	const struct page_shadow *s = &pg[p];
	int zero = 1;

	for (unsigned i = 0; i < WORDS && zero; i++)
		zero = !w[i];
	if (zero) {
		snprintf(out, cap, "zeros");
		return;
	}
	for (unsigned c = 0; c < 4; c++) {
		const uint64_t x = w[0] ^ class_tag[c];
		const uint64_t q = x >> 32;
		const uint32_t v = (uint32_t)x;
		int bad;

		if ((x >> 56) || q >= npages || !v || page_class(q, v) != (enum page_class)c)
			continue;
		bad = page_first_wrong(a, q, v);
		snprintf(out, cap, "version %u of %s%llu (%s, %s)%s", v,
			 q == p ? "this page, " : "page ", U(q), class_names[c],
			 bad < 0 ? "whole" : "then other bytes",
			 q != p		? (q / upages == p / upages ? ": a page of the same unit"
								    : ": a page of another unit")
			 : v == s->prev ? ": the version before the last change"
			 : v < s->ver && s->ver ? ": an older version"
						: ": a version it should not hold");
		if (bad >= 0) {
			const size_t n = strlen(out);

			snprintf(out + n, cap - n, " (wrong from word %d)", bad);
		}
		return;
	}
	snprintf(out, cap, "bytes of no page's pattern (words %#llx %#llx %#llx)", U(w[0]), U(w[1]),
		 U(w[WORDS - 1]));
}

/* A map of page p's unit as it reads now: runs of right and wrong pages. */
static void unit_map(size_t p, char *out, size_t cap)
{
	const size_t u = p / upages, first = u * upages;
	size_t n = (size_t)snprintf(out, cap, "unit %llu (pages %llu..%llu) now:", U(u), U(first),
				    U(first + upages - 1));
	size_t run = first;
	int run_kind = -1;

	for (size_t q = first; q <= first + upages && n < cap - 64; q++) {
		int kind = 3;

		if (q < first + upages) {
			if (pg[q].where == PG_LOST)
				kind = 2;
			else
				kind = !page_right(page_addr(q), q);
		}
		if (kind != run_kind) {
			if (run_kind >= 0)
				n += (size_t)snprintf(out + n, cap - n, " %llu-%llu %s", U(run),
						      U(q - 1),
						      run_kind == 0   ? "right"
						      : run_kind == 1 ? "WRONG"
								      : "lost");
			run = q;
			run_kind = kind;
		}
	}
}

/* Page p, read at a (where it lives now), is not what the shadow says: report and end. */
__attribute__((noreturn)) static void fail_page(size_t p, const uint8_t *a, const char *what)
{
	static uint8_t copy[PAGE];
	const struct page_shadow *s = &pg[p];
	const size_t slice = (p - slices[0].first) / slices[0].pages;
	char have[300], map[600], doing[200] = "";
	const int first_bad = page_first_wrong(a, p, s->ver);
	unsigned bad_words = 0;

	memcpy(copy, a, PAGE);
	for (unsigned i = 0; i < WORDS; i++) {
		uint64_t want = 0;

		if (s->ver) {
			const enum page_class c = page_class(p, s->ver);

			want = page_word(page_header(p, s->ver, c), c, i);
		}
		bad_words += ((const uint64_t *)(const void *)copy)[i] != want;
	}
	describe(copy, p, have, sizeof(have));
	unit_map(p, map, sizeof(map));
	if (slice < nworkers) {
		struct worker *w = &workers[slice];

		snprintf(doing, sizeof(doing),
			 "; its worker %u is at op %lu (%s of pages %llu+%llu)", w->id,
			 atomic_load(&w->opno), op_names[atomic_load(&w->op)],
			 U(atomic_load(&w->op_first)), U(atomic_load(&w->op_pages)));
	}
	fail("  %s: page %llu (unit %llu, page %llu of it, at %p%s; %s memory; slice %llu%s)\n"
	     "  should hold version %u (%s; last changed by %s at op %u; before that version %u)\n"
	     "  it holds %s; %u of %u words wrong, the first at byte %d\n"
	     "  %s",
	     what, U(p), U(p / upages), U(p % upages), (const void *)a,
	     a == base + p * PAGE ? "" : ", its away address", where_names[s->where], U(slice),
	     doing, s->ver, s->ver ? class_names[page_class(p, s->ver)] : "zeros", op_names[s->how],
	     s->opno, s->prev, have, bad_words, WORDS, first_bad * 8, map);
}

/* Pages [p, p + n), read at a, must be as the shadow says. Returns n. */
static size_t check_run(size_t p, size_t n, const uint8_t *a, const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (!page_right(a + i * PAGE, p + i))
			fail_page(p + i, a + i * PAGE, what);
	return n;
}

/* ---------------------------------------------------------------------------------- */
/* Crashes and hangs                                                                   */
/* ---------------------------------------------------------------------------------- */

static struct sigaction old_act[32];
static const int crash_signals[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };

static void put(const char *s)
{
	ssize_t n = write(2, s, strlen(s));

	(void)n;
}

static void put_num(uint64_t v, int hex)
{
	char b[24];
	int i = sizeof(b);

	b[--i] = '\0';
	do {
		b[--i] = "0123456789abcdef"[v % (hex ? 16 : 10)];
		v /= hex ? 16 : 10;
	} while (v && i > 2);
	if (hex) {
		b[--i] = 'x';
		b[--i] = '0';
	}
	put(b + i);
}

/*
 * A fatal signal: says which thread got it doing what, and where the address is (in the
 * region, in memory a worker moved away), then gives the signal back to the handler that
 * was there before (the default, or a sanitizer's, which then reports with its stack)
 * and returns, so that the access faults again. A SIGBUS that arrives here in SIGBUS
 * mode is one zfolio's handler passed on as not its own.
 */
static void on_crash(int sig, siginfo_t *si, void *uc)
{
	const uintptr_t addr = (uintptr_t)si->si_addr;

	(void)uc;
	if (atomic_exchange(&failing, 1)) {
		for (;;)
			pause();
	}
	put("soak: CRASH: signal ");
	put_num((uint64_t)sig, 0);
	put(sig == SIGSEGV ? " (SIGSEGV)"
	    : sig == SIGBUS
		    ? (cfg.mode == ZF_FAULT_SIGBUS
			       ? " (SIGBUS passed on by zfolio's handler: it failed closed (its "
				 "message is above) or took the fault for not its own)"
			       : " (SIGBUS: a poisoned page, zfolio failed closed?)")
	    : sig == SIGABRT ? " (SIGABRT)"
			     : "");
	put(" at address ");
	put_num(addr, 1);
	if (base && workers && addr >= (uintptr_t)base && addr < (uintptr_t)base + npages * PAGE) {
		const size_t q = (addr - (uintptr_t)base) / PAGE;

		const size_t sl = (q - slices[0].first) / slices[0].pages;
		const struct worker *w = &workers[sl < nworkers ? sl : nworkers - 1];

		put(", in the region: page ");
		put_num(q, 0);
		put(" (");
		put(where_names[pg[q].where]);
		put(" memory; its worker ");
		put_num(w->id, 0);
		put(" is at op ");
		put_num(atomic_load(&w->opno), 0);
		put(", ");
		put(op_names[atomic_load(&w->op)]);
		put(" of pages ");
		put_num(atomic_load(&w->op_first), 0);
		put("+");
		put_num(atomic_load(&w->op_pages), 0);
		put(": ");
		put(atomic_load(&w->step));
		put(")");
	}
	for (unsigned i = 0; workers && i < nworkers; i++) {
		const uintptr_t away = atomic_load(&workers[i].away);
		const size_t n = atomic_load(&workers[i].op_pages);

		if (away && addr >= away && addr < away + n * PAGE) {
			put(", in the memory worker ");
			put_num(i, 0);
			put(" moved away with mremap (pages ");
			put_num(atomic_load(&workers[i].op_first), 0);
			put("+");
			put_num(n, 0);
			put(")");
		}
	}
	put("; thread: ");
	put(role ? role : "one of zfolio's (fault service, reclaim, readahead or an engine)");
	if (me) {
		put(", at op ");
		put_num(atomic_load(&me->opno), 0);
		put(" (");
		put(op_names[atomic_load(&me->op)]);
		put(": ");
		put(atomic_load(&me->step));
		put(")");
	}
	put("\n");
	put(crash_text);
	if (json) {
		ssize_t n = write(fileno(json), crash_json, strlen(crash_json));

		n = write(fileno(json), "\"signal\":", 9);
		(void)n;
		/* put_num() writes to stderr: the number goes there too, the JSON gets it here. */
		{
			char b[4] = { (char)('0' + sig / 10), (char)('0' + sig % 10), '}', '\n' };

			n = write(fileno(json), b, sizeof(b));
			(void)n;
		}
	}
#if !SANITIZED
	{
		void *frames[64];
		const int n = backtrace(frames, 64);

		put("soak: backtrace (resolve with addr2line -f -e <soak binary> <offset>):\n");
		backtrace_symbols_fd(frames, n, 2);
	}
#endif
	sigaction(sig, &old_act[sig], NULL);
}

static void crash_handlers_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_crash;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
#if !SANITIZED
	{
		/* backtrace() loads libgcc on first use: not in a signal handler. */
		void *f[2];

		(void)backtrace(f, 2);
	}
#endif
	for (size_t i = 0; i < sizeof(crash_signals) / sizeof(crash_signals[0]); i++)
		sigaction(crash_signals[i], &sa, &old_act[crash_signals[i]]);
}

/*
 * The watchdog. A round that runs past its deadline, or a thread of the round that ends
 * no operation for PROGRESS_S while the workers run (a fault never served, a lock never
 * given back), is a hang: it says what every thread was doing and ends the process.
 * dog_lock guards the round's start and end (workers, dog_deadline).
 */
static pthread_mutex_t dog_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t dog_cond = PTHREAD_COND_INITIALIZER;
static uint64_t dog_deadline; /* 0: no round running */
static int dog_fresh; /* a new round: forget the last one's beats */
static _Atomic(const char *) main_step = "starting";

static void helper_line(const char *name, struct helper *h)
{
	fprintf(stderr, "soak:   %s: %s (%llu done)\n", name, atomic_load(&h->step),
		U(atomic_load(&h->count)));
}

/* The beat of thread i of the round (the workers, then the helpers that run); ~0: done. */
static uint64_t beat_of(unsigned i)
{
	struct helper *const helpers[3] = { &pager, &reader, &forker };
	static const unsigned skip_bits[3] = { SKIP_PAGER, SKIP_READER, SKIP_FORKER };

	if (i < nworkers)
		return atomic_load(&workers[i].done) ? ~0ull : atomic_load(&workers[i].opno);
	i -= nworkers;
	return skip_mask & skip_bits[i] ? ~0ull : atomic_load(&helpers[i]->count);
}

static void *watchdog_main(void *arg)
{
	static const char *const names[3] = { "pager", "reader", "forker" };
	uint64_t seen[16 + 3], since[16 + 3];
	char why[200];

	(void)arg;
	role = "watchdog";
	pthread_mutex_lock(&dog_lock);
	for (;;) {
		const uint64_t now = now_ns();
		struct timespec ts;
		int hung = 0;

		if (dog_deadline && dog_fresh) {
			for (unsigned i = 0; i < nworkers + 3; i++) {
				seen[i] = beat_of(i);
				since[i] = now;
			}
			dog_fresh = 0;
		}
		if (dog_deadline && now > dog_deadline) {
			snprintf(why, sizeof(why), "round %llu did not end within %u s",
				 U(round_no), ROUND_DEADLINE_S);
			hung = 1;
		}
		for (unsigned i = 0;
		     dog_deadline && !hung && atomic_load(&workers_left) > 0 && i < nworkers + 3;
		     i++) {
			const uint64_t b = beat_of(i);

			if (b != seen[i] || b == ~0ull) {
				seen[i] = b;
				since[i] = now;
			} else if (now - since[i] > PROGRESS_S * 1000000000ull) {
				if (i < nworkers)
					snprintf(why, sizeof(why),
						 "worker %u has been at op %llu for %u s", i, U(b),
						 PROGRESS_S);
				else
					snprintf(why, sizeof(why),
						 "the %s has done nothing for %u s",
						 names[i - nworkers], PROGRESS_S);
				hung = 1;
			}
		}
		if (hung)
			break;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&dog_cond, &dog_lock, &ts);
	}
	if (atomic_exchange(&failing, 1))
		return NULL;
	fprintf(stderr, "soak: HANG: %s; main: %s\n", why, atomic_load(&main_step));
	for (unsigned i = 0; i < nworkers; i++) {
		struct worker *w = &workers[i];

		fprintf(stderr, "soak:   worker %u: op %lu of %lu, %s of pages %llu+%llu: %s%s\n",
			i, atomic_load(&w->opno), round_ops, op_names[atomic_load(&w->op)],
			U(atomic_load(&w->op_first)), U(atomic_load(&w->op_pages)),
			atomic_load(&w->step), atomic_load(&w->away) ? " (the run is away)" : "");
	}
	helper_line("pager", &pager);
	helper_line("reader", &reader);
	helper_line("forker", &forker);
	fprintf(stderr, "%s", crash_text);
	if (json) {
		fprintf(json, "%s\"hang\":true}\n", crash_json);
		fflush(json);
	}
	fflush(stderr);
	if (region) {
		static char text[1 << 16];

		alarm(10); /* the counters may be behind the lock that hangs */
		zf_region_stats_text(region, text, sizeof(text));
		fprintf(stderr, "soak: the region's counters:\n%s", text);
	}
	_exit(1);
}

/* Starts watching a round (deadline: its end), or stops (0), under dog_lock. */
static void watchdog_set(uint64_t deadline)
{
	pthread_mutex_lock(&dog_lock);
	dog_deadline = deadline;
	dog_fresh = 1;
	pthread_cond_signal(&dog_cond);
	pthread_mutex_unlock(&dog_lock);
}

/* ---------------------------------------------------------------------------------- */
/* Workers                                                                             */
/* ---------------------------------------------------------------------------------- */

static uint64_t rnd(uint64_t *s, uint64_t n)
{
	return n ? stress_rand(s) % n : 0;
}

static void begin(struct worker *w, enum opkind op, size_t first, size_t n, const char *step)
{
	atomic_store(&w->op_first, first);
	atomic_store(&w->op_pages, n);
	atomic_store(&w->step, step);
	atomic_store(&w->op, op);
}

/*
 * A run of pages of w's slice for an operation: one page, a few, a unit or two (aligned),
 * or up to max; the run stops before the first page that is lost, or, with region_only,
 * not the region's. Returns its length (0: none found) and its first page in *first.
 */
static size_t pick_run(struct worker *w, size_t max, int region_only, size_t *first)
{
	const struct slice *s = w->sl;

	for (int tries = 0; tries < 8; tries++) {
		size_t p = s->first + rnd(&w->rng, s->pages), n, k;

		switch (rnd(&w->rng, 4)) {
		case 0:
			n = 1;
			break;
		case 1:
			n = 1 + rnd(&w->rng, 2 * upages < 16 ? 16 : 2 * upages);
			break;
		case 2:
			p = p / upages * upages;
			n = upages * (1 + rnd(&w->rng, 2));
			break;
		default:
			n = 1 + rnd(&w->rng, 64);
			break;
		}
		n = n < max ? n : max;
		n = n < s->first + s->pages - p ? n : s->first + s->pages - p;
		for (k = 0; k < n; k++)
			if (pg[p + k].where == PG_LOST ||
			    (region_only && pg[p + k].where != PG_REGION))
				break;
		if (k) {
			*first = p;
			return k;
		}
	}
	return 0;
}

static void set_page(struct worker *w, size_t p, uint32_t ver, enum opkind how)
{
	pg[p].prev = pg[p].ver;
	pg[p].ver = ver;
	pg[p].freed = 0;
	pg[p].how = (uint8_t)how;
	pg[p].opno = (uint32_t)atomic_load(&w->opno);
}

/* New versions of pages [p, p + n) written at a (their place, or away). */
static void write_run(struct worker *w, size_t p, size_t n, uint8_t *a, enum opkind how)
{
	for (size_t i = 0; i < n; i++) {
		const uint32_t v = ++w->clock;

		page_fill(a + i * PAGE, p + i, v);
		set_page(w, p + i, v, how);
	}
	w->writes += n;
}

static void mark_gone(size_t p, size_t n)
{
	for (size_t u = p / upages; u <= (p + n - 1) / upages; u++)
		unit_gone[u] = 1;
}

static void op_write(struct worker *w)
{
	size_t p, n = pick_run(w, MAX_RUN, 0, &p);

	if (!n)
		return;
	begin(w, OP_WRITE, p, n, "checking the old versions");
	pthread_mutex_lock(&w->sl->lock);
	w->checked += check_run(p, n, base + p * PAGE, "before a write");
	atomic_store(&w->step, "writing");
	write_run(w, p, n, base + p * PAGE, OP_WRITE);
	pthread_mutex_unlock(&w->sl->lock);
}

static void op_check(struct worker *w)
{
	size_t p, n = pick_run(w, MAX_RUN, 0, &p);

	if (!n)
		return;
	begin(w, OP_CHECK, p, n, "checking");
	w->checked += check_run(p, n, base + p * PAGE, "a check");
}

static void op_dontneed(struct worker *w)
{
	size_t p, n = pick_run(w, MAX_RUN, 0, &p);

	if (!n)
		return;
	begin(w, OP_DONTNEED, p, n, "madvise(MADV_DONTNEED)");
	pthread_mutex_lock(&w->sl->lock);
	if (madvise(base + p * PAGE, n * PAGE, MADV_DONTNEED))
		fail("madvise(%p, %zu, MADV_DONTNEED): %s", (void *)(base + p * PAGE), n * PAGE,
		     strerror(errno));
	for (size_t i = 0; i < n; i++)
		set_page(w, p + i, 0, OP_DONTNEED);
	pthread_mutex_unlock(&w->sl->lock);
	w->dontneeds++;
	if (rnd(&w->rng, 2)) {
		atomic_store(&w->step, "checking right after DONTNEED");
		w->checked += check_run(p, n, base + p * PAGE, "right after madvise(DONTNEED)");
	}
}

static void op_free(struct worker *w)
{
	size_t p, n = pick_run(w, MAX_RUN, 0, &p);

	if (!n)
		return;
	begin(w, OP_FREE, p, n, "madvise(MADV_FREE)");
	pthread_mutex_lock(&w->sl->lock);
	if (madvise(base + p * PAGE, n * PAGE, MADV_FREE))
		fail("madvise(%p, %zu, MADV_FREE): %s", (void *)(base + p * PAGE), n * PAGE,
		     strerror(errno));
	for (size_t i = 0; i < n; i++) {
		unit_freed[(p + i) / upages] = 1;
		pg[p + i].freed = 1;
		pg[p + i].how = OP_FREE;
		pg[p + i].opno = (uint32_t)atomic_load(&w->opno);
	}
	pthread_mutex_unlock(&w->sl->lock);
	w->frees++;
	if (rnd(&w->rng, 2)) {
		atomic_store(&w->step, "checking right after FREE");
		w->checked += check_run(p, n, base + p * PAGE, "right after madvise(FREE)");
	}
}

/* A worker makes at most a third of its slice the program's own in a round. */
static int may_take(const struct worker *w, size_t n)
{
	return w->taken + n <= w->sl->pages / 3;
}

static void lose(struct worker *w, size_t p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		set_page(w, p + i, 0, pg[p + i].how);
		pg[p + i].where = PG_LOST;
	}
	w->lost++;
}

/*
 * munmap() and mmap(MAP_FIXED) fresh memory in the hole (under the layout lock, so that
 * no other worker's mmap takes the hole meanwhile; a mapping of someone else's still
 * may, and then the run is lost), or mmap(MAP_FIXED) over the run in one call. The run
 * reads zeros, then gets new versions: memory zfolio must never touch again.
 */
static void op_hole(struct worker *w)
{
	size_t p, n = pick_run(w, 4 * upages, 0, &p);
	const enum opkind how = rnd(&w->rng, 2) ? OP_HOLE : OP_HOLE_FIXED;
	uint8_t *a;
	void *m;

	if (!n || !may_take(w, n))
		return;
	a = base + p * PAGE;
	begin(w, how, p, n,
	      how == OP_HOLE ? "munmap, mmap in the hole" : "mmap(MAP_FIXED) over the run");
	pthread_mutex_lock(&w->sl->lock);
	mark_gone(p, n);
	w->taken += n;
	w->holes++;
	if (how == OP_HOLE) {
		pthread_mutex_lock(&layout_lock);
		if (munmap(a, n * PAGE))
			fail("munmap(%p, %zu): %s", (void *)a, n * PAGE, strerror(errno));
		m = mmap(a, n * PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		pthread_mutex_unlock(&layout_lock);
		if (m == MAP_FAILED && errno == EEXIST) {
			lose(w, p, n);
			pthread_mutex_unlock(&w->sl->lock);
			return;
		}
	} else {
		m = mmap(a, n * PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	}
	if (m != a)
		fail("mmap(%p, %zu, MAP_FIXED) in a hole of the region: %s", (void *)a, n * PAGE,
		     m == MAP_FAILED ? strerror(errno) : "another address");
	for (size_t i = 0; i < n; i++) {
		set_page(w, p + i, 0, how);
		pg[p + i].where = PG_MAPPED;
	}
	atomic_store(&w->step, "checking the fresh mapping");
	w->checked += check_run(p, n, a, "a fresh mapping in a hole of the region");
	if (rnd(&w->rng, 4)) {
		atomic_store(&w->step, "writing the fresh mapping");
		write_run(w, p, n, a, how);
	}
	pthread_mutex_unlock(&w->sl->lock);
}

/*
 * mremap() the run away and back. Away: to a reservation of the kernel's choosing (so
 * the same address comes back for the next move of any worker), the vacated range
 * reserved at once (PROT_NONE, MAP_FIXED_NOREPLACE, under the layout lock: if someone
 * else's mapping took it first, the run is lost). While away: the data checked there,
 * zfolio asked to page out the vacated range, some pages written. Back: MREMAP_FIXED
 * over the reservation, checked again.
 */
static void op_mremap(struct worker *w)
{
	size_t p, n = pick_run(w, 4 * upages, 1, &p);
	uint8_t *a, *res, *away;
	size_t len;
	void *m;
	int lost;

	if (!n || !may_take(w, n))
		return;
	a = base + p * PAGE;
	len = n * PAGE;
	begin(w, OP_MREMAP, p, n, "mremap away");
	pthread_mutex_lock(&w->sl->lock);
	pthread_mutex_lock(&layout_lock);
	res = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (res == MAP_FAILED)
		fail("mmap(a reservation of %zu bytes): %s", len, strerror(errno));
	away = mremap(a, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, res);
	if (away == MAP_FAILED && errno == EFAULT) {
		/* The run spans two mappings after all (they did not merge back): no move. */
		munmap(res, len);
		pthread_mutex_unlock(&layout_lock);
		pthread_mutex_unlock(&w->sl->lock);
		w->refused++;
		return;
	}
	if (away != res)
		fail("mremap(%p, %zu) away to %p: %s", (void *)a, len, (void *)res,
		     away == MAP_FAILED ? strerror(errno) : "another address");
	atomic_store(&w->away, (uintptr_t)away);
	mark_gone(p, n);
	w->taken += n;
	w->mremaps++;
	atomic_store(&w->step, "reserving the vacated range");
	m = mmap(a, len, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
	pthread_mutex_unlock(&layout_lock);
	lost = m == MAP_FAILED && errno == EEXIST;
	if (!lost && m != a)
		fail("mmap(%p, %zu, PROT_NONE) over the vacated range: %s", (void *)a, len,
		     m == MAP_FAILED ? strerror(errno) : "another address");

	atomic_store(&w->step, "checking at the away address");
	w->checked += check_run(p, n, away, "at the away address, after mremap away");
	if (rnd(&w->rng, 2)) {
		long r;

		atomic_store(&w->step, "zf_region_pageout() of the vacated range");
		r = zf_region_pageout(region, a, len);
		if (r < 0)
			fail("zf_region_pageout() of a range moved away: %s", zf_strerror((int)r));
	}
	if (rnd(&w->rng, 2)) {
		const size_t k = rnd(&w->rng, n), m2 = 1 + rnd(&w->rng, n - k);

		atomic_store(&w->step, "writing at the away address");
		write_run(w, p + k, m2, away + k * PAGE, OP_MREMAP);
		w->checked += check_run(p, n, away, "at the away address, after writing there");
	}
	if (lost) {
		atomic_store(&w->away, 0);
		munmap(away, len);
		lose(w, p, n);
		pthread_mutex_unlock(&w->sl->lock);
		return;
	}
	atomic_store(&w->step, "mremap back");
	m = mremap(away, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, a);
	if (m != a)
		fail("mremap(%p, %zu) back to %p: %s", (void *)away, len, (void *)a,
		     m == MAP_FAILED ? strerror(errno) : "another address");
	atomic_store(&w->away, 0);
	for (size_t i = 0; i < n; i++)
		pg[p + i].where = PG_MOVED;
	atomic_store(&w->step, "checking after mremap back");
	w->checked += check_run(p, n, a, "after mremap away and back");
	pthread_mutex_unlock(&w->sl->lock);
}

static void op_mprotect(struct worker *w)
{
	size_t p, n = pick_run(w, 4 * upages, 0, &p);
	uint8_t *a;

	if (!n)
		return;
	a = base + p * PAGE;
	begin(w, OP_MPROTECT, p, n, "mprotect(PROT_READ)");
	pthread_mutex_lock(&w->sl->lock);
	if (mprotect(a, n * PAGE, PROT_READ))
		fail("mprotect(%p, %zu, PROT_READ): %s", (void *)a, n * PAGE, strerror(errno));
	atomic_store(&w->step, "checking read-only");
	w->checked += check_run(p, n, a, "read-only (mprotect)");
	if (rnd(&w->rng, 2)) {
		long r;

		atomic_store(&w->step, "zf_region_pageout() of read-only memory");
		r = zf_region_pageout(region, a, n * PAGE);
		if (r < 0)
			fail("zf_region_pageout() of read-only memory: %s", zf_strerror((int)r));
		atomic_store(&w->step, "checking read-only after a pageout");
		w->checked += check_run(p, n, a, "read-only (mprotect), after a pageout");
	}
	atomic_store(&w->step, "mprotect(PROT_READ | PROT_WRITE)");
	if (mprotect(a, n * PAGE, PROT_READ | PROT_WRITE))
		fail("mprotect(%p, %zu, PROT_READ | PROT_WRITE): %s", (void *)a, n * PAGE,
		     strerror(errno));
	pthread_mutex_unlock(&w->sl->lock);
	w->mprotects++;
}

static void op_pageout(struct worker *w)
{
	size_t p, n = pick_run(w, w->sl->pages, 0, &p);
	long r;

	if (!n)
		return;
	begin(w, OP_PAGEOUT, p, n, "zf_region_pageout()");
	r = zf_region_pageout(region, base + p * PAGE, n * PAGE);
	if (r < 0)
		fail("zf_region_pageout(pages %llu+%llu): %s", U(p), U(n), zf_strerror((int)r));
	w->pageouts++;
	if (rnd(&w->rng, 2)) {
		atomic_store(&w->step, "checking after a pageout");
		w->checked += check_run(p, n, base + p * PAGE, "after zf_region_pageout()");
	}
}

static void op_advise(struct worker *w)
{
	size_t p, n = pick_run(w, w->sl->pages, 0, &p);
	const enum zf_region_advice adv = rnd(&w->rng, 2) ? ZF_ADV_HOT : ZF_ADV_COLD;
	int r;

	if (!n)
		return;
	begin(w, OP_ADVISE, p, n,
	      adv == ZF_ADV_HOT ? "zf_region_advise(HOT)" : "zf_region_advise(COLD)");
	r = zf_region_advise(region, base + p * PAGE, n * PAGE, adv);
	if (r)
		fail("zf_region_advise(pages %llu+%llu): %s", U(p), U(n), zf_strerror(r));
	w->advises++;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	char name[32];

	snprintf(name, sizeof(name), "worker %u", w->id);
	role = name;
	me = w;
	for (unsigned long i = 1; i <= round_ops; i++) {
		const unsigned op = (unsigned)rnd(&w->rng, 100);

		atomic_store(&w->opno, i);
		if (skip_mask & 1u << (op < 56	 ? OP_CHECK
				       : op < 61 ? OP_DONTNEED
				       : op < 66 ? OP_FREE
				       : op < 71 ? OP_HOLE
				       : op < 78 ? OP_MREMAP
				       : op < 83 ? OP_MPROTECT
				       : op < 93 ? OP_PAGEOUT
						 : OP_ADVISE))
			op_check(w);
		else if (op < 32)
			op_write(w);
		else if (op < 56)
			op_check(w);
		else if (op < 61)
			op_dontneed(w);
		else if (op < 66)
			op_free(w);
		else if (op < 71)
			op_hole(w);
		else if (op < 78)
			op_mremap(w);
		else if (op < 83)
			op_mprotect(w);
		else if (op < 93)
			op_pageout(w);
		else
			op_advise(w);
		w->ops_done = i;
	}
	begin(w, OP_NONE, 0, 0, "done");
	atomic_store(&w->done, 1);
	atomic_fetch_sub(&workers_left, 1);
	role = NULL;
	me = NULL;
	return NULL;
}

/* ---------------------------------------------------------------------------------- */
/* The other threads                                                                   */
/* ---------------------------------------------------------------------------------- */

/* Pages out random ranges of the whole region, and advises COLD and HOT. */
static void *pager_main(void *arg)
{
	struct helper *h = arg;

	role = "pager";
	while (!atomic_load(&stop_helpers)) {
		const size_t q = rnd(&h->rng, npages);
		const size_t n =
			rnd(&h->rng, 10) ? 1 + rnd(&h->rng, MIN(npages / 4, npages - q)) : 0;
		uint8_t *a = n ? base + q * PAGE : base;
		const size_t len = n ? n * PAGE : npages * PAGE;
		const unsigned what = (unsigned)rnd(&h->rng, 10);
		long r;

		if (what < 7) {
			atomic_store(&h->step, "zf_region_pageout()");
			r = zf_region_pageout(region, a, len);
			if (r > 0)
				h->units += (uint64_t)r;
		} else {
			atomic_store(&h->step,
				     what < 9 ? "zf_region_advise(COLD)" : "zf_region_advise(HOT)");
			r = zf_region_advise(region, a, len, what < 9 ? ZF_ADV_COLD : ZF_ADV_HOT);
		}
		if (r < 0)
			fail("pager: %s(%p, %zu): %s", atomic_load(&h->step), (void *)a, len,
			     zf_strerror((int)r));
		h->count++;
		atomic_store(&h->step, "pausing");
		sleep_us((unsigned)rnd(&h->rng, 200));
	}
	role = NULL;
	return NULL;
}

/* Checks random pages of any slice, holding the slice still with its lock. */
static void *reader_main(void *arg)
{
	struct helper *h = arg;

	role = "reader";
	while (!atomic_load(&stop_helpers)) {
		struct slice *s = &slices[rnd(&h->rng, nworkers)];

		atomic_store(&h->step, "waiting for a slice");
		pthread_mutex_lock(&s->lock);
		atomic_store(&h->step, "checking pages");
		for (int k = 0; k < 8; k++) {
			const size_t q = s->first + rnd(&h->rng, s->pages);

			if (pg[q].where != PG_LOST)
				h->checked +=
					check_run(q, 1, base + q * PAGE, "the reader's check");
		}
		pthread_mutex_unlock(&s->lock);
		h->count++;
		sched_yield();
	}
	role = NULL;
	return NULL;
}

/*
 * The fork child, with slice s held still by the parent: the program's own mappings came
 * along intact, the region's pages did not (MADV_DONTFORK; a page moved away and back
 * carries that flag along, so its presence is not checked). It touches no region page.
 */
static __attribute__((noreturn)) void child_main(const struct slice *s, uint64_t rng)
{
	for (size_t q = s->first; q < s->first + s->pages; q++) {
		if (pg[q].where == PG_MAPPED && !page_right(base + q * PAGE, q)) {
			char m[600], have[300];
			int len;

			describe(base + q * PAGE, q, have, sizeof(have));
			len = snprintf(
				m, sizeof(m),
				"soak: fork child: page %llu (the program's own mapping, unit "
				"%llu) should hold version %u (last changed by %s at op %u, "
				"before that version %u); it holds %s\n",
				U(q), U(q / upages), pg[q].ver, op_names[pg[q].how], pg[q].opno,
				pg[q].prev, have);

			if (write(2, m, (size_t)len) < 0)
				_exit(4);
			_exit(4);
		}
	}
	for (int k = 0; k < 16; k++) {
		const size_t q = s->first + rnd(&rng, s->pages);

		if (pg[q].where == PG_REGION && mincore(base + q * PAGE, PAGE, child_vec) == 0)
			_exit(5);
	}
	_exit(0);
}

static void *forker_main(void *arg)
{
	struct helper *h = arg;

	role = "forker";
	while (!atomic_load(&stop_helpers)) {
		struct slice *s = &slices[rnd(&h->rng, nworkers)];
		const uint64_t child_rng = stress_rand(&h->rng);
		int st;
		pid_t pid;

		atomic_store(&h->step, "waiting for a slice");
		pthread_mutex_lock(&s->lock);
		atomic_store(&h->step, "fork()");
		pid = fork();
		if (pid == 0)
			child_main(s, child_rng);
		pthread_mutex_unlock(&s->lock);
		if (pid < 0)
			fail("fork: %s", strerror(errno));
		atomic_store(&h->step, "waiting for the child");
		while (waitpid(pid, &st, 0) < 0)
			if (errno != EINTR)
				fail("waitpid: %s", strerror(errno));
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			fail("a fork child %s %d (4: a page of the program's own mapping was "
			     "wrong; "
			     "5: a region page was there)",
			     WIFEXITED(st) ? "exited with" : "died of signal",
			     WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		h->count++;
		atomic_store(&h->step, "pausing");
		sleep_us(500 + (unsigned)rnd(&h->rng, 2000));
	}
	role = NULL;
	return NULL;
}

/* ---------------------------------------------------------------------------------- */
/* A round                                                                             */
/* ---------------------------------------------------------------------------------- */

enum { PASS = 0, FAIL = 1, SKIP = 77 };

struct totals {
	unsigned long long rounds, skipped, ops, checked, swpout, swpin, forks, holes, mremaps,
		lost;
};

static int uffd_refused(int err)
{
	return err == -EPERM || err == -ENOSYS || err == -ENOTSUP;
}

static void start_thread(pthread_t *t, void *(*fn)(void *), void *arg)
{
	const int ret = pthread_create(t, NULL, fn, arg);

	if (ret)
		fail("pthread_create: %s", strerror(ret));
}

/* Returns PASS, or SKIP when this configuration's region cannot be made here. */
/*
 * For a failure of the end's pageout: the region's units that still have pages mapped,
 * with how many, how many of them write-protected (/proc/self/pagemap bits 63 and 57:
 * a REMOVE's pages left under doubt, or a clean unit), and whose pages they are.
 */
static void resident_units_report(void)
{
	const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	for (size_t u = 0; u < nunits; u++) {
		unsigned present = 0, wp = 0, freed = 0, ours = 0;

		for (size_t q = u * upages; q < (u + 1) * upages; q++) {
			uint64_t e = 0;

			if (pread(fd, &e, sizeof(e),
				  (off_t)((uintptr_t)(base + q * PAGE) / PAGE * 8)) !=
			    (ssize_t)sizeof(e))
				continue;
			present += (unsigned)(e >> 63 & 1);
			wp += (unsigned)((e >> 63 & 1) && (e >> 57 & 1));
			freed += pg[q].freed;
			ours += pg[q].where == PG_REGION;
		}
		if (present && !unit_gone[u])
			fprintf(stderr,
				"soak: unit %zu: %u pages mapped, %u write-protected; %u of %zu "
				"pages the region's, %u freed and not written since%s\n",
				u, present, wp, ours, upages, freed,
				unit_freed[u] ? "; MADV_FREE'd this round" : "");
	}
	close(fd);
}

static int run_round(unsigned long long r, const struct config *c, struct totals *t)
{
	const uint64_t t0 = now_ns();
	/* zfolio rounds a limit up to two units at least: so does the check. */
	const uint64_t place = c->frame ? c->frame : c->unit; /* evicted and placed whole */
	const uint64_t limit = c->limit ? MAX(c->size / 4, 2ull * place) : 0;
	const uint64_t batch = MAX(place, c->size / 32);
	zf_region_options o;
	zf_store_options so;
	zf_region_stats st;
	zf_store_stats ss;
	uint64_t resident_seen = 0, ops = 0, checked = 0, holes = 0, mremaps = 0, lost = 0,
		 refused = 0, mprotects = 0, dontneeds = 0, frees = 0;
	char repro[256];
	long n = 0;
	uint64_t out_end;
	int ret;

	cfg = *c;
	round_no = r;
	/*
	 * With 2 MiB units an operation on whole units covers 512 pages or more: a quarter of
	 * the operations. Per-page swap-in of them decompresses the whole unit for each 4 KiB
	 * page it brings in: a run of 512 pages costs 512 of them; 1/64 of the operations.
	 */
	round_ops = place < ZF_UNIT_MAX		      ? ops_per_worker
		    : c->swapin == ZF_SWAPIN_PER_PAGE ? MAX(ops_per_worker / 64, 1)
						      : MAX(ops_per_worker / 4, 1);
	round_seed = stress_mix(base_seed, r, 0x50a4);
	repro_line(repro, sizeof(repro));
	snprintf(crash_text, sizeof(crash_text),
		 "soak: in round %llu, config %s (seed %#llx, round seed %#llx)\n"
		 "soak: reproduce (timing-dependent, may take a few runs): %s\n",
		 U(r), c->name, U(base_seed), U(round_seed), repro);
	snprintf(crash_json, sizeof(crash_json),
		 "{\"round\":%llu,\"config\":\"%s\",\"seed\":\"%#llx\",\"result\":\"crash\",", U(r),
		 c->name, U(base_seed));
	atomic_store(&main_step, "creating the region");

	zf_store_options_init(&so);
	so.codec = test_codec_name();
	so.unit = c->unit > PAGE ? c->unit : 0;
	so.engines = c->engines;
	ret = zf_store_create(&so, &store);
	if (ret)
		fail("zf_store_create: %s", zf_strerror(ret));
	zf_region_options_init(&o);
	o.unit = c->unit;
	o.fault_mode = c->mode;
	o.fault_threads = c->mode == ZF_FAULT_THREAD && c->engines ? 2 : 1;
	o.swapin = c->swapin;
	o.keep_clean = c->keep_clean;
	o.readahead = c->readahead;
	o.limit = limit;
	o.reclaim_batch = batch;
	o.owner = OWNER;
	o.frame = c->frame;
	ret = zf_region_create(store, c->size, &o, &region);
	if (uffd_refused(ret)) {
		zf_store_destroy(store);
		store = NULL;
		region = NULL;
		printf("round %llu %s: skipped: zf_region_create: %s\n", U(r), c->name,
		       zf_strerror(ret));
		return ret == -ENOTSUP ? SKIP : -SKIP; /* -SKIP: no userfaultfd at all */
	}
	if (ret)
		fail("zf_region_create(%s): %s", c->name, zf_strerror(ret));

	base = zf_region_base(region);
	npages = zf_region_size(region) / PAGE;
	upages = (uint32_t)(place / PAGE);
	nunits = npages / upages;
	if (nunits < nworkers)
		fail("%u workers need %u units; the region has %llu", nworkers, nworkers,
		     U(nunits));
	pg = calloc(npages, sizeof(*pg));
	unit_gone = calloc(nunits, 1);
	unit_freed = calloc(nunits, 1);
	slices = calloc(nworkers, sizeof(*slices));
	workers = calloc(nworkers, sizeof(*workers));
	child_vec = calloc(npages, 1);
	if (!pg || !unit_gone || !unit_freed || !slices || !workers || !child_vec)
		fail("out of memory");
	for (unsigned i = 0; i < nworkers; i++) {
		slices[i].first = nunits / nworkers * i * upages;
		slices[i].pages = nunits / nworkers * upages;
		pthread_mutex_init(&slices[i].lock, NULL);
	}
	/* The units past the last whole slice belong to the last worker. */
	slices[nworkers - 1].pages = npages - slices[nworkers - 1].first;

	memset(&pager, 0, sizeof(pager));
	memset(&reader, 0, sizeof(reader));
	memset(&forker, 0, sizeof(forker));
	pager.rng = stress_mix(round_seed, 1001, 0);
	reader.rng = stress_mix(round_seed, 1002, 0);
	forker.rng = stress_mix(round_seed, 1003, 0);
	atomic_store(&stop_helpers, 0);
	atomic_store(&workers_left, (int)nworkers);
	watchdog_set(now_ns() + (uint64_t)ROUND_DEADLINE_S * 1000000000u);
	atomic_store(&main_step, "running the round");
	if (!(skip_mask & SKIP_PAGER))
		start_thread(&pager.thread, pager_main, &pager);
	if (!(skip_mask & SKIP_READER))
		start_thread(&reader.thread, reader_main, &reader);
	if (!(skip_mask & SKIP_FORKER))
		start_thread(&forker.thread, forker_main, &forker);
	for (unsigned i = 0; i < nworkers; i++) {
		workers[i].id = i;
		workers[i].sl = &slices[i];
		workers[i].rng = stress_mix(round_seed, i, 0x3c);
		atomic_store(&workers[i].step, "starting");
		start_thread(&workers[i].thread, worker_main, &workers[i]);
	}
	/* Sample the counters while the round runs (no failure may be counted). */
	while (atomic_load(&workers_left) > 0) {
		zf_region_get_stats(region, &st, sizeof(st));
		resident_seen = MAX(resident_seen, st.resident_bytes);
		if (st.fault_fail)
			fail("fault_fail %llu: zfolio could not serve a fault", U(st.fault_fail));
		sleep_us(2000);
	}
	atomic_store(&main_step, "joining the threads");
	for (unsigned i = 0; i < nworkers; i++) {
		struct worker *w = &workers[i];

		pthread_join(w->thread, NULL);
		ops += w->ops_done;
		checked += w->checked;
		holes += w->holes;
		mremaps += w->mremaps;
		lost += w->lost;
		refused += w->refused;
		mprotects += w->mprotects;
		dontneeds += w->dontneeds;
		frees += w->frees;
	}
	atomic_store(&stop_helpers, 1);
	if (!(skip_mask & SKIP_PAGER))
		pthread_join(pager.thread, NULL);
	if (!(skip_mask & SKIP_READER))
		pthread_join(reader.thread, NULL);
	if (!(skip_mask & SKIP_FORKER))
		pthread_join(forker.thread, NULL);
	checked += reader.checked;

	/* Everything once more; then all of it out, and in again. */
	atomic_store(&main_step, "the final check");
	for (size_t p = 0; p < npages; p++)
		if (pg[p].where != PG_LOST)
			checked += check_run(p, 1, base + p * PAGE, "at the end of the round");
	/*
	 * Pages MADV_FREE'd stay resident while they are there and not written since the
	 * event was handled (docs/region.md, "MADV_FREE"; a write just after the madvise may
	 * come before). A pageout first, which waits for the units events hold: every
	 * REMOVE is handled after it (the last FREE's may wait 10 ms for its zap, and would
	 * protect what is written before). Then every page of a unit a MADV_FREE touched is
	 * written, and may go.
	 */
	atomic_store(&main_step, "a pageout, for the events to be handled");
	if (zf_region_pageout(region, base, npages * PAGE) < 0)
		fail("zf_region_pageout() of the whole region failed");
	atomic_store(&main_step, "writing the freed pages");
	for (size_t p = 0; p < npages; p++)
		if (unit_freed[p / upages] && pg[p].where == PG_REGION) {
			const uint32_t v = pg[p].ver + (1u << 31);

			page_fill(base + p * PAGE, p, v);
			pg[p].prev = pg[p].ver;
			pg[p].ver = v;
			pg[p].freed = 0;
		}
	atomic_store(&main_step, "a pageout of the whole region");
	out_end = now_ns() + SETTLE_DEADLINE_NS;
	for (long k;; n += k) {
		k = zf_region_pageout(region, base, npages * PAGE);
		if (k < 0)
			fail("zf_region_pageout() of the whole region: %s", zf_strerror((int)k));
		zf_region_get_stats(region, &st, sizeof(st));
		/*
		 * Readahead that the check's last faults started may bring a unit in after the
		 * pageout passed it (seen once in 30 min): out again, until nothing is counted.
		 */
		if (!st.resident_bytes || now_ns() > out_end)
			break;
		usleep(1000);
	}
	/*
	 * Nothing else runs now and the store refuses nothing (no pool limit): every unit
	 * that is still the region's is out, so no residency may be counted. (While faults
	 * race, resident_bytes may pass the region's size by the reservations of faults that
	 * then find the unit taken: the round line says when it did.)
	 */
	if (st.resident_bytes) {
		resident_units_report();
		fail("resident_bytes %llu after pageouts of the whole region with nothing else "
		     "running (%ld units evicted; reject %llu): residency counted for units "
		     "that are not resident",
		     U(st.resident_bytes), n, U(st.reject));
	}
	atomic_store(&main_step, "the check after a pageout of everything");
	for (size_t p = 0; p < npages; p++)
		if (pg[p].where != PG_LOST)
			checked += check_run(p, 1, base + p * PAGE,
					     "at the end, after a pageout of the whole region");

	atomic_store(&main_step, "the counters at the end");
	zf_region_get_stats(region, &st, sizeof(st));
	if (st.fault_fail)
		fail("fault_fail %llu: zfolio could not serve a fault", U(st.fault_fail));
	if (limit) {
		/* Reclaim may still be bringing the last swap-ins under the limit. */
		const uint64_t end = now_ns() + SETTLE_DEADLINE_NS;

		while (st.resident_bytes > limit + batch && now_ns() < end) {
			sleep_us(1000);
			zf_region_get_stats(region, &st, sizeof(st));
		}
		if (st.resident_bytes > limit + batch)
			fail("residency limit: resident_bytes %llu > limit %llu + reclaim batch "
			     "%llu, "
			     "%.1f s after the round's threads stopped (resident_max %llu)",
			     U(st.resident_bytes), U(limit), U(batch),
			     (double)SETTLE_DEADLINE_NS / 1e9, U(st.resident_max));
	}

	/* Teardown: the program's own memory is the program's to unmap; zfolio unmaps its own. */
	atomic_store(&main_step, "unmapping the program's own memory in the region");
	for (size_t u = 0; u < nunits; u++) {
		if (!unit_gone[u])
			continue;
		for (size_t q = u * upages; q < (u + 1) * upages; q++)
			if (pg[q].where != PG_LOST && munmap(base + q * PAGE, PAGE))
				fail("munmap(%p): %s", (void *)(base + q * PAGE), strerror(errno));
	}
	atomic_store(&main_step, "zf_region_destroy()");
	zf_region_destroy(region);
	region = NULL;
	zf_store_get_stats(store, &ss, sizeof(ss));
	if (ss.stored_pages)
		fail("after zf_region_destroy() the store still holds %llu pages",
		     U(ss.stored_pages));
	zf_store_destroy(store);
	store = NULL;
	watchdog_set(0);

	printf("round %llu %s: %llu ops, %llu pages checked, %llu forks, %llu dontneed, %llu "
	       "free, %llu holes, %llu mremaps (%llu lost, %llu refused), %llu mprotects; "
	       "swpout %llu swpin %llu, reclaim %llu units, events %llu/%llu/%llu (%llu "
	       "unzapped), resident max %.1f MiB",
	       U(r), c->name, U(ops), U(checked), U(forker.count), U(dontneeds), U(frees), U(holes),
	       U(mremaps), U(lost), U(refused), U(mprotects), U(st.swpout), U(st.swpin),
	       U(st.evict_reclaim), U(st.ev_remove), U(st.ev_unmap), U(st.ev_remap),
	       U(st.ev_remove_unzapped), (double)st.resident_max / (1 << 20));
	if (limit)
		printf(" (sampled %.1f, limit %.1f + batch %.2f)",
		       (double)resident_seen / (1 << 20), (double)limit / (1 << 20),
		       (double)batch / (1 << 20));
	if (limit && st.resident_max > limit + batch)
		printf(" (over limit + batch)");
	if (st.resident_max > npages * PAGE)
		printf(" (over the region's %.1f MiB)", (double)(npages * PAGE) / (1 << 20));
	printf("; %.1f s\n", (double)(now_ns() - t0) / 1e9);
	if (json) {
		fprintf(json,
			"{\"round\":%llu,\"config\":\"%s\",\"seed\":\"%#llx\",\"round_seed\":"
			"\"%#llx\",\"result\":\"pass\",\"ops\":%llu,\"checked\":%llu,\"forks\":%"
			"llu,"
			"\"dontneed\":%llu,\"free\":%llu,\"holes\":%llu,\"mremaps\":%llu,"
			"\"lost\":%llu,"
			"\"refused\":%llu,\"mprotects\":%llu,\"swpout\":%llu,\"swpin\":%llu,"
			"\"evict_pageout\":%llu,\"evict_reclaim\":%llu,\"ev_remove\":%llu,"
			"\"ev_unmap\":%llu,\"ev_remap\":%llu,\"ev_remove_unzapped\":%llu,"
			"\"resident_max\":%llu,\"limit\":%llu,"
			"\"batch\":%llu,\"seconds\":%.2f}\n",
			U(r), c->name, U(base_seed), U(round_seed), U(ops), U(checked),
			U(forker.count), U(dontneeds), U(frees), U(holes), U(mremaps), U(lost),
			U(refused), U(mprotects), U(st.swpout), U(st.swpin), U(st.evict_pageout),
			U(st.evict_reclaim), U(st.ev_remove), U(st.ev_unmap), U(st.ev_remap),
			U(st.ev_remove_unzapped), U(st.resident_max), U(limit),
			U(limit ? batch : 0), (double)(now_ns() - t0) / 1e9);
		fflush(json);
	}
	t->rounds++;
	t->ops += ops;
	t->checked += checked;
	t->swpout += st.swpout;
	t->swpin += st.swpin;
	t->forks += forker.count;
	t->holes += holes;
	t->mremaps += mremaps;
	t->lost += lost;

	for (unsigned i = 0; i < nworkers; i++)
		pthread_mutex_destroy(&slices[i].lock);
	free(pg);
	free(unit_gone);
	free(unit_freed);
	free(slices);
	free(child_vec);
	{
		/* The crash handler looks at workers: NULL before it goes. */
		struct worker *old = workers;

		workers = NULL;
		free(old);
	}
	pg = NULL;
	slices = NULL;
	base = NULL;
	return PASS;
}

/* ---------------------------------------------------------------------------------- */
/* main                                                                                */
/* ---------------------------------------------------------------------------------- */

/* Parses --skip's list into skip_mask. Returns 0, or -1 for a name it does not know. */
static int parse_skip(const char *list)
{
	static const struct {
		const char *name;
		unsigned bit;
	} names[] = {
		{ "dontneed", 1u << OP_DONTNEED }, { "free", 1u << OP_FREE },
		{ "hole", 1u << OP_HOLE },	   { "mremap", 1u << OP_MREMAP },
		{ "mprotect", 1u << OP_MPROTECT }, { "pageout", 1u << OP_PAGEOUT },
		{ "advise", 1u << OP_ADVISE },	   { "pager", SKIP_PAGER },
		{ "reader", SKIP_READER },	   { "fork", SKIP_FORKER },
	};
	char buf[256], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", list);
	for (char *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
		size_t i = 0;

		while (i < sizeof(names) / sizeof(names[0]) && strcmp(names[i].name, t))
			i++;
		if (i == sizeof(names) / sizeof(names[0])) {
			fprintf(stderr, "soak: --skip: no operation or thread \"%s\"\n", t);
			return -1;
		}
		skip_mask |= names[i].bit;
	}
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: %s [--seconds N | --rounds N] [--seed S] [--round R] [--config FILTER]\n"
		"          [--ops N] [--workers N] [--skip LIST] [--json FILE] [--list]\n"
		"  --seconds N   start rounds until N seconds have passed (default %u)\n"
		"  --rounds N    run N rounds (with --seconds: whichever ends first)\n"
		"  --seed S      the seed (default: from the time); printed first\n"
		"  --round R     the first round (default: the seed modulo %u)\n"
		"  --config F    only configurations with every token of F (e.g. 2m.sigbus.e2)\n"
		"  --ops N       operations per worker per round (default %u)\n"
		"  --workers N   worker threads, each with a slice of the region (default %u)\n"
		"  --skip LIST   leave out operations or threads: "
		"dontneed,free,hole,mremap,mprotect,\n"
		"                pageout,advise (the workers'), pager,reader,fork (the threads)\n"
		"  --json FILE   one JSON object per round, and a summary, to FILE\n"
		"  --list        print the configurations in round order\n",
		argv0, DEFAULT_SECONDS, CYCLE, DEFAULT_OPS, DEFAULT_WORKERS);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "seconds", required_argument, NULL, 's' },
		{ "rounds", required_argument, NULL, 'n' },
		{ "seed", required_argument, NULL, 'S' },
		{ "round", required_argument, NULL, 'r' },
		{ "config", required_argument, NULL, 'c' },
		{ "ops", required_argument, NULL, 'o' },
		{ "workers", required_argument, NULL, 'w' },
		{ "json", required_argument, NULL, 'j' },
		{ "list", no_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ "skip", required_argument, NULL, 'k' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned long long seconds = DEFAULT_SECONDS, max_rounds = 0, first = 0, r;
	const char *filter = NULL, *json_path = NULL;
	int have_first = 0, have_seconds = 0, opt, ret = PASS, list = 0;
	struct totals t = { 0 };
	pthread_t dog;
	uint64_t t0;

	argv0 = argv[0];
	base_seed = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 16;
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 's':
			seconds = strtoull(optarg, NULL, 0);
			have_seconds = 1;
			break;
		case 'n':
			max_rounds = strtoull(optarg, NULL, 0);
			break;
		case 'S':
			base_seed = strtoull(optarg, NULL, 0);
			break;
		case 'r':
			first = strtoull(optarg, NULL, 0);
			have_first = 1;
			break;
		case 'c':
			filter = optarg;
			break;
		case 'o':
			ops_per_worker = strtoul(optarg, NULL, 0);
			break;
		case 'w':
			nworkers = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'j':
			json_path = optarg;
			break;
		case 'l':
			list = 1;
			break;
		case 'k':
			if (parse_skip(optarg))
				return FAIL;
			skip_list = optarg;
			break;
		default:
			usage();
			return opt == 'h' ? PASS : FAIL;
		}
	}
	if (optind < argc || nworkers < 1 || nworkers > 16 || !ops_per_worker) {
		usage();
		return FAIL;
	}
	if (max_rounds && !have_seconds)
		seconds = 0;
	if (!have_first)
		first = base_seed % CYCLE;
	if (list) {
		for (unsigned i = 0; i < CYCLE; i++) {
			struct config c;

			config_of(i, &c);
			if (config_matches(c.name, filter))
				printf("%3u %s\n", i, c.name);
		}
		return PASS;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
#ifdef ZF_TSAN
	printf("soak: skipped under TSan (region memory is read by zfolio's evictor and written "
	       "by the program, ordered by the kernel where TSan cannot see; region_stress is "
	       "the race test)\n");
	return SKIP;
#endif
	if (json_path) {
		json = fopen(json_path, "w");
		if (!json) {
			fprintf(stderr, "soak: %s: %s\n", json_path, strerror(errno));
			return FAIL;
		}
	}
	zf_set_log_fn(log_line, NULL);
	crash_handlers_install();
	if (pthread_create(&dog, NULL, watchdog_main, NULL))
		fail("pthread_create");
	printf("soak: seed %#llx, first round %llu, %s%llu %s, %u workers x %lu ops per "
	       "round%s%s%s\n",
	       U(base_seed), U(first), max_rounds && seconds ? "up to " : "",
	       max_rounds ? max_rounds : seconds, max_rounds ? "rounds" : "seconds", nworkers,
	       ops_per_worker, filter ? ", configs " : "", filter ? filter : "",
	       SANITIZED ? " (sanitizer: fewer ops, longer deadlines)" : "");
	t0 = now_ns();
	for (r = first;; r++) {
		struct config c;
		int rr;

		if (max_rounds && t.rounds + t.skipped >= max_rounds)
			break;
		if (seconds && now_ns() - t0 >= seconds * 1000000000ull && t.rounds + t.skipped)
			break;
		config_of(r, &c);
		if (!config_matches(c.name, filter)) {
			if (r - first >= CYCLE && !t.rounds && !t.skipped) {
				fprintf(stderr,
					"soak: no configuration matches \"%s\" (soak --list)\n",
					filter);
				return FAIL;
			}
			continue;
		}
		rr = run_round(r, &c, &t);
		if (rr == -SKIP) {
			printf("soak: skipped: no userfaultfd here\n");
			ret = SKIP;
			break;
		}
		if (rr == SKIP)
			t.skipped++;
	}
	if (ret == PASS && !t.rounds)
		ret = SKIP;
	printf("soak: %s: seed %#llx, %llu rounds (%llu skipped), %llu ops, %llu pages checked, "
	       "%llu forks, %llu holes, %llu mremaps (%llu lost), swpout %llu swpin %llu, "
	       "%llu zfolio warnings, %.0f s\n",
	       ret == PASS ? "PASS" : "SKIP", U(base_seed), U(t.rounds), U(t.skipped), U(t.ops),
	       U(t.checked), U(t.forks), U(t.holes), U(t.mremaps), U(t.lost), U(t.swpout),
	       U(t.swpin), U(atomic_load(&zf_warnings)), (double)(now_ns() - t0) / 1e9);
	if (json) {
		fprintf(json,
			"{\"summary\":true,\"result\":\"%s\",\"seed\":\"%#llx\",\"rounds\":%llu,"
			"\"skipped\":%llu,\"ops\":%llu,\"checked\":%llu,\"forks\":%llu,\"holes\":%"
			"llu,"
			"\"mremaps\":%llu,\"lost\":%llu,\"swpout\":%llu,\"swpin\":%llu,"
			"\"zfolio_warnings\":%llu,\"seconds\":%.1f}\n",
			ret == PASS ? "pass" : "skip", U(base_seed), U(t.rounds), U(t.skipped),
			U(t.ops), U(t.checked), U(t.forks), U(t.holes), U(t.mremaps), U(t.lost),
			U(t.swpout), U(t.swpin), U(atomic_load(&zf_warnings)),
			(double)(now_ns() - t0) / 1e9);
		fclose(json);
	}
	return ret;
}
