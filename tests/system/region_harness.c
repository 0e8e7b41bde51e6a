/*
 * region_harness.c - the shared half of region_test (see region_harness.h): failing with
 * the phase named, the page contents, a region and its expected copy, checks of the
 * region's memory, and children that run one configuration each, with a timeout, so
 * that a region that crashes or hangs the process fails one configuration, named.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "region/pagemap_compat.h"
#include "region_harness.h"
#include "../unit/codec_pick.h"
#include "../unit/testutil.h" /* fill_text() */

const char *case_name = "";
char phase[200];
const uint8_t *sample;
size_t sample_pages;
int failures;

/* ---------------------------------------------------------------------------------- */
/* Failing, timing, waiting                                                           */
/* ---------------------------------------------------------------------------------- */

void fail_at(int line, const char *expr, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FAIL region_test %s [%s] line %d: %s: ", case_name, phase, line, expr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	_exit(FAIL); /* not exit(): threads may be stuck in faults */
}

void set_phase(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(phase, sizeof(phase), fmt, ap);
	va_end(ap);
}

/* gdb, if this machine has it: a watchdog that fires shows every thread's stack. */
static const char *gdb_path;

/*
 * From the watchdog's handler: gdb attached to this process prints its threads' stacks
 * (the faulting threads, the service threads, the evictor), so that a hang says where it
 * is, and a slow run is told from a stuck one. Only async-signal-safe calls.
 */
static void dump_stacks(void)
{
	extern char **environ;
	char pid[24], *p = pid + sizeof(pid) - 1;
	pid_t child;

	*p = 0;
	for (pid_t n = getpid(); n > 0; n /= 10)
		*--p = (char)('0' + n % 10);
	child = fork();
	if (child == 0) {
		char *argv[] = { "gdb", "-q", "-batch", "-nx",
				 "-p",	p,    "-ex",	"thread apply all bt",
				 NULL };

		dup2(2, 1);
		execve(gdb_path, argv, environ);
		_exit(127);
	}
	if (child > 0)
		waitpid(child, NULL, 0);
}

static void on_alarm(int sig)
{
	static const char msg[] = "FAIL region_test: timed out (a hang) in phase: ";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0 || write(2, phase, strlen(phase)) < 0 ||
	    write(2, "\n", 1) < 0)
		_exit(FAIL);
	if (gdb_path)
		dump_stacks();
	_exit(FAIL);
}

void set_sig(int sig, void (*handler)(int))
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sigaction(sig, &sa, NULL);
}

