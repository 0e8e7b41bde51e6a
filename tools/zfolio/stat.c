/*
 * stat.c - "zfolio stat [RUN|PID]": the live counters of the runs going on, as zramctl
 * and zram's mm_stat show theirs: for each run (a group, src/group/), its limit and
 * resident bytes, and for each of its processes what it holds resident, what it has
 * stored and in how much, swap-outs and swap-ins, major faults, their latency, reclaim.
 *
 * A run is found by its memfd: /proc/PID/fd/N naming "/memfd:zfolio-group" in the
 * zfolio run process that made it. RUN is that process's pid; PID, any process of a run
 * (its row alone is shown, under its run's line). The counters come from the members
 * themselves, each answering from its reclaim thread (zf_group_members()).
 *
 * Exit status: 0, 1 when nothing matches (no run going on, or PID is not under zfolio),
 * 2 on bad usage.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define GROUP_LINK "/memfd:zfolio-group"
#define MEMBERS_MAX 256
#define ANSWER_MS 500 /* how long a member may take to answer */

static const struct cli_command stat_cmd = {
	.name = "stat",
	.operand = "[RUN|PID]",
	.about = "Shows the live counters of the zfolio runs going on ('zfolio run'): for each run,\n"
		 "its limit, its resident bytes now and at most, its processes and what reclaim\n"
		 "evicted; for each process, its resident bytes (as the run's limit counts them),\n"
		 "what it has stored and the compressed size, the pool's pages, the ratio,\n"
		 "units swapped out and in, major faults, their service latency (p50, p99) and\n"
		 "the units reclaim evicted. RUN is the pid of a 'zfolio run'; PID, a process\n"
		 "running under one (its row only). Without either, every run.\n",
	.notes = "Units are the regions' (2 MiB frames by default): SWPOUT and SWPIN count them,\n"
		 "the unit column says their size. RESIDENT does not count the pages a child of\n"
		 "fork() shares with its parent since the fork (the parent is charged for them).\n"
		 "--json prints one object per run; with --watch, one each time.\n"
		 "\n"
		 "exit status: 0, 1 no run going on or PID not under zfolio, 2 bad usage.\n",
	.uses = {
		{ .opt = OPT_JSON },
		{ .opt = OPT_WATCH },
	},
};

struct run_ref {
	int holder; /* the zfolio run's pid */
	char path[PATH_MAX]; /* /proc/HOLDER/fd/N */
};

/* The runs going on: the processes holding a group's memfd. Returns how many (at most cap). */
static int find_runs(struct run_ref *runs, int cap)
{
	DIR *proc = opendir("/proc");
	struct dirent *p;
	int n = 0;

	if (!proc)
		cli_die(1, "/proc: %s", strerror(errno));
	while (n < cap && (p = readdir(proc))) {
		char dir[300], link[PATH_MAX];
		struct dirent *f;
		DIR *fds;

		if (!isdigit((unsigned char)p->d_name[0]))
			continue;
		snprintf(dir, sizeof(dir), "/proc/%s/fd", p->d_name);
		fds = opendir(dir);
		if (!fds)
			continue;
		while (n < cap && (f = readdir(fds))) {
			char path[600];
			ssize_t len;

			if (f->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, f->d_name);
			len = readlink(path, link, sizeof(link) - 1);
			if (len <= 0)
				continue;
			link[len] = 0;
			if (strncmp(link, GROUP_LINK, strlen(GROUP_LINK)))
				continue;
			runs[n].holder = atoi(p->d_name);
			snprintf(runs[n].path, sizeof(runs[n].path), "%s", path);
			n++;
		}
		closedir(fds);
	}
	closedir(proc);
	return n;
}

/* A process's command line, spaces between its arguments, cut to len. */
static void command_of(int pid, char *out, size_t len)
{
	char path[64];
	FILE *f;
	size_t n = 0;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	out[0] = 0;
	f = fopen(path, "r");
	if (!f)
		return;
	n = fread(out, 1, len - 1, f);
	fclose(f);
	out[n] = 0;
	for (size_t i = 0; i + 1 < n; i++)
		if (!out[i])
			out[i] = ' ';
}

static double mib(uint64_t b)
{
	return (double)b / 1048576.0;
}

/* The per-size arrays summed (one index moves: the region's unit). */
static uint64_t sum_orders(const uint64_t *v)
{
	uint64_t s = 0;

	for (int i = 0; i < ZF_STORE_ORDERS; i++)
		s += v[i];
	return s;
}

