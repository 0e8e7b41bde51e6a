/*
 * group_test.c - one residency limit for regions in several processes (zf_group), over
 * the public API. Each member is a process of its own with a region in the group.
 *
 *   limit   three processes each write a region of twice the limit and walk it again
 *           twice: the group's resident bytes, sampled by the parent, stay within
 *           limit + batch; every byte reads back; each process evicted (shares)
 *   idle    one process fills the limit and sleeps; another then writes as much again:
 *           the sleeper's reclaim thread gives up its share (it evicts while idle),
 *           and the writer gets its memory without going over
 *   reap    a member killed with SIGKILL: what it held leaves the group when it is
 *           found dead; a member that execs: its slot goes when the new program joins
 *   stats   zf_group_members(): every live member answers with fresh counters, its
 *           pid, resident bytes as the group counts them; zf_group_get_stats()
 *   fork    ZF_FORK_COPY in a group: the child joins as a member of its own, charged
 *           nothing for the units resident at the fork (the parent is), every byte
 *           there in the child; what the child brings in after is charged to it
 *
 * In thread and SIGBUS mode, with 64 KiB units and with 2 MiB frames. Exits 0, 1 (a
 * failure), 77 (no userfaultfd). usage: group_test [case]; group_test rejoin FD-PATH
 * is the exec'd half of "reap".
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zfolio.h"
#include "../stress/sanitized.h"

#define MIB (1u << 20)
#define LIMIT (16u * MIB)
#define BATCH (2u * MIB)
#define SKIP 77
#ifdef ZF_TSAN
#define ZF_TSAN_ON 1
#else
#define ZF_TSAN_ON 0
#endif
#define REJOIN_FD 100 /* the exec'd member says it holds its memory on this */

static char config[64]; /* "thread 64k", for messages */
static zf_region_options base_opts;

static void fail(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FAIL group_test [%s] line %d: ", config, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

#define CHECK(c, ...)                                                                              \
	do {                                                                                       \
		if (!(c))                                                                          \
			fail(__LINE__, __VA_ARGS__);                                               \
	} while (0)
#define U(x) ((unsigned long long)(x))

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static zf_group_stats gst(zf_group *g)
{
	zf_group_stats s;

	CHECK(!zf_group_get_stats(g, &s, sizeof(s)), "zf_group_get_stats");
	return s;
}

static zf_region *region_in(zf_group *g, size_t size, uint32_t fork)
{
	zf_region_options o = base_opts;
	zf_region *r;
	int ret;

	o.group = g;
	o.fork = fork;
	ret = zf_region_create(NULL, size, &o, &r);
	CHECK(!ret, "zf_region_create: %s", zf_strerror(ret));
	return r;
}

/* Page p of a member's data: words of (seed, p), compressible. */
static void fill(uint8_t *base, size_t size, uint64_t seed)
{
	for (size_t off = 0; off < size; off += 4096) {
		const uint64_t v = seed << 32 | off / 4096;

		for (size_t w = 0; w < 4096; w += 64)
			memcpy(base + off + w, &v, sizeof(v));
	}
}

static void verify(const uint8_t *base, size_t size, uint64_t seed, int line)
{
	for (size_t off = 0; off < size; off += 4096) {
		const uint64_t want = seed << 32 | off / 4096;

		for (size_t w = 0; w < 4096; w += 64) {
			uint64_t got;

			memcpy(&got, base + off + w, sizeof(got));
			if (got != want)
				fail(line, "seed %llu: page %zu word %zu reads %#llx", U(seed),
				     off / 4096, w / 8, U(got));
		}
	}
}

/* Starts fn(g, arg) in a child process; its pid. */
static pid_t spawn(void (*fn)(zf_group *, int), zf_group *g, int arg)
{
	pid_t pid = fork();

	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (!pid) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never left behind by a failed case */
		fn(g, arg);
		_exit(0);
	}
	return pid;
}

static void reap_ok(pid_t pid, const char *what)
{
	int st;

	CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: status %#x", what, st);
}

/* Samples the group's resident bytes until the children are gone: the most seen. */
static uint64_t sample_until_done(zf_group *g, pid_t *pids, unsigned n)
{
	uint64_t most = 0;

	for (unsigned left = n; left;) {
		const zf_group_stats s = gst(g);
		int st;

		most = s.resident_bytes > most ? s.resident_bytes : most;
		left = 0;
		for (unsigned i = 0; i < n; i++) {
			if (pids[i] && waitpid(pids[i], &st, WNOHANG) == pids[i]) {
				CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
				      "member %u: status %#x", i, st);
				pids[i] = 0;
			}
			left += pids[i] != 0;
		}
		usleep(200);
	}
	return most;
}

/* ---------------------------------------------------------------------------------- */

