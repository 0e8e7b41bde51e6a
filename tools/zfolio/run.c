/*
 * run.c - "zfolio run": an unmodified program with its anonymous memory in zfolio.
 *
 * The work is the preload runtime's (libzfolio-run.so, src/run/, docs/run.md): this
 * command finds it, checks that zfolio can run here (userfaultfd), passes the settings in
 * the environment (ZFOLIO_*, which children and exec'd programs inherit, each process
 * starting its own runtime), runs the program with the runtime preloaded, waits for it,
 * and sums up the counters each process wrote at its exit.
 *
 * It exits with the program's status (128 + the signal when a signal ended it), 77 when
 * zfolio cannot run here (unless --fallback), 127/126 when the program cannot be
 * started, 2 on bad usage. Ctrl-C reaches the program (same process group); this command
 * ignores SIGINT and SIGQUIT while it waits, as time(1) does, and passes SIGTERM and
 * SIGHUP on. Nothing is left behind: the counters' directory is removed at the end
 * (unless --stats-dir), also when the program was killed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

#ifndef ZF_RUN_LIBDIR
#define ZF_RUN_LIBDIR "/usr/local/lib"
#define ZF_RUN_LIBDIR_REL "lib"
#endif
#define RUN_LIB "libzfolio-run.so"

static const struct cli_command run_cmd = {
	.name = "run",
	.operand = "PROG [ARGS...]",
	.command_line = 1,
	.about = "Runs PROG with its anonymous memory in zfolio: its heap (malloc and the rest,\n"
		 "served by mimalloc from a zfolio region) and its private anonymous mappings of\n"
		 "--min-size or more live in a userfaultfd region of 2 MiB frames, compressed\n"
		 "away past --limit and brought back on the first touch. Every process the program\n"
		 "starts (children, exec'd programs) runs the same way.\n",
	.notes = "The settings reach each process as environment variables, and\n"
		 "LD_PRELOAD=libzfolio-run.so ZFOLIO_LIMIT=... PROG does the same without this\n"
		 "command (docs/run.md lists them). --limit is one limit for the whole run, as a\n"
		 "memory cgroup's: the resident bytes of all its processes together stay under it\n"
		 "plus one reclaim batch (2 MiB), each process evicting its share of the excess in\n"
		 "proportion to what it holds; 'zfolio stat' shows the run live. A child of fork()\n"
		 "sees its parent's memory as it was at the fork, evicted or not, and both go on\n"
		 "privately. Static and setuid programs ignore LD_PRELOAD: their memory stays with\n"
		 "the kernel.\n"
		 "\n"
		 "At the end, one line on stderr: processes, the run's resident peak (all its\n"
		 "processes at once), what was stored and its compressed size at exit, pages\n"
		 "swapped out and in, major faults and the time spent serving them (processes that\n"
		 "ended by a signal or _exit() without exit handlers report nothing but their share\n"
		 "of the peak).\n"
		 "\n"
		 "exit status: the program's (128 + N when signal N ended it), 126/127 it could not\n"
		 "be started, 2 bad usage, 77 zfolio cannot run here (no userfaultfd) without\n"
		 "--fallback.\n",
	.uses = {
		{ .opt = OPT_LIMIT, .def_help = "none" },
		{ .opt = OPT_UNIT, .def = "64k", .max_values = 1 },
		{ .opt = OPT_FRAME, .def = "2m", .max_values = 1 },
		{ .opt = OPT_CODEC, .def = "lz4", .max_values = 1 },
		{ .opt = OPT_ENGINES, .def = "2", .max_values = 1 },
		{ .opt = OPT_MODE, .def = "thread", .max_values = 1 },
		{ .opt = OPT_MIN_SIZE, .def = "256k" },
		{ .opt = OPT_STATS_DIR },
		{ .opt = OPT_JSON_FILE },
		{ .opt = OPT_FALLBACK },
	},
};

/*
 * The runtime library: $ZFOLIO_RUN_LIB, beside this zfolio in a build tree, in the
 * library directory of the prefix this zfolio is installed in, or where it was configured
 * to be installed.
 */
static int find_runtime(char *out, size_t len)
{
	const char *env = getenv("ZFOLIO_RUN_LIB");
	char exe[PATH_MAX];
	ssize_t n;

	if (env && *env) {
		snprintf(out, len, "%s", env);
		return access(out, R_OK);
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		char *slash;

		exe[n] = 0;
		slash = strrchr(exe, '/');
		if (slash) {
			*slash = 0;
			if ((size_t)snprintf(out, len, "%s/src/%s", exe, RUN_LIB) < len &&
			    !access(out, R_OK))
				return 0;
			/* Installed under another prefix than configured: PREFIX/bin/zfolio. */
			if ((size_t)snprintf(out, len, "%s/../%s/%s", exe, ZF_RUN_LIBDIR_REL,
					     RUN_LIB) < len &&
			    !access(out, R_OK))
				return 0;
		}
	}
	if ((size_t)snprintf(out, len, "%s/%s", ZF_RUN_LIBDIR, RUN_LIB) >= len)
		return -1;
	return access(out, R_OK);
}