static const char *human_ns(uint64_t ns, char *buf, size_t len)
{
	if (!ns)
		snprintf(buf, len, "-");
	else if (ns < 10000)
		snprintf(buf, len, "%.1fus", (double)ns / 1e3);
	else if (ns < 10000000)
		snprintf(buf, len, "%.0fus", (double)ns / 1e3);
	else
		snprintf(buf, len, "%.0fms", (double)ns / 1e6);
	return buf;
}

static double ratio(const zf_store_stats *s)
{
	return s->compr_data_size ? (double)s->orig_data_size / (double)s->compr_data_size : 0;
}

static void print_table(const struct run_ref *run, const zf_group_stats *g,
			const zf_group_member *m, int n, int only)
{
	char cmd[256], lim[32], unit[16], p50[16], p99[16];
	uint64_t pool = 0;

	for (int i = 0; i < n; i++)
		pool += m[i].store.pool_total_size;
	command_of(run->holder, cmd, 60);
	if (g->limit)
		snprintf(lim, sizeof(lim), "%.1f MiB", mib(g->limit));
	else
		snprintf(lim, sizeof(lim), "none");
	printf("run %d (%s): limit %s, resident %.1f MiB (peak %.1f), %llu process%s, pool "
	       "%.1f MiB, reclaimed %.1f MiB\n",
	       run->holder, cmd, lim, mib(g->resident_bytes), mib(g->resident_max),
	       (unsigned long long)g->members, g->members == 1 ? "" : "es", mib(pool),
	       mib(g->reclaimed_bytes));
	printf("%8s %-16s %9s %9s %9s %9s %6s %5s %8s %8s %8s %7s %7s %8s\n", "PID", "COMMAND",
	       "RESIDENT", "STORED", "COMPR", "POOL", "RATIO", "UNIT", "SWPOUT", "SWPIN", "MAJFLT",
	       "P50", "P99", "RECLAIM");
	for (int i = 0; i < n; i++) {
		const zf_group_member *x = &m[i];

		if (only && x->pid != (uint64_t)only)
			continue;
		command_of((int)x->pid, cmd, 17);
		printf("%8llu %-16s %8.1fM %8.1fM %8.1fM %8.1fM %6.2f %5s %8llu %8llu %8llu %7s "
		       "%7s %8llu\n",
		       (unsigned long long)x->pid, cmd, mib(x->resident_bytes),
		       mib(x->store.orig_data_size), mib(x->store.compr_data_size),
		       mib(x->store.pool_total_size), ratio(&x->store),
		       cli_format_unit(x->region.frame ? x->region.frame : x->region.unit, unit,
				       sizeof(unit)),
		       (unsigned long long)sum_orders(x->region.swpout_units),
		       (unsigned long long)sum_orders(x->region.swpin_units),
		       (unsigned long long)x->region.pgmajfault,
		       human_ns(x->region.fault_p50_ns, p50, sizeof(p50)),
		       human_ns(x->region.fault_p99_ns, p99, sizeof(p99)),
		       (unsigned long long)x->region.evict_reclaim);
	}
}

static void print_json(const struct run_ref *run, const zf_group_stats *g, const zf_group_member *m,
		       int n, int only)
{
	char cmd[1024];
	int first = 1;

	command_of(run->holder, cmd, sizeof(cmd));
	printf("{\"run\":%d", run->holder);
	printf(",\"command\":");
	cli_json_string(stdout, cmd);
	cli_json_u64("limit", g->limit);
	cli_json_u64("resident_bytes", g->resident_bytes);
	cli_json_u64("resident_max", g->resident_max);
	cli_json_u64("members", g->members);
	cli_json_u64("members_max", g->members_max);
	cli_json_u64("joined", g->joined);
	cli_json_u64("reclaimed_bytes", g->reclaimed_bytes);
	printf(",\"processes\":[");
	for (int i = 0; i < n; i++) {
		const zf_group_member *x = &m[i];
		char unit[16];

		if (only && x->pid != (uint64_t)only)
			continue;
		command_of((int)x->pid, cmd, sizeof(cmd));
		printf("%s{\"pid\":%llu", first ? "" : ",", (unsigned long long)x->pid);
		first = 0;
		printf(",\"command\":");
		cli_json_string(stdout, cmd);
		cli_json_u64("resident_bytes", x->resident_bytes);
		cli_json_u64("resident_max", x->region.resident_max);
		cli_json_u64("stored_bytes", x->store.orig_data_size);
		cli_json_u64("compressed_bytes", x->store.compr_data_size);
		cli_json_u64("pool_bytes", x->store.pool_total_size);
		cli_json_u64("meta_bytes", x->region.meta_bytes + x->store.meta_bytes);
		cli_json_num("ratio", ratio(&x->store), 3);
		printf(",\"unit\":\"%s\"",
		       cli_format_unit(x->region.frame ? x->region.frame : x->region.unit, unit,
				       sizeof(unit)));
		cli_json_u64("swpout_units", sum_orders(x->region.swpout_units));
		cli_json_u64("swpin_units", sum_orders(x->region.swpin_units));
		cli_json_u64("swpout", x->region.swpout);
		cli_json_u64("swpin", x->region.swpin);
		cli_json_u64("pgmajfault", x->region.pgmajfault);
		cli_json_u64("fault_p50_ns", x->region.fault_p50_ns);
		cli_json_u64("fault_p99_ns", x->region.fault_p99_ns);
		cli_json_u64("evict_reclaim", x->region.evict_reclaim);
		cli_json_u64("limit_waits", x->region.limit_waits);
		cli_json_u64("age_ms", x->age_ns == UINT64_MAX ? UINT64_MAX : x->age_ns / 1000000);
		printf("}");
	}
	printf("]}\n");
}