static void limit_member(zf_group *g, int i)
{
	const size_t size = 2 * LIMIT;
	zf_region *r = region_in(g, size, ZF_FORK_NONE);
	uint8_t *p = zf_region_base(r);
	zf_region_stats st;

	fill(p, size, (uint64_t)i + 1);
	for (int pass = 0; pass < 2; pass++)
		verify(p, size, (uint64_t)i + 1, __LINE__);
	CHECK(!zf_region_get_stats(r, &st, sizeof(st)), "stats");
	CHECK(st.evict_reclaim > 0 && st.pgmajfault > 0, "member %d: evicted %llu, faults %llu", i,
	      U(st.evict_reclaim), U(st.pgmajfault));
	printf("  member %d: evicted %llu units, %llu major faults\n", i, U(st.evict_reclaim),
	       U(st.pgmajfault));
	zf_region_destroy(r);
}

static void case_limit(zf_group *g)
{
	pid_t pids[3];
	uint64_t most;
	zf_group_stats s;

	for (int i = 0; i < 3; i++)
		pids[i] = spawn(limit_member, g, i);
	most = sample_until_done(g, pids, 3);
	s = gst(g);
	CHECK(most <= LIMIT + BATCH && s.resident_max <= LIMIT + BATCH,
	      "resident %llu, most %llu: over limit %u + batch %u", U(most), U(s.resident_max),
	      LIMIT, BATCH);
	CHECK(s.resident_max > LIMIT / 2, "resident_max %llu: the members never filled the limit",
	      U(s.resident_max));
	CHECK(s.resident_bytes == 0 && s.members == 0, "after: resident %llu, members %llu",
	      U(s.resident_bytes), U(s.members));
	CHECK(s.joined == 3 && s.members_max >= 2, "joined %llu, members_max %llu", U(s.joined),
	      U(s.members_max));
	printf("  group peak %.1f MiB (limit %u MiB + %u), reclaimed %.1f MiB\n",
	       (double)s.resident_max / MIB, LIMIT / MIB, BATCH / MIB,
	       (double)s.reclaimed_bytes / MIB);
}

/* ---------------------------------------------------------------------------------- */

static int ready_fd[2], go_fd[2];

static void idle_member(zf_group *g, int arg)
{
	const size_t size = LIMIT;
	zf_region *r = region_in(g, size, ZF_FORK_NONE);
	uint8_t *p = zf_region_base(r);
	char c = 1;

	(void)arg;
	fill(p, size, 7);
	CHECK(write(ready_fd[1], &c, 1) == 1, "write");
	sleep_ms(1000000); /* killed by the parent */
}

static void writer_member(zf_group *g, int arg)
{
	const size_t size = LIMIT;
	zf_region *r = region_in(g, size, ZF_FORK_NONE);
	uint8_t *p = zf_region_base(r);

	(void)arg;
	fill(p, size, 8);
	verify(p, size, 8, __LINE__);
	zf_region_destroy(r);
}

static void case_idle(zf_group *g)
{
	zf_group_member m[4];
	pid_t idle, writer;
	uint64_t most, before;
	char c;
	int n;

	CHECK(!pipe(ready_fd), "pipe");
	idle = spawn(idle_member, g, 0);
	CHECK(read(ready_fd[0], &c, 1) == 1, "the idle member died");
	n = zf_group_members(g, m, 4, 2000);
	CHECK(n == 1 && m[0].pid == (uint64_t)idle, "members %d", n);
	before = m[0].resident_bytes;
	CHECK(before >= LIMIT - BATCH, "the idle member holds %llu", U(before));
	writer = spawn(writer_member, g, 0);
	most = sample_until_done(g, &writer, 1);
	CHECK(most <= LIMIT + BATCH, "resident %llu over limit + batch", U(most));
	n = zf_group_members(g, m, 4, 2000);
	CHECK(n == 1, "members %d", n);
	CHECK(m[0].region.evict_reclaim > 0 && m[0].resident_bytes < before,
	      "the idle member gave nothing up: evicted %llu, resident %llu (had %llu)",
	      U(m[0].region.evict_reclaim), U(m[0].resident_bytes), U(before));
	CHECK(m[0].region.limit_waits == 0, "the idle member waited for room %llu times",
	      U(m[0].region.limit_waits));
	printf("  the idle member evicted %llu units (%.1f MiB of %.1f)\n",
	       U(m[0].region.evict_reclaim), (double)(before - m[0].resident_bytes) / MIB,
	       (double)before / MIB);
	kill(idle, SIGKILL);
	waitpid(idle, NULL, 0);
	close(ready_fd[0]);
	close(ready_fd[1]);
}

/* ---------------------------------------------------------------------------------- */

