/*
 * region_test_signal.c - the case "signal": signals and the region.
 *
 * Faults taken inside a signal handler; a process-directed signal is never run by a
 * zfolio thread - service, reclaim or readahead - (they block async signals, row 6); a
 * storm of signals and SIGPROF (EINTR everywhere, row 6), for a number of rounds (fewer
 * under a sanitizer); SIGBUS mode chains SIGBUS outside every region to the program's
 * handler (SA_SIGINFO and plain), and with SIG_DFL or SIG_IGN the process still dies of
 * it. The handlers tell the test they ran through semaphores (sem_post() is
 * async-signal-safe).
 */
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "region_harness.h"

static struct rg sg; /* the region the handlers read */
static atomic_int s_unit, s_result;
static _Atomic pid_t s_tid; /* the thread that ran the handler */
static sem_t s_handled; /* posted by the handler once it read the unit */

/* Reads a whole evicted unit inside a signal handler: 1 if it holds the right bytes. */
static void s_on_usr1(int sig)
{
	const int saved_errno = errno;
	const size_t u = (size_t)atomic_load(&s_unit);

	(void)sig;
	s_tid = gettid();
	s_result = !memcmp(sg.base + u * sg.unit, sg.want + u * sg.unit, sg.unit);
	sem_post(&s_handled);
	errno = saved_errno;
}

/* sem_wait() for at most ms milliseconds: 0, or -ETIMEDOUT. */
static int sem_wait_ms(sem_t *sem, unsigned ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	while (sem_clockwait(sem, CLOCK_MONOTONIC, &ts))
		if (errno != EINTR)
			return -errno;
	return 0;
}

static atomic_ullong s_storm;

static void s_on_storm(int sig)
{
	const int saved_errno = errno;

	(void)sig;
	atomic_fetch_add(&s_storm, 1);
	errno = saved_errno;
}

static _Atomic pid_t s_helper_tid;
static sem_t s_helper_ready, s_helper_quit;

/* A thread that takes SIGUSR1 for the process (the main thread blocks it). */
static void *s_helper_main(void *arg)
{
	(void)arg;
	s_helper_tid = gettid();
	sem_post(&s_helper_ready);
	while (sem_wait(&s_helper_quit) && errno == EINTR)
		;
	return NULL;
}

static atomic_int s_storm_stop;

/* Sends SIGUSR2 to the process every 30 us or so (a rate, not a wait). */
static void *s_storm_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&s_storm_stop)) {
		kill(getpid(), SIGUSR2);
		sleep_us(30);
	}
	return NULL;
}

/*
 * Unit u of sg out of memory, for a handler to read: this pageout evicts it, or reclaim
 * did before (the region is at its limit). Readahead, started by the handler's fault on
 * u - 2 or u - 1, may bring it back in between the pageout and the look (CI once saw
 * unit 8 so, ASan): the pageout is tried again until the unit stays out.
 */
static void evict_unit(size_t u)
{
	long e = 0;

	for (int tries = 0; tries < 1000; tries++) {
		e = zf_region_pageout(sg.r, sg.base + u * sg.unit, sg.unit);
		if (e < 0 || e > 1 || unit_absent(&sg, u))
			break;
		sleep_us(100);
	}
	CHECK((e == 0 || e == 1) && unit_absent(&sg, u), "pageout: %ld, unit %llu still in memory",
	      e, U(u));
}

/*
 * variant 0: faults in SIGUSR1 handlers (raised in the thread; and sent to the process,
 * which only a helper thread of ours may take: a zfolio thread that does not block async
 * signals takes it, or hangs on a fault it should serve itself); 1: a storm of SIGUSR2
 * and SIGPROF (no SA_RESTART) while pageouts and faults go on.
 */