/* Whether pid is a process of run. */
static int member_of(const struct run_ref *run, int pid)
{
	static zf_group_member m[MEMBERS_MAX];
	zf_group *grp;
	int n, found = 0;

	if (zf_group_open(run->path, &grp))
		return 0;
	n = zf_group_members(grp, m, MEMBERS_MAX, 0);
	for (int i = 0; i < n && i < MEMBERS_MAX && !found; i++)
		found = m[i].pid == (uint64_t)pid;
	zf_group_close(grp);
	return found;
}

/*
 * Shows run (only: one pid of it, 0: all). Returns 0, or 1 when the run is gone, or when
 * only is not among its members (then nothing is printed).
 */
static int show(const struct run_ref *run, int only, int json)
{
	static zf_group_member m[MEMBERS_MAX];
	zf_group_stats g;
	zf_group *grp;
	int n, found = !only;

	if (zf_group_open(run->path, &grp))
		return 1;
	n = zf_group_members(grp, m, MEMBERS_MAX, ANSWER_MS);
	if (n > MEMBERS_MAX)
		n = MEMBERS_MAX;
	if (n < 0 || zf_group_get_stats(grp, &g, sizeof(g))) {
		zf_group_close(grp);
		return 1;
	}
	zf_group_close(grp);
	for (int i = 0; i < n && !found; i++)
		found = m[i].pid == (uint64_t)only;
	if (!found)
		return 1;
	if (json)
		print_json(run, &g, m, n, only);
	else
		print_table(run, &g, m, n, only);
	return 0;
}

int cmd_stat(int argc, char **argv)
{
	const struct cli_args *a = cli_parse(&stat_cmd, argc, argv);
	const int json = a->v[OPT_JSON].n > 0;
	const unsigned watch = a->v[OPT_WATCH].n ? (unsigned)a->v[OPT_WATCH].num[0] : 0;
	struct run_ref runs[64];
	int pid = 0, nruns, which = -1;
	uint64_t v;

	if (a->operand) {
		if (cli_parse_uint(a->operand, 1, INT32_MAX, &v))
			cli_die(EXIT_USAGE, "'%s' is not a pid", a->operand);
		pid = (int)v;
	}
	nruns = find_runs(runs, 64);
	if (pid) {
		/* RUN: a zfolio run's pid; else a process of one. */
		for (int i = 0; i < nruns && which < 0; i++)
			if (runs[i].holder == pid)
				which = i;
		if (which >= 0) {
			pid = 0;
		} else {
			for (int i = 0; i < nruns && which < 0; i++)
				if (member_of(&runs[i], pid))
					which = i;
		}
		if (which < 0) {
			if (kill(pid, 0) && errno == ESRCH)
				cli_die(1, "no process %d", pid);
			cli_die(1,
				"process %d is not running under zfolio (no 'zfolio run' has it)",
				pid);
		}
	} else if (!nruns) {
		cli_die(1, "no zfolio run is going on");
	}
	for (int tick = 0;; tick++) {
		int shown = 0;

		if (tick && !json)
			printf("\n");
		for (int i = 0; i < nruns; i++) {
			if (which >= 0 && i != which)
				continue;
			shown += !show(&runs[i], pid, json);
		}
		fflush(stdout);
		if (!watch || !shown)
			return tick && !shown ? 0 : !shown;
		sleep(watch);
	}
}