static void held_member(zf_group *g, int arg)
{
	const size_t size = 4 * MIB;
	zf_region *r = region_in(g, size, ZF_FORK_NONE);
	char c = 1;

	fill(zf_region_base(r), size, 9);
	CHECK(write(ready_fd[1], &c, 1) == 1, "write");
	if (arg) {
		/* The exec'd program joins again: the slot of this one must go then. */
		char self[64];

		snprintf(self, sizeof(self), "/proc/%d/fd/%d", (int)getppid(), zf_group_fd(g));
		CHECK(read(go_fd[0], &c, 1) == 1, "read");
		execl("/proc/self/exe", "group_test", "rejoin", self, base_opts.frame ? "2m" : "-",
		      (char *)NULL);
		fail(__LINE__, "exec: %s", strerror(errno));
	}
	sleep_ms(1000000);
}

/* The exec'd half of "reap": joins, holds 2 MiB, says so, waits to be killed. */
static int rejoin(const char *path, const char *frame)
{
	zf_group *g;
	zf_region *r;
	char c = 1;
	int ret = zf_group_open(path, &g);

	CHECK(!ret, "zf_group_open %s: %s", path, zf_strerror(ret));
	zf_region_options_init(&base_opts);
	base_opts.frame = !strcmp(frame, "2m") ? ZF_FRAME_2M : 0;
	r = region_in(g, 2 * MIB, ZF_FORK_NONE);
	fill(zf_region_base(r), 2 * MIB, 10);
	CHECK(write(REJOIN_FD, &c, 1) == 1, "write");
	sleep_ms(1000000);
	return 0;
}

static void case_reap(zf_group *g)
{
	zf_group_member m[4];
	zf_group_stats s;
	pid_t pid;
	char c;
	int n;

	CHECK(!pipe(ready_fd), "pipe");
	pid = spawn(held_member, g, 0);
	CHECK(read(ready_fd[0], &c, 1) == 1, "the member died");
	s = gst(g);
	CHECK(s.resident_bytes >= 4 * MIB && s.members == 1, "resident %llu, members %llu",
	      U(s.resident_bytes), U(s.members));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	n = zf_group_members(g, m, 4, 100);
	s = gst(g);
	CHECK(n == 0 && s.members == 0 && s.resident_bytes == 0 && s.reaped == 1,
	      "after kill -9: members %d/%llu, resident %llu, reaped %llu", n, U(s.members),
	      U(s.resident_bytes), U(s.reaped));

	/* exec: the new program's join lets the old one's slot go. */
	CHECK(dup2(ready_fd[1], REJOIN_FD) == REJOIN_FD && !pipe(go_fd), "dup2, pipe");
	pid = spawn(held_member, g, 1);
	CHECK(read(ready_fd[0], &c, 1) == 1, "the member died");
	CHECK(gst(g).resident_bytes >= 4 * MIB, "before exec");
	CHECK(write(go_fd[1], &c, 1) == 1, "write"); /* go on: exec */
	CHECK(read(ready_fd[0], &c, 1) == 1, "the exec'd member died");
	s = gst(g);
	CHECK(s.members == 1 && s.resident_bytes <= 2 * MIB && s.reaped == 2,
	      "after exec: members %llu, resident %llu (2 MiB wanted), reaped %llu", U(s.members),
	      U(s.resident_bytes), U(s.reaped));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(REJOIN_FD);
	close(go_fd[0]);
	close(go_fd[1]);
	close(ready_fd[0]);
	close(ready_fd[1]);
}

/* ---------------------------------------------------------------------------------- */

static void busy_member(zf_group *g, int arg)
{
	const size_t size = 2 * LIMIT;
	zf_region *r = region_in(g, size, ZF_FORK_NONE);
	const uint64_t end = now_ms() + 400;

	fill(zf_region_base(r), size, (uint64_t)arg);
	while (now_ms() < end)
		verify(zf_region_base(r), size, (uint64_t)arg, __LINE__);
	zf_region_destroy(r);
}

static void case_stats(zf_group *g)
{
	zf_group_member m[4];
	pid_t pids[2];
	int n, seen = 0;

	for (int i = 0; i < 2; i++)
		pids[i] = spawn(busy_member, g, i + 20);
	for (int tries = 0; tries < 100 && seen < 3; tries++) {
		uint64_t sum = 0;

		sleep_ms(20);
		n = zf_group_members(g, m, 4, 1000);
		if (n != 2)
			continue;
		for (int i = 0; i < n; i++) {
			CHECK(m[i].pid == (uint64_t)pids[0] || m[i].pid == (uint64_t)pids[1],
			      "pid %llu", U(m[i].pid));
			CHECK(m[i].age_ns < 1000000000ull, "member %llu: counters %llu ns old",
			      U(m[i].pid), U(m[i].age_ns));
			CHECK(m[i].region.size >= 2 * LIMIT, "member %llu: size %llu", U(m[i].pid),
			      U(m[i].region.size));
			sum += m[i].resident_bytes;
		}
		CHECK(sum <= LIMIT + BATCH, "members' resident %llu", U(sum));
		if (m[0].region.swpout && m[1].region.swpout)
			seen++;
	}
	CHECK(seen >= 3, "no three answers with both members paging");
	for (int i = 0; i < 2; i++)
		reap_ok(pids[i], "stats member");
	CHECK(zf_group_members(g, m, 4, 100) == 0, "members left");
}

