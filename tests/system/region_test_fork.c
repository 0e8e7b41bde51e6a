/*
 * region_test_fork.c - the process around the region.
 *
 *  fork           MADV_DONTFORK policy: a child touching the region dies of SIGSEGV, forks
 *                 while threads fault leave the parent's data intact, a child can make a
 *                 region of its own (row 4).
 *  exit_inflight  exit() and zf_region_destroy() while threads fault (also while they wait
 *                 for reclaim): the process ends, no hang (rows 7, 9). The exit or destroy
 *                 comes once the threads have faulted (and waited for reclaim) for a while.
 *  fork_copy      ZF_FORK_COPY: a child sees every byte as it was at the fork, evicted
 *                 units too, and writes, evicts and reads back its own; the parent's
 *                 writes while the child lives stay the parent's; a grandchild; forks
 *                 while a thread faults and evicts; a fork while a swap-in is held
 *                 between its read and its placement (test point) waits for it.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/test_point.h"
#include "region_harness.h"

/* ---------------------------------------------------------------------------------- */
/* fork                                                                               */
/* ---------------------------------------------------------------------------------- */

struct fork_ctx {
	struct rg *g;
	atomic_int stop;
	atomic_ullong rounds;
};

/* Pages random units out and reads others back, in the parent, while it forks. */
static void *fork_toucher_main(void *arg)
{
	struct fork_ctx *fc = arg;
	struct rg *g = fc->g;
	uint64_t rng = 3;

	while (!atomic_load(&fc->stop)) {
		const size_t u = stress_rand(&rng) % g->nunits, v = stress_rand(&rng) % g->nunits;

		/* The other threads only read: u, read, stays resident until its pageout. */
		VERIFY_UNITS(g, u, u + 1, "the parent's unit while it forks");
		PAGEOUT(g, u, u + 1, 1);
		VERIFY_UNITS(g, v, v + 1, "the parent's unit while it forks");
		atomic_fetch_add(&fc->rounds, 1);
	}
	return NULL;
}

/* What the children of fork_one() get: the parent's region, and a unit of it. */
static struct rg *fork_g;
static size_t fork_u;

static int fork_child_read(const struct cfg *c)
{
	(void)c;
	touch_read(fork_g->base + fork_u * fork_g->unit + (fork_g->upages - 1) * PAGE);
	return 3; /* it should not get here */
}

static int fork_child_write(const struct cfg *c)
{
	(void)c;
	fork_g->base[fork_u * fork_g->unit + 5] = 1;
	return 3;
}

static int fork_child_exit(const struct cfg *c)
{
	(void)c;
	return 0;
}

/* The child makes a region of its own and uses it. */
static int fork_child_region(const struct cfg *c)
{
	const zf_region_options o = ropts(c->mode, c->unit);
	struct rg g;

	set_phase("fork: a region of the child's own");
	rg_open(&g, &o, 8 * (size_t)c->unit, NULL);
	rg_fill(&g, 0, 8, 2);
	PAGEOUT(&g, 0, 8, 8);
	VERIFY(&g, 0, g.size, "the child's own region");
	rg_close(&g);
	return 0;
}

/*
 * fork() from the region's process; the child runs fn on unit u of g, with the signal
 * handlers it inherits (a region of its own in SIGBUS mode relies on the one for SIGBUS).
 */
static int fork_run(child_fn *fn, const struct cfg *c, struct rg *g, size_t u)
{
	fork_g = g;
	fork_u = u;
	return run_child_keep_sigbus(fn, c, 15);
}