/* 0 when a region can be made here; else the error (userfaultfd refused or lacking). */
static int zfolio_works(void)
{
	zf_region_options o;
	zf_region *r = NULL;
	int ret;

	zf_region_options_init(&o);
	ret = zf_region_create(NULL, 2u << 20, &o, &r);
	zf_region_destroy(r);
	return ret;
}

static void set_env_size(const char *name, uint64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	setenv(name, buf, 1);
}

/* The runtime's settings, and the runtime itself, in the environment PROG inherits. */
static void set_environment(const struct cli_args *a, const char *lib, const char *stats,
			    const zf_group *group)
{
	const char *old = getenv("LD_PRELOAD");
	char *preload, path[64];

	/* The limit is the group's: each process opens it by this process's descriptor. */
	unsetenv("ZFOLIO_LIMIT");
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getpid(), zf_group_fd(group));
	setenv("ZFOLIO_GROUP", path, 1);
	set_env_size("ZFOLIO_UNIT", a->v[OPT_UNIT].num[0]);
	setenv("ZFOLIO_FRAME", a->v[OPT_FRAME].str[0], 1);
	setenv("ZFOLIO_CODEC", a->v[OPT_CODEC].str[0], 1);
	set_env_size("ZFOLIO_ENGINES", a->v[OPT_ENGINES].num[0]);
	setenv("ZFOLIO_MODE", a->v[OPT_MODE].str[0], 1);
	set_env_size("ZFOLIO_MIN_SIZE", a->v[OPT_MIN_SIZE].num[0]);
	setenv("ZFOLIO_STATS", stats, 1);
	if (old && *old) {
		if (asprintf(&preload, "%s %s", lib, old) < 0)
			cli_die(1, "out of memory");
		setenv("LD_PRELOAD", preload, 1);
		free(preload);
	} else {
		setenv("LD_PRELOAD", lib, 1);
	}
}

/* What the processes' counter files add up to. */
struct totals {
	unsigned procs;
	uint64_t resident_max, stored, compressed, pool, pool_max, meta, swpout, swpin, majflt,
		fault_ns;
};

/* The value of "key": in one line of JSON the runtime wrote (run.c in src/run). */
static uint64_t json_u64(const char *line, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(line, pat);
	return p ? strtoull(p + strlen(pat), NULL, 10) : 0;
}

static void sum_stats(const char *dir, const char *prefix, struct totals *t, int remove_files)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	memset(t, 0, sizeof(*t));
	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[PATH_MAX], line[2048];
		FILE *f;

		if (strncmp(e->d_name, prefix, strlen(prefix)) ||
		    (size_t)snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= sizeof(path))
			continue;
		f = fopen(path, "r");
		if (f && fgets(line, sizeof(line), f) && !strstr(e->d_name, ".tmp")) {
			t->procs++;
			const uint64_t peak = json_u64(line, "resident_max");

			t->resident_max = peak > t->resident_max ? peak : t->resident_max;
			t->stored += json_u64(line, "stored_bytes");
			t->compressed += json_u64(line, "compressed_bytes");
			t->pool += json_u64(line, "pool_bytes");
			t->pool_max += json_u64(line, "pool_max");
			t->meta += json_u64(line, "meta_bytes");
			t->swpout += json_u64(line, "swpout");
			t->swpin += json_u64(line, "swpin");
			t->majflt += json_u64(line, "pgmajfault");
			t->fault_ns += json_u64(line, "fault_ns");
		}
		if (f)
			fclose(f);
		if (remove_files)
			unlink(path);
	}
	closedir(d);
}

static double mib(uint64_t b)
{
	return (double)b / 1048576.0;
}

static void summary(const struct cli_args *a, const struct totals *t, const zf_group_stats *g,
		    int status)
{
	const uint64_t limit = g->limit;
	char lim[48] = "";
	FILE *f;

	if (limit)
		snprintf(lim, sizeof(lim), " (limit %.1f MiB)", mib(limit));
	if (t->procs || g->joined)
		fprintf(stderr,
			"zfolio: %u process%s, resident peak %.1f MiB%s; at exit %.1f MiB "
			"stored in %.1f MiB (pool %.1f MiB, metadata %.1f MiB); %llu pages out, "
			"%llu in, "
			"%llu major faults, %.1f ms in faults\n",
			t->procs, t->procs == 1 ? "" : "es", mib(g->resident_max), lim,
			mib(t->stored), mib(t->compressed), mib(t->pool), mib(t->meta),
			(unsigned long long)t->swpout, (unsigned long long)t->swpin,
			(unsigned long long)t->majflt, (double)t->fault_ns / 1e6);
	if (!a->v[OPT_JSON_FILE].n)
		return;
	f = fopen(a->v[OPT_JSON_FILE].str[0], "w");
	if (!f) {
		fprintf(stderr, "zfolio: cannot write %s: %s\n", a->v[OPT_JSON_FILE].str[0],
			strerror(errno));
		return;
	}
	fprintf(f,
		"{\"command\":\"run\",\"status\":%d,\"limit\":%llu,\"processes\":%u,"
		"\"members\":%llu,\"resident_max\":%llu,\"process_resident_max\":%llu,"
		"\"reclaimed_bytes\":%llu,\"stored_bytes\":%llu,\"compressed_bytes\":%llu,"
		"\"pool_bytes\":%llu,\"pool_max\":%llu,\"meta_bytes\":%llu,\"swpout\":%llu,"
		"\"swpin\":%llu,"
		"\"pgmajfault\":%llu,\"fault_ns\":%llu}\n",
		status, (unsigned long long)limit, t->procs, (unsigned long long)g->joined,
		(unsigned long long)g->resident_max, (unsigned long long)t->resident_max,
		(unsigned long long)g->reclaimed_bytes, (unsigned long long)t->stored,
		(unsigned long long)t->compressed, (unsigned long long)t->pool,
		(unsigned long long)t->pool_max, (unsigned long long)t->meta,
		(unsigned long long)t->swpout, (unsigned long long)t->swpin,
		(unsigned long long)t->majflt, (unsigned long long)t->fault_ns);
	fclose(f);
}