void watchdog(unsigned seconds)
{
	static const char *const gdbs[] = { "/usr/bin/gdb", "/usr/local/bin/gdb" };

	for (size_t i = 0; i < sizeof(gdbs) / sizeof(gdbs[0]) && !gdb_path; i++)
		if (!access(gdbs[i], X_OK))
			gdb_path = gdbs[i];
	set_sig(SIGALRM, on_alarm);
	alarm(seconds);
}

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void sleep_us(unsigned us)
{
	struct timespec ts = { us / 1000000, (long)(us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

void sleep_ms(unsigned ms)
{
	sleep_us(ms * 1000);
}

void wait_timed_out(int line, const char *cond, unsigned ms)
{
	fprintf(stderr, "region_test %s [%s] line %d: still not so after %u ms: %s\n", case_name,
		phase, line, ms, cond);
}

const char *mode_name(enum zf_fault_mode m)
{
	return m == ZF_FAULT_SIGBUS ? "sigbus" : "thread";
}

const char *unit_name(uint32_t unit)
{
	switch (unit) {
	case 4096:
		return "4k";
	case 16384:
		return "16k";
	case 65536:
		return "64k";
	case 2u << 20:
		return "2m";
	default:
		return "?";
	}
}

/* ---------------------------------------------------------------------------------- */
/* Content                                                                            */
/* ---------------------------------------------------------------------------------- */

void fill_u64(uint8_t *p, size_t len, uint64_t v)
{
	for (size_t i = 0; i < len; i += 8)
		memcpy(p + i, &v, 8);
}

void gen_page(uint8_t *p, uint64_t page, uint32_t ver, unsigned upages)
{
	const uint64_t unit = page / upages;
	const uint64_t h = stress_mix(page, ver, 0x7e57);
	uint64_t stamp[2];

	if (ver == 0 || (ver == 1 && unit % 7 == 3)) {
		memset(p, 0, PAGE);
		return;
	}
	if (unit % 7 == 5) {
		fill_u64(p, PAGE, stress_mix(unit, ver, 1) | 1);
		return;
	}
	if (h % 8 == 1) {
		fill_u64(p, PAGE, h | 1);
		return;
	}
	if (h % 8 == 0 && ver == 1) {
		memset(p, 0, PAGE);
		return;
	}
	/*
	 * Without the sample (a build without zstd cannot read it), words in a seeded order:
	 * lz4 compresses them 1.6x, the sample 2.7x, so the cases that fill a store see it
	 * fill (a fixed cycle of five words compressed 40x: "full" stored all 24 MiB in its
	 * 2 MiB pool).
	 */
	if (sample)
		memcpy(p, sample + (h >> 8) % sample_pages * PAGE, PAGE);
	else
		fill_text(p, PAGE, h >> 8);
	if (h % 8 == 2)
		memset(p + PAGE / 2, 0, PAGE / 2);
	stamp[0] = page;
	stamp[1] = (uint64_t)ver << 32 | 0x5a46u;
	memcpy(p, stamp, sizeof(stamp));
}

int page_is_zero(const uint8_t *p)
{
	uint64_t v;

	return zf_same_filled(p, PAGE, &v) && v == 0;
}

/* ---------------------------------------------------------------------------------- */
/* A region under test and what it must hold                                          */
/* ---------------------------------------------------------------------------------- */

zf_region_options ropts(enum zf_fault_mode mode, uint32_t unit)
{
	zf_region_options o;

	zf_region_options_init(&o);
	o.codec = test_codec_name(); /* for a store of the region's own */
	o.unit = unit;
	o.fault_mode = mode;
	o.owner = OWNER;
	return o;
}

zf_store *store_make_with(zf_store_options so, uint32_t unit, unsigned engines)
{
	zf_store *s = NULL;
	int ret;

	so.unit = unit > PAGE ? unit : 0;
	so.engines = engines;
	ret = zf_store_create(&so, &s);
	CHECK(ret == 0, "zf_store_create(unit %u): %s", unit, zf_strerror(ret));
	return s;
}

zf_store_options sopts(void)
{
	zf_store_options so;

	zf_store_options_init(&so);
	so.codec = test_codec_name();
	return so;
}

zf_store *store_make(uint32_t unit, unsigned engines)
{
	return store_make_with(sopts(), unit, engines);
}

static int uffd_unavailable(int err)
{
	return err == -EPERM || err == -ENOSYS || err == -ENOTSUP;
}

/*
 * ZF_TEST_FRAME=2m runs the cases with 2 MiB frames (zf_region_options.frame), where the
 * options allow them (not with clean copies or per-page swap-in). A case that sets a
 * frame itself keeps it.
 */
uint32_t rg_frame(const zf_region_options *o)
{
	const char *f = getenv("ZF_TEST_FRAME");

	if (o->frame)
		return o->frame;
	return f && !strcmp(f, "2m") && !o->keep_clean && o->swapin != ZF_SWAPIN_PER_PAGE
		       ? ZF_FRAME_2M
		       : 0;
}

size_t rg_place_unit(const zf_region_options *o)
{
	const uint32_t frame = rg_frame(o);

	return frame ? frame : o->unit;
}

size_t rg_size_for(const zf_region_options *o, size_t size)
{
	const uint32_t frame = rg_frame(o);
	size_t n;

	if (!frame)
		return size;
	n = (size + o->unit - 1) / o->unit;
	return (n < RG_FRAMES_MAX ? n : RG_FRAMES_MAX) * (size_t)frame;
}

static zf_region *region_make(zf_store *store, size_t size, const zf_region_options *o)
{
	zf_region *r = NULL;
	int ret = zf_region_create(store, size, o, &r);

	if (uffd_unavailable(ret)) {
		printf("SKIP region_test %s: zf_region_create: %s (no userfaultfd here)\n",
		       case_name, zf_strerror(ret));
		fflush(stdout);
		_exit(SKIP);
	}
	CHECK(ret == 0 && r, "zf_region_create(%s, unit %u, frame %u, %llu bytes): %s",
	      mode_name(o->fault_mode), o->unit, o->frame, U(size), zf_strerror(ret));
	return r;
}

void rg_open(struct rg *g, const zf_region_options *opts, size_t size, zf_store *store)
{
	zf_region_options o = *opts;
	const size_t place = rg_place_unit(&o);

	o.frame = rg_frame(&o);
	size = rg_size_for(&o, size);
	memset(g, 0, sizeof(*g));
	g->r = region_make(store, size, &o);
	g->own_store = store != NULL;
	g->store = store ? store : zf_region_store(g->r);
	CHECK(g->store, "zf_region_store() is NULL");
	g->mode = o.fault_mode;
	g->base = zf_region_base(g->r);
	g->size = zf_region_size(g->r);
	g->unit = zf_region_unit(g->r);
	CHECK(g->unit == place, "zf_region_unit() %llu, asked for %llu", U(g->unit), U(place));
	CHECK(g->size >= size && g->size % g->unit == 0 && g->size - size < g->unit,
	      "zf_region_size() %llu for %llu bytes of %llu-byte units", U(g->size), U(size),
	      U(g->unit));
	CHECK(((uintptr_t)g->base & (PAGE - 1)) == 0, "base %p", (void *)g->base);
	CHECK(!o.frame || ((uintptr_t)g->base & (o.frame - 1)) == 0,
	      "base %p of a region of %u-byte frames", (void *)g->base, o.frame);
	g->nunits = g->size / g->unit;
	g->npages = g->size / PAGE;
	g->upages = (unsigned)(g->unit / PAGE);
	g->order = (unsigned)__builtin_ctz(g->upages);
	g->sunit = o.unit;
	/* Before anything touches it: the frames mapped with the huge zero page at creation. */
	g->zero_mapped = o.frame ? rst(g->r).thp_zero : 0;
	CHECK(g->zero_mapped <= g->nunits, "thp_zero %llu at creation, %llu frames",
	      U(g->zero_mapped), U(g->nunits));
	g->want = aligned_alloc(PAGE, g->size);
	CHECK(g->want, "out of memory");
	memset(g->want, 0, g->size);
}

void rg_close(struct rg *g)
{
	zf_region_destroy(g->r);
	if (g->own_store) {
		const zf_store_stats ss = sst(g->store);

		CHECK(ss.stored_pages == 0,
		      "after zf_region_destroy() the store still holds %llu of its pages",
		      U(ss.stored_pages));
		zf_store_destroy(g->store);
	}
	free(g->want);
	memset(g, 0, sizeof(*g));
}

zf_region_stats rst(zf_region *r)
{
	zf_region_stats s;

	memset(&s, 0, sizeof(s));
	zf_region_get_stats(r, &s, sizeof(s));
	return s;
}

zf_store_stats sst(zf_store *s)
{
	zf_store_stats st;

	memset(&st, 0, sizeof(st));
	zf_store_get_stats(s, &st, sizeof(st));
	return st;
}

uint64_t lat_sum(const zf_region_stats *st)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < ZF_REGION_LAT_BUCKETS; i++)
		n += st->fault_lat[i];
	return n;
}

void want_units(struct rg *g, size_t u0, size_t u1, uint32_t ver)
{
	for (size_t p = u0 * g->upages; p < u1 * g->upages; p++)
		gen_page(g->want + p * PAGE, p, ver, g->upages);
}

void rg_fill(struct rg *g, size_t u0, size_t u1, uint32_t ver)
{
	want_units(g, u0, u1, ver);
	memcpy(g->base + u0 * g->unit, g->want + u0 * g->unit, (u1 - u0) * g->unit);
}

void zero_want(struct rg *g, size_t off, size_t len)
{
	memset(g->want + off, 0, len);
}

void verify_at(const struct rg *g, size_t off, size_t len, const char *what, int line)
{
	const uint8_t *have = g->base + off, *want = g->want + off;
	uint8_t copy[PAGE];
	size_t i = 0, pg;

	if (!memcmp(have, want, len))
		return;
	while (have[i] == want[i])
		i++;
	pg = (off + i) / PAGE;
	memcpy(copy, g->base + pg * PAGE, PAGE);
	fail_at(line, "verify",
		"%s: byte %llu (page %llu of unit %llu, +%llu) reads %#x, want %#x; the page %s; "
		"want's page is %s",
		what, U(off + i), U(pg), U(pg / g->upages), U((off + i) % PAGE), have[i], want[i],
		page_is_zero(copy) ? "reads all zeros" : "is not zero",
		page_is_zero(g->want + pg * PAGE) ? "zero" : "not zero");
}

size_t present_pages(const void *addr, size_t len)
{
	const size_t n = len / PAGE;
	unsigned char *vec = malloc(n);
	size_t count = 0;

	CHECK(vec, "out of memory");
	CHECK(mincore((void *)addr, len, vec) == 0, "mincore: %s", strerror(errno));
	for (size_t i = 0; i < n; i++)
		count += vec[i] & 1;
	free(vec);
	return count;
}

/* Pages of [addr, addr + len) that map the zero page (or the huge zero page); 0 untold. */
static size_t zero_pfn_pages(const void *addr, size_t len)
{
	const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	struct page_region out[32];
	struct pm_scan_arg a = {
		.size = sizeof(a),
		.start = (uintptr_t)addr,
		.end = (uintptr_t)addr + len,
		.vec = (uintptr_t)out,
		.vec_len = sizeof(out) / sizeof(out[0]),
		.category_mask = PAGE_IS_PFNZERO,
		.return_mask = PAGE_IS_PFNZERO,
	};
	size_t count = 0;

	if (fd < 0)
		return 0;
	for (;;) {
		const long n = ioctl(fd, PAGEMAP_SCAN, &a);

		if (n < 0)
			break;
		for (long i = 0; i < n; i++)
			count += (out[i].end - out[i].start) / PAGE;
		if (a.walk_end >= a.end)
			break;
		a.start = a.walk_end;
	}
	close(fd);
	return count;
}

size_t memory_pages(const void *addr, size_t len)
{
	const size_t present = present_pages(addr, len), zero = zero_pfn_pages(addr, len);

	return present > zero ? present - zero : 0;
}

int unit_present(const struct rg *g, size_t u)
{
	return present_pages(g->base + u * g->unit, g->unit) == g->upages;
}

int unit_absent(const struct rg *g, size_t u)
{
	return present_pages(g->base + u * g->unit, g->unit) == 0;
}

size_t units_in_memory(const struct rg *g, size_t u0, size_t u1)
{
	size_t n = 0;

	for (size_t u = u0; u < u1; u++)
		n += !unit_absent(g, u);
	return n;
}

void pageout_units(struct rg *g, size_t u0, size_t u1, size_t want, int line)
{
	const long n = zf_region_pageout(g->r, g->base + u0 * g->unit, (u1 - u0) * g->unit);

	if (n != (long)want) {
		const zf_region_stats st = rst(g->r);

		/* reject: claimed, and given back (the kernel would not move a page, or the
		 * store refused it); the rest were not claimed at all. */
		fail_at(line, "pageout",
			"zf_region_pageout() of units [%llu, %llu) evicted %ld, want %llu "
			"(%llu of them have pages in memory now; units given back so far %llu, "
			"resident %llu)",
			U(u0), U(u1), n, U(want), U(units_in_memory(g, u0, u1)), U(st.reject),
			U(st.resident_bytes / g->unit));
	}
}

size_t pick_compressible(const struct rg *g, size_t from)
{
	for (size_t u = from; u < g->nunits; u++)
		if (!zf_same_filled(g->want + u * g->unit, g->unit, NULL))
			return u;
	FAILF("no compressible unit from %llu", U(from));
}

/* ---------------------------------------------------------------------------------- */
/* Children                                                                           */
/* ---------------------------------------------------------------------------------- */

/*
 * Waits for child pid to end, for timeout_s seconds (stretched under a sanitizer) and a
 * little more; returns its wait status, or -1 when it ran past that (it is killed then).
 */
static int wait_child(pid_t pid, unsigned timeout_s)
{
	const uint64_t deadline = now_ns() + (uint64_t)(DEADLINE_S(timeout_s) + 3) * 1000000000u;
	int st;

	for (;;) {
		const pid_t w = waitpid(pid, &st, WNOHANG);

		CHECK(w >= 0, "waitpid: %s", strerror(errno));
		if (w == pid)
			return st;
		if (now_ns() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		sleep_ms(1);
	}
}

static int start_child(child_fn *fn, const struct cfg *cfg, unsigned timeout_s, int keep_sigbus)
{
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		const struct rlimit no_core = { 0, 0 };

		/* Children that should die do: no core files (slow, and litter). */
		setrlimit(RLIMIT_CORE, &no_core);
		failures = 0;
		set_sig(SIGSEGV, SIG_DFL);
		if (!keep_sigbus)
			set_sig(SIGBUS, SIG_DFL);
		watchdog(DEADLINE_S(timeout_s));
		_exit(fn(cfg));
	}
	return wait_child(pid, timeout_s);
}

int run_child(child_fn *fn, const struct cfg *cfg, unsigned timeout_s)
{
	return start_child(fn, cfg, timeout_s, 0);
}

int run_child_keep_sigbus(child_fn *fn, const struct cfg *cfg, unsigned timeout_s)
{
	return start_child(fn, cfg, timeout_s, 1);
}

const char *status_text(int st)
{
	static char buf[80];

	if (st == -1)
		snprintf(buf, sizeof(buf), "hung (killed after its timeout)");
	else if (WIFEXITED(st))
		snprintf(buf, sizeof(buf), "exited with %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, sizeof(buf), "killed by signal %d (%s)", WTERMSIG(st),
			 strsignal(WTERMSIG(st)));
	else
		snprintf(buf, sizeof(buf), "status %#x", st);
	return buf;
}

/* A child that exited 77 skips the whole case (no userfaultfd). */
static void skip_if_skipped(int st, const char *what)
{
	if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == SKIP) {
		printf("SKIP region_test %s (%s)\n", case_name, what);
		fflush(stdout);
		exit(SKIP);
	}
}