static int fork_one(const struct cfg *c)
{
	const zf_region_options o = ropts(c->mode, c->unit);
	struct fork_ctx fc;
	pthread_t t;
	struct rg g;
	char what[120];
	size_t n;

	rg_open(&g, &o, (c->unit == KiB(4) ? 256 : 32) * (size_t)c->unit, NULL);
	n = g.nunits; /* fewer with frames */
	rg_fill(&g, 0, n, 2);
	PAGEOUT(&g, 0, n / 2, n / 2);
	memset(&fc, 0, sizeof(fc));
	fc.g = &g;
	CHECK(!pthread_create(&t, NULL, fork_toucher_main, &fc), "thread");
	for (int i = 0; i < 3; i++) {
		snprintf(what, sizeof(what), "fork %s %s: the child reads an evicted unit",
			 mode_name(c->mode), unit_name(c->unit));
		expect_signal(fork_run(fork_child_read, c, &g, (size_t)i), SIGSEGV, what);
		snprintf(what, sizeof(what), "fork %s %s: the child reads a resident unit",
			 mode_name(c->mode), unit_name(c->unit));
		touch_read(g.base + (n - 1 - (size_t)i) * g.unit);
		expect_signal(fork_run(fork_child_read, c, &g, n - 1 - (size_t)i), SIGSEGV, what);
		snprintf(what, sizeof(what), "fork %s %s: the child writes the region",
			 mode_name(c->mode), unit_name(c->unit));
		expect_signal(fork_run(fork_child_write, c, &g, (size_t)i * 5), SIGSEGV, what);
	}
	/* Many forks while the toucher faults and evicts. */
	for (int i = 0; i < 30; i++) {
		const int st = fork_run(fork_child_exit, c, &g, 0);

		CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "a child that only exits: %s", status_text(st));
		VERIFY_UNITS(&g, (size_t)i % n, (size_t)i % n + 1, "the parent's data after fork");
	}
	WAIT_UNTIL(atomic_load(&fc.rounds) > 0, WAIT_MS);
	atomic_store(&fc.stop, 1);
	pthread_join(t, NULL);
	CHECK(atomic_load(&fc.rounds) > 0, "the toucher did not run");
	VERIFY(&g, 0, g.size, "the parent's region after its children");

	/* A quiet parent: the child can make and use a region of its own. */
	snprintf(what, sizeof(what), "fork %s %s: the child makes a region of its own",
		 mode_name(c->mode), unit_name(c->unit));
#ifndef ZF_TSAN
	expect_ok(fork_run(fork_child_region, c, &g, 0), what);
#else
	(void)fork_child_region;
#endif
	PAGEOUT(&g, 0, n, n); /* every unit was read just above */
	VERIFY(&g, 0, g.size, "the parent's region after everything");
	CHECK(rst(g.r).fault_fail == 0, "fault_fail in the parent");
	rg_close(&g);
	return failures ? FAIL : PASS;
}

int case_fork(void)
{
	static const uint32_t units[] = { KiB(4), KiB(64) };

	each_config("fork", fork_one, units, 2, 0, 25);
	return failures ? FAIL : PASS;
}

/* ---------------------------------------------------------------------------------- */
/* exit_inflight                                                                      */
/* ---------------------------------------------------------------------------------- */

/* What the children keep in globals: reachable, so that a leak checker at exit is quiet. */
static struct rg xg;
static atomic_int x_stop, x_destroying;
static atomic_ullong x_steps; /* of the walkers and readers: faults are in flight */
static __thread sigjmp_buf x_jmp;
static __thread int x_jmp_armed;

static void x_on_segv(int sig)
{
	if (x_jmp_armed)
		siglongjmp(x_jmp, 1);
	set_sig(sig, SIG_DFL);
	raise(sig);
}

/* Evicts a slice and reads it back, over and over (variants "exit" and "limit"). */
static void *x_walker_main(void *arg)
{
	const size_t id = (size_t)(uintptr_t)arg, per = xg.nunits / 3;
	uint64_t rng = id;

	for (;;) {
		const size_t u = id * per + stress_rand(&rng) % per;

		if (stress_rand(&rng) % 2)
			zf_region_pageout(xg.r, xg.base + u * xg.unit, xg.unit);
		if (memcmp(xg.base + u * xg.unit, xg.want + u * xg.unit, xg.unit) &&
		    !atomic_load(&x_destroying))
			VERIFY_UNITS(&xg, u, u + 1, "a unit faulted before the process exits");
		atomic_fetch_add_explicit(&x_steps, 1, memory_order_relaxed);
	}
	return NULL;
}

/*
 * Reads words of random pages (variant "destroy"): right until the destroy begins,
 * anything after; SIGSEGV once the memory is unmapped ends the thread.
 */