static int signal_child(const struct cfg *c)
{
	zf_region_options o = ropts(c->mode, c->unit);
	/* 32 units (RG_FRAMES_MAX frames, with frames), of the unit the region evicts. */
	const size_t size = 32 * (size_t)c->unit, place = rg_place_unit(&o);
	const size_t n = rg_size_for(&o, size) / place;
	struct sigaction sa;
	sigset_t set;
	pthread_t h, s;
	long e;
	int ran;

	/* With a limit and readahead: reclaim and readahead threads exist too. */
	o.limit = n / 2 * (uint64_t)place;
	o.reclaim_batch = 2 * (uint64_t)place;
	o.readahead = 2;
	rg_open(&sg, &o, size, NULL);
	CHECK(sg.nunits == n, "%llu units, want %llu", U(sg.nunits), U(n));
	rg_fill(&sg, 0, n, 2);
	memset(&sa, 0, sizeof(sa));
	if (c->variant == 0) {
		sa.sa_handler = s_on_usr1;
		/* Thread mode: every other signal blocked in the handler; SIGBUS mode needs
		 * SIGBUS deliverable. */
		if (c->mode == ZF_FAULT_THREAD)
			sigfillset(&sa.sa_mask);
		sigaction(SIGUSR1, &sa, NULL);
		CHECK(sem_init(&s_handled, 0, 0) == 0 && sem_init(&s_helper_ready, 0, 0) == 0 &&
			      sem_init(&s_helper_quit, 0, 0) == 0,
		      "sem_init: %s", strerror(errno));
		for (size_t u = 0; u < n; u += 2) {
			evict_unit(u);
			s_unit = (int)u;
			s_result = 0;
			raise(SIGUSR1);
			ran = sem_wait_ms(&s_handled, WAIT_MS) == 0;
			CHECK(ran && s_result, "unit %llu read in a signal handler: %s", U(u),
			      ran ? "wrong bytes" : "the handler did not run");
		}
		/* Process-directed: only the helper may run it. */
		CHECK(!pthread_create(&h, NULL, s_helper_main, NULL), "thread");
		CHECK(sem_wait_ms(&s_helper_ready, WAIT_MS) == 0,
		      "the helper thread did not start");
		sigemptyset(&set);
		sigaddset(&set, SIGUSR1);
		pthread_sigmask(SIG_BLOCK, &set, NULL);
		for (size_t u = 1; u < n; u += 2) {
			evict_unit(u);
			s_unit = (int)u;
			s_tid = 0;
			kill(getpid(), SIGUSR1);
			CHECK(sem_wait_ms(&s_handled, WAIT_MS) == 0,
			      "a process-directed signal whose handler faults was not handled "
			      "within %u ms (taken by a zfolio thread that serves faults?)",
			      WAIT_MS);
			CHECK(s_result, "unit %llu read in a signal handler: wrong bytes", U(u));
			CHECK(s_tid == s_helper_tid,
			      "a process-directed SIGUSR1 ran in thread %d, not in the only "
			      "program thread that does not block it (%d): a zfolio thread does "
			      "not block async signals (docs/region.md, failure modes, row 6)",
			      (int)s_tid, (int)s_helper_tid);
		}
		sem_post(&s_helper_quit);
		pthread_join(h, NULL);
		rg_close(&sg);
		return PASS;
	}
	/* The storm. */
	sa.sa_handler = s_on_storm;
	sigaction(SIGUSR2, &sa, NULL);
	sigaction(SIGPROF, &sa, NULL);
	{
		const struct itimerval it = { { 0, 500 }, { 0, 500 } };
		/* Fewer rounds of frames: each moves 2 MiB (2 MiB units keep theirs, as before). */
		const uint64_t want_rounds =
			(SANITIZED ? 4000 : 15000) / (rg_frame(&o) ? sg.unit / KiB(64) : 1);
		const uint64_t want_signals = SANITIZED ? 500 : 2000;
		const uint64_t deadline = now_ns() + DEADLINE_MS(60000) * 1000000ull;
		uint64_t rng = 1, rounds = 0, evicted = 0;
		zf_region_stats st;

		CHECK(!pthread_create(&s, NULL, s_storm_main, NULL), "thread");
		setitimer(ITIMER_PROF, &it, NULL);
		while (rounds < want_rounds || atomic_load(&s_storm) < want_signals) {
			const size_t u = stress_rand(&rng) % n;
			const size_t units = u + 4 > n ? n - u : 4;

			/* Reclaim evicts meanwhile: some of these units, or none, are resident. */
			e = zf_region_pageout(sg.r, sg.base + u * sg.unit, units * sg.unit);
			CHECK(e >= 0 && e <= (long)units, "pageout of %llu units: %ld", U(units),
			      e);
			evicted += (uint64_t)e;
			VERIFY_UNITS(&sg, u, u + 1, "a unit read during a signal storm");
			rounds++;
			CHECK(now_ns() < deadline,
			      "the storm did not happen within %u s: %llu rounds, %llu signals",
			      DEADLINE_S(60), U(rounds), U(atomic_load(&s_storm)));
		}
		setitimer(ITIMER_PROF, &(struct itimerval){ { 0, 0 }, { 0, 0 } }, NULL);
		atomic_store(&s_storm_stop, 1);
		pthread_join(s, NULL);
		VERIFY(&sg, 0, sg.size, "everything after the storm");
		st = rst(sg.r);
		CHECK(evicted > 0 && st.fault_fail == 0, "%llu units evicted, fault_fail %llu",
		      U(evicted), U(st.fault_fail));
		printf("     signal storm %s %s: %llu rounds, %llu signals, %llu units evicted\n",
		       mode_name(c->mode), unit_name(c->unit), U(rounds), U(atomic_load(&s_storm)),
		       U(evicted));
	}
	rg_close(&sg);
	return PASS;
}

/* SIGBUS outside every region, SIGBUS mode: the program's handler, or death. */
static volatile sig_atomic_t b_count, b_addr_ok, b_code_ok;
static void *volatile b_addr;
static sigjmp_buf b_jmp;

static void b_on_sigbus_info(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	b_count++;
	b_addr_ok = si->si_addr == b_addr;
	b_code_ok = si->si_code == BUS_ADRERR;
	siglongjmp(b_jmp, 1);
}