static volatile sig_atomic_t child_pid;

static void pass_on(int sig)
{
	if (child_pid > 0)
		kill(child_pid, sig);
}

/* Runs argv, waits for it; its exit status as a shell gives it. */
static int run_and_wait(char **argv)
{
	struct sigaction ign = { .sa_handler = SIG_IGN }, pass = { .sa_handler = pass_on };
	int status;
	pid_t pid = fork();

	if (pid < 0)
		cli_die(1, "fork: %s", strerror(errno));
	if (!pid) {
		execvp(argv[0], argv);
		fprintf(stderr, "zfolio: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	child_pid = pid;
	sigaction(SIGINT, &ign, NULL);
	sigaction(SIGQUIT, &ign, NULL);
	sigaction(SIGTERM, &pass, NULL);
	sigaction(SIGHUP, &pass, NULL);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			cli_die(1, "waitpid: %s", strerror(errno));
	}
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

int cmd_run(int argc, char **argv)
{
	const struct cli_args *a = cli_parse(&run_cmd, argc, argv);
	char lib[PATH_MAX], dir[PATH_MAX], stats[PATH_MAX];
	const int own_dir = !a->v[OPT_STATS_DIR].n;
	struct totals t;
	zf_group *group;
	zf_group_stats gs;
	int ret, status;

	if (!a->rest)
		cli_die(EXIT_USAGE, "missing PROG (see 'zfolio run --help')");
	ret = zfolio_works();
	if (ret) {
		if (!a->v[OPT_FALLBACK].n)
			cli_die(EXIT_SKIP,
				"zfolio cannot run here: %s (userfaultfd; see "
				"'zfolio run --help', --fallback)",
				zf_strerror(ret));
		fprintf(stderr, "zfolio: cannot run here (%s): running %s without zfolio\n",
			zf_strerror(ret), a->rest[0]);
		execvp(a->rest[0], a->rest);
		fprintf(stderr, "zfolio: cannot run %s: %s\n", a->rest[0], strerror(errno));
		return errno == ENOENT ? 127 : 126;
	}
	if (find_runtime(lib, sizeof(lib)))
		cli_die(1,
			"%s not found (looked beside this zfolio and in %s; ZFOLIO_RUN_LIB "
			"names it)",
			RUN_LIB, ZF_RUN_LIBDIR);
	if (own_dir) {
		if ((size_t)snprintf(dir, sizeof(dir), "%s/zfolio-run.XXXXXX",
				     getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp") >= sizeof(dir) ||
		    !mkdtemp(dir))
			cli_die(1, "mkdtemp %s: %s", dir, strerror(errno));
	} else {
		if ((size_t)snprintf(dir, sizeof(dir), "%s", a->v[OPT_STATS_DIR].str[0]) >=
		    sizeof(dir))
			cli_die(EXIT_USAGE, "--stats-dir: the path is too long");
		if (mkdir(dir, 0700) && errno != EEXIST)
			cli_die(1, "mkdir %s: %s", dir, strerror(errno));
	}
	if ((size_t)snprintf(stats, sizeof(stats), "%s/stats", dir) >= sizeof(stats))
		cli_die(EXIT_USAGE, "--stats-dir: the path is too long");
	/* The run's limit: a memfd, gone with the last process that maps it. */
	ret = zf_group_create(a->v[OPT_LIMIT].n ? a->v[OPT_LIMIT].num[0] : 0, 0, &group);
	if (ret)
		cli_die(ret == -EINVAL ? EXIT_USAGE : 1, "cannot make the run's group: %s",
			zf_strerror(ret));
	set_environment(a, lib, stats, group);
	status = run_and_wait(a->rest);
	sum_stats(dir, "stats.", &t, own_dir);
	if (own_dir)
		rmdir(dir);
	if (zf_group_get_stats(group, &gs, sizeof(gs)))
		memset(&gs, 0, sizeof(gs));
	summary(a, &t, &gs, status);
	zf_group_close(group);
	return status;
}