static void *x_reader_main(void *arg)
{
	volatile uint64_t rng_v = (uintptr_t)arg; /* survives the siglongjmp */
	uint64_t rng;

	if (sigsetjmp(x_jmp, 1))
		return NULL;
	rng = rng_v;
	x_jmp_armed = 1;
	while (!atomic_load(&x_stop)) {
		const size_t p = stress_rand(&rng) % xg.npages;
		const size_t w = stress_rand(&rng) % (PAGE / 8);
		const uint64_t have = ((const volatile uint64_t *)(void *)(xg.base + p * PAGE))[w];
		uint64_t want;

		memcpy(&want, xg.want + p * PAGE + w * 8, 8);
		if (have != want && !atomic_load(&x_destroying))
			FAILF("page %llu word %llu reads %#llx, want %#llx (before the destroy)",
			      U(p), U(w), U(have), U(want));
		atomic_fetch_add_explicit(&x_steps, 1, memory_order_relaxed);
	}
	x_jmp_armed = 0;
	return NULL;
}

/*
 * LeakSanitizer's check at exit stops every thread with ptrace: a service thread stopped
 * so cannot read the REMOVE event of an eviction's madvise() in flight, which then waits
 * in the kernel (D state) and never stops: the check hangs. (Any ptrace stop of a service
 * thread does that, for as long as it lasts.) The exit() variants run the check early,
 * which turns the one at exit off; without LeakSanitizer the symbol is not there.
 */
extern void __lsan_do_leak_check(void) __attribute__((weak));

/*
 * Until the threads have made steps steps between them (faults served, so they run)
 * and, with a limit, faults have waited for reclaim.
 */
static void exit_wait_inflight(int limited, unsigned long long steps)
{
	WAIT_UNTIL(atomic_load(&x_steps) >= steps && (!limited || rst(xg.r).limit_waits > 0),
		   WAIT_MS);
	CHECK(atomic_load(&x_steps) >= steps, "the threads made %llu steps of %llu",
	      U(atomic_load(&x_steps)), steps);
	CHECK(!limited || rst(xg.r).limit_waits > 0, "no fault waited for reclaim");
}