static void b_on_sigbus_plain(int sig)
{
	(void)sig;
	b_count++;
	b_addr_ok = b_code_ok = 1;
	siglongjmp(b_jmp, 1);
}

/* A page of a file past its end: touching it raises SIGBUS (BUS_ADRERR). */
static uint8_t *past_eof_page(void)
{
	char path[] = "/tmp/zf-region-sigbus-XXXXXX";
	const int fd = mkstemp(path);
	uint8_t *p;

	CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
	unlink(path);
	CHECK(ftruncate(fd, PAGE) == 0, "ftruncate");
	p = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
	close(fd);
	return p + PAGE;
}

static void past_eof_expect_handler(uint8_t *p, int expect, const char *what)
{
	b_addr = p;
	b_count = 0;
	b_addr_ok = b_code_ok = 0;
	if (!sigsetjmp(b_jmp, 1)) {
		touch_read(p);
		FAILF("%s: touching past the end of a file did not raise SIGBUS", what);
	}
	CHECK(b_count == expect, "%s: the program's SIGBUS handler ran %d times", what,
	      (int)b_count);
	CHECK(b_addr_ok && b_code_ok, "%s: the chained SIGBUS had a wrong si_addr or si_code",
	      what);
}

/* variant 2: SA_SIGINFO handler; 3: plain handler; 4: SIG_DFL; 5: SIG_IGN. */
static int sigbus_chain_child(const struct cfg *c)
{
	const zf_region_options o = ropts(ZF_FAULT_SIGBUS, c->unit);
	uint8_t *eof = past_eof_page();
	struct sigaction sa;
	struct rg g2;

	memset(&sa, 0, sizeof(sa));
	if (c->variant == 2) {
		sa.sa_sigaction = b_on_sigbus_info;
		sa.sa_flags = SA_SIGINFO;
	} else if (c->variant == 3) {
		sa.sa_handler = b_on_sigbus_plain;
	} else {
		sa.sa_handler = c->variant == 4 ? SIG_DFL : SIG_IGN;
	}
	sigaction(SIGBUS, &sa, NULL);
	rg_open(&sg, &o, 8 * c->unit, NULL);
	rg_fill(&sg, 0, 8, 2);
	PAGEOUT(&sg, 0, 8, 8);
	VERIFY_UNITS(&sg, 0, 1, "a unit of the region (SIGBUS mode)");
	if (c->variant >= 4) {
		child_mark();
		touch_read(eof);
		return 3; /* it should have died */
	}
	past_eof_expect_handler(eof, 1, "with a region");
	VERIFY_UNITS(&sg, 1, 8, "the region after a chained SIGBUS");
	/* Two regions; the first destroyed; then none. */
	rg_open(&g2, &o, 8 * c->unit, NULL);
	rg_fill(&g2, 0, 8, 3);
	PAGEOUT(&g2, 0, 8, 8);
	PAGEOUT(&sg, 0, 8, 8);
	rg_close(&sg);
	past_eof_expect_handler(eof, 1, "after the first of two regions is destroyed");
	VERIFY(&g2, 0, g2.size, "the second region");
	rg_close(&g2);
	past_eof_expect_handler(eof, 1, "after every region is destroyed");
	return PASS;
}

#ifdef ZF_TSAN
/*
 * TSan runs an asynchronous signal's handler late, from its own code, and does not
 * survive a SIGBUS (SIGBUS mode) inside it: thread mode only (passes under ASan).
 */
#define HANDLER_MODES THREAD_MODE_ONLY
/*
 * Under TSan the storm in SIGBUS mode lost its child to a SIGBUS about one run in ten,
 * with no message of zfolio's (so not a fault it failed closed): probably a region
 * fault while TSan had every signal blocked, which the kernel makes fatal (TSan runs
 * deferred handlers from its own code with all signals blocked). 30 runs of 30 passed
 * without TSan. So under TSan the storm runs in thread mode only.
 */
#define STORM_MODES THREAD_MODE_ONLY
#else
#define HANDLER_MODES BOTH_MODES
#define STORM_MODES BOTH_MODES
#endif

int case_signal(void)
{
	static const uint32_t units[] = { KiB(4), KiB(64) };
	static const char *const chain[] = { "SA_SIGINFO handler", "plain handler", "SIG_DFL",
					     "SIG_IGN" };

	each_config_modes("signal: faults in signal handlers", signal_child, units, 2, 0, 15,
			  HANDLER_MODES);
	each_config_modes("signal: storm of signals", signal_child, units, 2, 1, 15, STORM_MODES);
	for (int v = 2; v <= 5; v++) {
		const struct cfg c = { ZF_FAULT_SIGBUS, KiB(64), v };
		char what[120];

		snprintf(what, sizeof(what), "SIGBUS outside the region, program's %s",
			 chain[v - 2]);
		if (!selected(what))
			continue;
		set_phase("%s", what);
		if (v <= 3)
			expect_ok(run_child(sigbus_chain_child, &c, 10), what);
		else
			expect_death_after_mark(sigbus_chain_child, &c, 10, SIGBUS, what);
	}
	return failures ? FAIL : PASS;
}