void expect_ok(int st, const char *what)
{
	skip_if_skipped(st, what);
	if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		printf("ok   %s %s\n", case_name, what);
		return;
	}
	fprintf(stderr, "FAIL region_test %s: %s: the child %s\n", case_name, what,
		status_text(st));
	failures++;
}

void expect_signal(int st, int sig, const char *what)
{
	skip_if_skipped(st, what);
	if (st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == sig) {
		printf("ok   %s %s (died of %s, as it should)\n", case_name, what, strsignal(sig));
		return;
	}
	fprintf(stderr, "FAIL region_test %s: %s: the child should die of %s but %s\n", case_name,
		what, strsignal(sig), status_text(st));
	failures++;
}

static int mark_fd = -1; /* in a child of expect_death_after_mark(): its end of the pipe */

void child_mark(void)
{
	CHECK(mark_fd >= 0 && write(mark_fd, "T", 1) == 1, "the mark to the parent");
}

void expect_death_after_mark(child_fn *fn, const struct cfg *cfg, unsigned timeout_s, int sig,
			     const char *what)
{
	char got = 0;
	int pfd[2], st;

	CHECK(pipe(pfd) == 0, "pipe: %s", strerror(errno));
	mark_fd = pfd[1];
	st = run_child(fn, cfg, timeout_s);
	mark_fd = -1;
	close(pfd[1]);
	if (read(pfd[0], &got, 1) != 1 && !(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) != 0)) {
		fprintf(stderr, "FAIL region_test %s: %s: the child %s before its fatal access\n",
			case_name, what, status_text(st));
		failures++;
	} else {
		expect_signal(st, sig, what);
	}
	close(pfd[0]);
}

int selected(const char *name)
{
	const char *only = getenv("ZF_REGION_ONLY");

	return !only || strstr(name, only);
}

void each_config_modes(const char *what, child_fn *fn, const uint32_t *units, size_t nunits,
		       int variant, unsigned timeout_s, enum config_modes modes)
{
	for (int m = 0; m < (int)modes; m++) {
		for (size_t i = 0; i < nunits; i++) {
			const struct cfg c = { m ? ZF_FAULT_SIGBUS : ZF_FAULT_THREAD, units[i],
					       variant };
			char name[96];

			snprintf(name, sizeof(name), "%s %s %s", what, mode_name(c.mode),
				 unit_name(c.unit));
			if (!selected(name))
				continue;
			set_phase("%s", name);
			expect_ok(run_child(fn, &c, timeout_s), name);
		}
	}
}

void each_config(const char *what, child_fn *fn, const uint32_t *units, size_t nunits, int variant,
		 unsigned timeout_s)
{
	each_config_modes(what, fn, units, nunits, variant, timeout_s, BOTH_MODES);
}