static int exit_child(const struct cfg *c)
{
	zf_region_options o = ropts(c->mode, c->unit);
	const int limited = c->variant == 2 || c->variant == 3;
	pthread_t t[4];
	uint64_t t0;
	size_t n;
	long e;

	if (limited) {
		/* Of the unit the region evicts: the frame, with frames. */
		o.limit = 4 * (uint64_t)rg_place_unit(&o);
		o.reclaim_batch = rg_place_unit(&o);
	}
	rg_open(&xg, &o, 48 / TSAN_DIV * (size_t)c->unit, NULL);
	n = xg.nunits; /* fewer with frames */
	rg_fill(&xg, 0, n, 2);
	/* With a limit, reclaim evicts at the same time, down to limit - batch at most. */
	e = zf_region_pageout(xg.r, xg.base, xg.size);
	CHECK(limited ? e > 0 : e == (long)n, "pageout of %llu units written: %ld", U(n), e);
	if (c->variant == 0 || c->variant == 2) {
		/* exit() with faults (and waits for reclaim) in flight. */
		if (__lsan_do_leak_check)
			__lsan_do_leak_check();
		for (size_t i = 0; i < 3; i++)
			CHECK(!pthread_create(&t[i], NULL, x_walker_main, (void *)(uintptr_t)i),
			      "thread");
		exit_wait_inflight(limited, 3 * 8);
		atomic_store(&x_destroying, 1); /* what exit() does to the region is its own */
		exit(0);
	}
	/* zf_region_destroy() with faults in flight, then exit. */
	set_sig(SIGSEGV, x_on_segv);
	for (size_t i = 0; i < 4; i++)
		CHECK(!pthread_create(&t[i], NULL, x_reader_main, (void *)(uintptr_t)(i + 1)),
		      "thread");
	exit_wait_inflight(limited, 4 * 64);
	/* The readers brought units in (reclaim leaves limit - batch at the least). */
	e = zf_region_pageout(xg.r, xg.base, xg.size);
	CHECK(e > 0, "pageout after the readers' faults: %ld", e);
	atomic_store(&x_destroying, 1);
	t0 = now_ns();
	zf_region_destroy(xg.r);
	CHECK(now_ns() - t0 < DEADLINE_MS(5000) * 1000000ull, "zf_region_destroy() took %llu ms",
	      U((now_ns() - t0) / 1000000));
	atomic_store(&x_stop, 1);
	for (size_t i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	free(xg.want);
	exit(0);
}

int case_exit_inflight(void)
{
	static const char *const names[] = { "exit() with faults in flight",
					     "zf_region_destroy() with faults in flight",
					     "exit() while faults wait for reclaim",
					     "zf_region_destroy() while faults wait for reclaim" };

	for (int v = 0; v < 4; v++) {
		for (int m = 0; m < 2; m++) {
			for (int rep = 0; rep < 2; rep++) {
				const struct cfg c = { m ? ZF_FAULT_SIGBUS : ZF_FAULT_THREAD,
						       KiB(64), v };
				char what[120];

				snprintf(what, sizeof(what), "%s (%s, run %d)", names[v],
					 mode_name(c.mode), rep + 1);
				if (!selected(what))
					continue;
				set_phase("%s", what);
				expect_ok(run_child(exit_child, &c, 6), what);
			}
		}
	}
	return failures ? FAIL : PASS;
}

/* ---------------------------------------------------------------------------------- */
/* fork_copy                                                                          */
/* ---------------------------------------------------------------------------------- */

/*
 * ZF_FORK_COPY: a child sees every byte of the region as it was at the fork, evicted
 * units included, in a region of its own, and neither side sees the other's writes.
 * Version 2 is the parent's data at each fork.
 */
static struct rg *cg;
static int cpipe[2] = { -1, -1 }; /* the parent's word to the child: "I wrote" */

/* The child: all of version 2, then its own writes (3), evicted and read back. */
static int copy_child_own(const struct cfg *c)
{
	const size_t n = cg->nunits;

	(void)c;
	set_phase("fork_copy: the child");
	VERIFY(cg, 0, cg->size, "the child's copy, evicted and resident units");
	rg_fill(cg, 0, n / 2, 3);
	PAGEOUT(cg, 0, n, n);
	VERIFY(cg, 0, cg->size, "the child's writes, evicted and back");
	return failures ? 1 : 0;
}

/* The child waits until the parent wrote version 4 over everything, then checks 2. */
static int copy_child_private(const struct cfg *c)
{
	char b;

	(void)c;
	set_phase("fork_copy: the child while the parent writes");
	CHECK(read(cpipe[0], &b, 1) == 1, "the parent's word: %s", strerror(errno));
	VERIFY(cg, 0, cg->size, "the child's copy after the parent wrote its own");
	return failures ? 1 : 0;
}

/* The child forks a grandchild, which checks version 2 too. */
static int copy_child_nested(const struct cfg *c)
{
	int st;

	set_phase("fork_copy: a grandchild");
	/* The units resident at the fork, shared with the parent: they go all the same. */
	PAGEOUT(cg, cg->nunits / 2, cg->nunits, cg->nunits - cg->nunits / 2);
	st = run_child_keep_sigbus(copy_child_own, c, 30);
	CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the grandchild: %s",
	      status_text(st));
	VERIFY(cg, 0, cg->size, "the child's copy after its child");
	return failures ? 1 : 0;
}

/* A swap-in held between its read and its placement while another thread forks. */
struct held {
	atomic_int armed, reached, forking;
};

static int hold_swapin(enum test_point point, void *arg)
{
	struct held *h = arg;
	int one = 1;

	(void)point;
	if (!atomic_compare_exchange_strong(&h->armed, &one, 0))
		return 0;
	atomic_store(&h->reached, 1);
	/* Until the fork is under way, and a while longer: it must wait for this swap-in. */
	WAIT_UNTIL(atomic_load(&h->forking), WAIT_MS);
	usleep(50 * 1000);
	return 0;
}

static void *touch_evicted_main(void *arg)
{
	touch_read(arg);
	return NULL;
}