/* ---------------------------------------------------------------------------------- */

static void case_fork(zf_group *g)
{
	const size_t size = LIMIT / 2;
	zf_region *r;
	uint8_t *p;
	uint64_t before;
	pid_t pid;

	if (ZF_TSAN_ON) {
		/* TSan cannot start threads in a child of a multithreaded fork() (as region_test). */
		printf("  skip: a fork of a process with threads, under TSan\n");
		return;
	}
	r = region_in(g, size, ZF_FORK_COPY);
	p = zf_region_base(r);

	fill(p, size, 30);
	before = gst(g).resident_bytes;
	CHECK(before >= size - BATCH, "resident %llu before the fork", U(before));
	CHECK(zf_region_pageout(r, p, size / 4) > 0, "pageout");
	before = gst(g).resident_bytes;
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (!pid) {
		zf_group_stats s = gst(g);

		CHECK(s.members == 2 && s.resident_bytes == before,
		      "child: members %llu, resident %llu (the parent's %llu)", U(s.members),
		      U(s.resident_bytes), U(before));
		verify(p, size, 30, __LINE__); /* brings the evicted quarter in: charged */
		s = gst(g);
		CHECK(s.resident_bytes > before, "child: nothing charged for what it brought in");
		fill(p, size, 31);
		verify(p, size, 31, __LINE__);
		_exit(0);
	}
	reap_ok(pid, "fork child");
	verify(p, size, 30, __LINE__);
	/* The child's _exit() left its slot: found dead by the next reader. */
	CHECK(zf_group_members(g, NULL, 0, 100) == 1 && gst(g).members == 1,
	      "members after the child");
	zf_region_destroy(r);
	CHECK(gst(g).resident_bytes == 0, "resident after");
}

/* ---------------------------------------------------------------------------------- */

static const struct {
	const char *name;
	void (*fn)(zf_group *g);
} cases[] = {
	{ "limit", case_limit }, { "idle", case_idle }, { "reap", case_reap },
	{ "stats", case_stats }, { "fork", case_fork },
};

int main(int argc, char **argv)
{
	static const struct {
		enum zf_fault_mode mode;
		uint32_t frame;
	} configs[] = { { ZF_FAULT_THREAD, 0 },
			{ ZF_FAULT_SIGBUS, 0 },
			{ ZF_FAULT_THREAD, ZF_FRAME_2M },
			{ ZF_FAULT_SIGBUS, ZF_FRAME_2M } };
	const char *only = argc > 1 ? argv[1] : NULL;
	int ran = 0;

	if (only && !strcmp(only, "rejoin") && argc == 4)
		return rejoin(argv[2], argv[3]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	{
		zf_region *r;
		zf_region_options o;
		int ret;

		zf_region_options_init(&o);
		ret = zf_region_create(NULL, 2 * MIB, &o, &r);
		if (ret == -EPERM || ret == -ENOSYS || ret == -ENOTSUP) {
			printf("SKIP: userfaultfd: %s\n", zf_strerror(ret));
			return SKIP;
		}
		CHECK(!ret, "zf_region_create: %s", zf_strerror(ret));
		zf_region_destroy(r);
	}
	for (size_t c = 0; c < sizeof(configs) / sizeof(configs[0]); c++) {
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			zf_group *g;
			pid_t pid;
			int ret, st;

			if (only && strcmp(only, cases[i].name))
				continue;
			snprintf(config, sizeof(config), "%s %s %s", cases[i].name,
				 configs[c].mode == ZF_FAULT_SIGBUS ? "sigbus" : "thread",
				 configs[c].frame ? "2m frames" : "64k");
			zf_region_options_init(&base_opts);
			base_opts.unit = 64u << 10;
			base_opts.frame = configs[c].frame;
			base_opts.fault_mode = configs[c].mode;
			ret = zf_group_create(LIMIT, BATCH, &g);
			CHECK(!ret, "zf_group_create: %s", zf_strerror(ret));
			printf("%s\n", config);
			/* Each case in a child: SIGBUS mode installs a handler, a case may die. */
			pid = fork();
			CHECK(pid >= 0, "fork");
			if (!pid) {
				alarm(DEADLINE_S(60));
				cases[i].fn(g);
				_exit(0);
			}
			CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
			CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
			zf_group_close(g);
			ran++;
		}
	}
	CHECK(ran, "no case %s", only ? only : "");
	printf("PASS group_test\n");
	return 0;
}