static int copy_one(const struct cfg *c)
{
	zf_region_options o = ropts(c->mode, c->unit);
	struct fork_ctx fc;
	struct held h;
	pthread_t t;
	struct rg g;
	size_t n;
	int st;

	o.fork = ZF_FORK_COPY;
	rg_open(&g, &o, (c->unit == KiB(4) ? 256 : 32) * (size_t)c->unit, NULL);
	cg = &g;
	n = g.nunits;
	rg_fill(&g, 0, n, 2);
	PAGEOUT(&g, 0, n / 2, n / 2);

	/* The child's copy, and its own writes; the parent keeps its own. */
	expect_ok(run_child_keep_sigbus(copy_child_own, c, 30), "fork_copy: the child's copy");
	VERIFY(&g, 0, g.size, "the parent's data after its child wrote");

	/* The parent writes while the child lives: the child keeps version 2. */
	CHECK(!pipe(cpipe), "pipe: %s", strerror(errno));
	{
		pid_t pid = fork();

		if (!pid) {
			close(cpipe[1]);
			alarm(DEADLINE_S(30));
			_exit(copy_child_private(c));
		}
		CHECK(pid > 0, "fork: %s", strerror(errno));
		close(cpipe[0]);
		rg_fill(&g, 0, n, 4);
		PAGEOUT(&g, 0, n / 2, n / 2);
		CHECK(write(cpipe[1], "w", 1) == 1, "write to the child");
		close(cpipe[1]);
		CHECK(waitpid(pid, &st, 0) == pid, "waitpid: %s", strerror(errno));
		expect_ok(st, "fork_copy: the child while the parent writes");
		VERIFY(&g, 0, g.size, "the parent's own writes after the child");
		rg_fill(&g, 0, n, 2); /* version 2 again for the children below */
		PAGEOUT(&g, 0, n / 2, n / 2);
	}

	/* A grandchild. */
	expect_ok(run_child_keep_sigbus(copy_child_nested, c, 60), "fork_copy: a grandchild");

	/* Forks while another thread faults and evicts. */
	memset(&fc, 0, sizeof(fc));
	fc.g = &g;
	CHECK(!pthread_create(&t, NULL, fork_toucher_main, &fc), "thread");
	for (int i = 0; i < 10; i++)
		expect_ok(run_child_keep_sigbus(copy_child_own, c, 30),
			  "fork_copy: a child while the parent faults and evicts");
	atomic_store(&fc.stop, 1);
	pthread_join(t, NULL);

	/* A fork while a swap-in is between its read and its placement: it waits for it. */
	touch_read(g.base);
	PAGEOUT(&g, 0, 1, 1);
	memset(&h, 0, sizeof(h));
	atomic_store(&h.armed, 1);
	test_point_set(TP_SWAPIN_LOADED, hold_swapin, &h);
	CHECK(!pthread_create(&t, NULL, touch_evicted_main, g.base), "thread");
	WAIT_UNTIL(atomic_load(&h.reached), WAIT_MS);
	CHECK(atomic_load(&h.reached), "the swap-in did not reach the test point");
	atomic_store(&h.forking, 1);
	expect_ok(run_child_keep_sigbus(copy_child_own, c, 30),
		  "fork_copy: a fork while a swap-in is held");
	pthread_join(t, NULL);
	test_point_set(TP_SWAPIN_LOADED, NULL, NULL);

	VERIFY(&g, 0, g.size, "the parent's region after everything");
	CHECK(rst(g.r).fault_fail == 0, "fault_fail in the parent");
	rg_close(&g);
	printf("ok   fork_copy %s %s%s\n", mode_name(c->mode), unit_name(c->unit),
	       rg_frame(&o) ? " in 2m frames" : "");
	return failures ? FAIL : PASS;
}

int case_fork_copy(void)
{
	static const uint32_t units[] = { KiB(4), KiB(64) };

#ifdef ZF_TSAN
	/* TSan cannot start threads in a child of a multithreaded fork() (region_test_main.c). */
	(void)units;
	(void)copy_one;
	printf("skip fork_copy under TSan\n");
	return PASS;
#else
	each_config("fork_copy", copy_one, units, 2, 0, 100);
	return failures ? FAIL : PASS;
#endif
}
