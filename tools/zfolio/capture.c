/*
 * capture.c - "zfolio capture": dump the private anonymous memory of a live process as a
 * memory image (see zf_image_writer_open() in image.h).
 *
 * What is dumped, and why:
 *  - the mappings of /proc/PID/maps that are readable and private with no file behind
 *    them: no path, [heap], [stack], [anon:NAME]. These are the pages zswap and zram
 *    see; file-backed pages go back to their file, and [vvar], [vdso], [vsyscall],
 *    shared and unreadable mappings (guard pages, ---p) are not the process's data;
 *  - of those, by default only the pages present in RAM or swap according to
 *    /proc/PID/pagemap (bit 63 present, bit 62 swapped): a heap reserves far more
 *    address space than it touches, and untouched pages are not memory the kernel
 *    would ever compress. The PAGEMAP_SCAN ioctl (Linux 6.7) finds them range by range
 *    and skips empty page tables, which matters for sanitizer shadows and other
 *    reservations of terabytes; older kernels fall back to one 8-byte entry per page.
 *    --all dumps every page of the mappings (reading an untouched page maps the shared
 *    zero page; it allocates page tables but no memory);
 *  - with --max, when more is eligible, evenly spaced runs of 512 consecutive eligible
 *    pages (2 MiB): the sample spans the whole address space, yet keeps the 2 MiB
 *    locality that large-unit compression depends on (shared/corpus/README.md).
 *
 * Pages are read with pread() on /proc/PID/mem in runs of up to 2 MiB. The kernel
 * stops a read at the first page it cannot access and returns what it read before;
 * such a page (EIO: a VM_IO mapping, a race with munmap) is skipped and counted, not
 * fatal. A read of 0 bytes means the process exited.
 *
 * --stop sends SIGSTOP for the duration of the dump, so that the image is one consistent
 * moment, and SIGCONT after the last read, before the file is finished, and on every
 * other way out: errors (cleanup() runs before any exit) and SIGINT/SIGTERM/SIGHUP (the
 * handler only sets a flag; the loops notice it, clean up and re-raise). Compression
 * runs as pages are appended, so a .zst capture keeps the process stopped longer. A
 * process that was already stopped is left stopped. The image is written through
 * zf_image_writer, which writes a temporary file and renames it at the end, so a failed
 * capture leaves no file behind.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define PM_PRESENT (1ull << 63)
#define PM_SWAPPED (1ull << 62)
/* Pages per pread() and per --max run: 2 MiB, the largest unit. */
#define RUN_PAGES (ZF_UNIT_MAX / ZF_PAGE_SIZE)
/*
 * PAGEMAP_SCAN (Linux 6.7, include/uapi/linux/fs.h), for the headers of older systems;
 * the kernel checks arg.size, so an older kernel fails the ioctl with ENOTTY.
 */
#ifndef PAGEMAP_SCAN
struct page_region {
	uint64_t start;
	uint64_t end;
	uint64_t categories;
};

struct pm_scan_arg {
	uint64_t size;
	uint64_t flags;
	uint64_t start;
	uint64_t end;
	uint64_t walk_end;
	uint64_t vec;
	uint64_t vec_len;
	uint64_t max_pages;
	uint64_t category_inverted;
	uint64_t category_mask;
	uint64_t category_anyof_mask;
	uint64_t return_mask;
};

#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#define PAGE_IS_PRESENT (1 << 3)
#define PAGE_IS_SWAPPED (1 << 4)
#endif
/* How long to wait for SIGSTOP to take effect. */
#define STOP_WAIT_MS 2000

static const struct cli_command capture_cmd = {
	.name = "capture",
	.operand = "PID",
	.about = "Dumps the private anonymous memory of a live process (heap, stack, anonymous\n"
		 "mappings) as a memory image: whole 4 KiB pages in address order. File-backed,\n"
		 "shared and unreadable mappings and [vvar]/[vdso]/[vsyscall] are skipped.\n",
	.notes = "Reading another process's memory needs ptrace access to it: root (CAP_SYS_PTRACE),\n"
		 "or the same user when /proc/sys/kernel/yama/ptrace_scope allows it (0; 1 only for\n"
		 "descendants). Pages that cannot be read are skipped and counted. --json: the\n"
		 "summary as one object, {\"bench\":\"capture\",\"pid\":...}.\n"
		 "\n"
		 "exit status: 0 done, 1 the capture failed, 2 bad usage, no such process or nothing\n"
		 "to dump, 77 no permission to read the process.\n",
	.uses = {
		{ .opt = OPT_OUTPUT, .required = 1 },
		{ .opt = OPT_MAX, .def_help = "no limit" },
		{ .opt = OPT_STOP },
		{ .opt = OPT_ALL },
		{ .opt = OPT_LEVEL, .def_help = "19" },
		{ .opt = OPT_JSON },
	},
};

/* A run of pages to dump: [addr, addr + pages * ZF_PAGE_SIZE). */
struct run {
	uint64_t addr;
	uint64_t pages;
};

struct run_list {
	struct run *v;
	size_t n, cap;
	uint64_t pages;
};

struct capture {
	pid_t pid;
	const char *path;
	int mem_fd, pagemap_fd;
	int stopped; /* we sent SIGSTOP and owe a SIGCONT */
	zf_image_writer *writer;
	void *buf;
	struct run_list runs;
	/* The summary. */
	unsigned mappings, mappings_skipped;
	uint64_t eligible_pages, pages, zero_pages, same_filled_pages, unreadable_pages;
};

/* For the signal handlers and the atexit() safety net: the one capture of this process. */
static struct capture *current;
static volatile sig_atomic_t interrupted;

static void resume_process(struct capture *c)
{
	if (c->stopped) {
		kill(c->pid, SIGCONT);
		c->stopped = 0;
	}
}

/* Undoes everything a capture has done to the world; safe to call twice. */
static void cleanup(struct capture *c)
{
	resume_process(c);
	if (c->writer) {
		zf_image_writer_finish(c->writer, 0);
		c->writer = NULL;
	}
	if (c->mem_fd >= 0)
		close(c->mem_fd);
	if (c->pagemap_fd >= 0)
		close(c->pagemap_fd);
	c->mem_fd = c->pagemap_fd = -1;
	free(c->buf);
	free(c->runs.v);
	c->buf = NULL;
	c->runs.v = NULL;
}

static void cleanup_at_exit(void)
{
	if (current)
		cleanup(current);
}

static void on_signal(int sig)
{
	interrupted = sig;
}

/* Cleans up (the process continues, no partial file) and exits with a message. */
static void __attribute__((format(printf, 3, 4), noreturn))
capture_die(struct capture *c, int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cleanup(c);
	cli_die(code, "%s", msg);
}

/* Called between steps: on SIGINT/SIGTERM/SIGHUP, clean up and die of the signal. */
static void check_interrupted(struct capture *c)
{
	const int sig = interrupted;

	if (!sig)
		return;
	cleanup(c);
	cli_progress_done();
	fprintf(stderr, "zfolio: capture interrupted (%s); process %d continues, no file written\n",
		strsignal(sig), (int)c->pid);
	signal(sig, SIG_DFL);
	raise(sig);
	exit(1);
}

static void install_signal_handlers(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* Opens /proc/PID/NAME, or dies with a message that says what is missing. */
static int open_proc(struct capture *c, const char *name)
{
	char path[64];
	int fd, err;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)c->pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	err = errno;
	if (err == EACCES || err == EPERM)
		capture_die(c, EXIT_SKIP,
			    "%s: permission denied; reading another process's memory needs "
			    "ptrace access: run as root, or as the same user with "
			    "/proc/sys/kernel/yama/ptrace_scope 0",
			    path);
	if (err != ENOENT && err != ESRCH)
		capture_die(c, 1, "%s: %s", path, strerror(err));
	/* ESRCH with /proc/PID there: the process has no memory (a kernel thread, a zombie). */
	snprintf(path, sizeof(path), "/proc/%d", (int)c->pid);
	if (err == ESRCH && access(path, F_OK) == 0)
		capture_die(c, EXIT_USAGE,
			    "process %d has no user memory (a kernel thread, or exited)",
			    (int)c->pid);
	capture_die(c, EXIT_USAGE, "no such process: %d", (int)c->pid);
}

/* The state letter of /proc/PID/task/TID/stat ('R', 'S', 'T', ...), or 0 when gone. */
static char task_state(pid_t pid, long tid)
{
	char path[96], buf[512];
	const char *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/task/%ld/stat", (int)pid, tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* "tid (comm) S ...": comm may hold spaces and parentheses; the last ')' ends it. */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return 0;
	return p[2];
}

/*
 * 1 when every thread of the process is stopped ('T'), stopped under a tracer ('t') or
 * dead, 0 when one still runs, -ESRCH when the process is gone. SIGSTOP is delivered
 * asynchronously (each thread stops on its way back to user space), so callers poll.
 */
static int process_stopped(pid_t pid)
{
	struct dirent *de;
	char path[64];
	int all = 1;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return -ESRCH;
	while (all && (de = readdir(d))) {
		char *end, s;
		const long tid = strtol(de->d_name, &end, 10);

		if (*end || tid <= 0)
			continue;
		s = task_state(pid, tid);
		if (s && s != 'T' && s != 't' && s != 'Z' && s != 'X')
			all = 0;
	}
	closedir(d);
	return all;
}

static void stop_process(struct capture *c)
{
	const struct timespec tick = { 0, 1000000L };
	int ret = process_stopped(c->pid);

	if (ret == -ESRCH)
		capture_die(c, EXIT_USAGE, "no such process: %d", (int)c->pid);
	/* Already stopped (by a job-control shell, a debugger): leave it as we found it. */
	if (ret == 1)
		return;
	if (kill(c->pid, SIGSTOP) < 0) {
		if (errno == ESRCH)
			capture_die(c, EXIT_USAGE, "no such process: %d", (int)c->pid);
		capture_die(c, errno == EPERM ? EXIT_SKIP : 1, "cannot stop process %d: %s",
			    (int)c->pid, strerror(errno));
	}
	c->stopped = 1;
	for (int ms = 0; ms < STOP_WAIT_MS; ms++) {
		check_interrupted(c);
		ret = process_stopped(c->pid);
		if (ret == 1)
			return;
		if (ret < 0)
			capture_die(c, 1, "process %d exited while being stopped", (int)c->pid);
		nanosleep(&tick, NULL);
	}
	/* A thread in uninterruptible sleep (D) stops only when it wakes up. */
	capture_die(c, 1,
		    "process %d did not stop within %d ms (a thread in uninterruptible sleep?)",
		    (int)c->pid, STOP_WAIT_MS);
}

/* Adds pages at addr to the list, merging with the last run when contiguous. */
static int run_list_add(struct run_list *l, uint64_t addr, uint64_t pages)
{
	if (l->n && l->v[l->n - 1].addr + l->v[l->n - 1].pages * ZF_PAGE_SIZE == addr) {
		l->v[l->n - 1].pages += pages;
	} else {
		if (l->n == l->cap) {
			const size_t cap = l->cap ? 2 * l->cap : 256;
			struct run *v = realloc(l->v, cap * sizeof(*v));

			if (!v)
				return -ENOMEM;
			l->v = v;
			l->cap = cap;
		}
		l->v[l->n].addr = addr;
		l->v[l->n].pages = pages;
		l->n++;
	}
	l->pages += pages;
	return 0;
}

static void add_run(struct capture *c, struct run_list *l, uint64_t addr, uint64_t pages)
{
	if (run_list_add(l, addr, pages) < 0)
		capture_die(c, 1, "out of memory");
}

/* Adds the pages of [start, end) that are present in RAM or swap, one pagemap entry each. */
static void scan_pagemap_read(struct capture *c, uint64_t start, uint64_t end)
{
	static uint64_t ents[4096];

	for (uint64_t addr = start; addr < end;) {
		const uint64_t want = (end - addr) / ZF_PAGE_SIZE;
		const size_t n = want < 4096 ? (size_t)want : 4096;
		const off_t off = (off_t)(addr / ZF_PAGE_SIZE * sizeof(uint64_t));
		const ssize_t got = pread(c->pagemap_fd, ents, n * sizeof(uint64_t), off);

		if (got < 0 && errno == EINTR) {
			check_interrupted(c);
			continue;
		}
		if (got < 0)
			capture_die(c, 1, "/proc/%d/pagemap: %s", (int)c->pid, strerror(errno));
		if (got < (ssize_t)sizeof(uint64_t))
			capture_die(c, 1, "process %d exited during the capture", (int)c->pid);
		for (size_t i = 0; i < (size_t)got / sizeof(uint64_t); i++, addr += ZF_PAGE_SIZE) {
			if (ents[i] & (PM_PRESENT | PM_SWAPPED))
				add_run(c, &c->runs, addr, 1);
		}
	}
}

/*
 * The same with the PAGEMAP_SCAN ioctl (Linux 6.7), which returns ranges and skips
 * empty page tables whole. That matters for sanitizer shadows and other reservations of
 * terabytes, where reading one 8-byte entry per page would take minutes. Returns 0,
 * or -ENOTTY when the kernel does not have the ioctl.
 */
static int scan_pagemap_ioctl(struct capture *c, uint64_t start, uint64_t end)
{
	struct page_region regs[256];
	struct pm_scan_arg arg;

	memset(&arg, 0, sizeof(arg));
	arg.size = sizeof(arg);
	arg.start = start;
	arg.end = end;
	arg.vec = (uint64_t)(uintptr_t)regs;
	arg.vec_len = sizeof(regs) / sizeof(regs[0]);
	arg.category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
	arg.return_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
	for (;;) {
		const int n = ioctl(c->pagemap_fd, PAGEMAP_SCAN, &arg);

		if (n < 0 && errno == EINTR) {
			check_interrupted(c);
			continue;
		}
		if (n < 0 && (errno == ENOTTY || errno == EINVAL) && arg.start == start)
			return -ENOTTY;
		if (n < 0 && errno == ESRCH)
			capture_die(c, 1, "process %d exited during the capture", (int)c->pid);
		if (n < 0)
			capture_die(c, 1, "/proc/%d/pagemap: PAGEMAP_SCAN: %s", (int)c->pid,
				    strerror(errno));
		for (int i = 0; i < n; i++)
			add_run(c, &c->runs, regs[i].start,
				(regs[i].end - regs[i].start) / ZF_PAGE_SIZE);
		if (arg.walk_end >= end)
			return 0;
		arg.start = arg.walk_end;
	}
}

static void scan_pagemap(struct capture *c, uint64_t start, uint64_t end)
{
	static int no_ioctl;

	if (!no_ioctl && scan_pagemap_ioctl(c, start, end) == 0)
		return;
	no_ioctl = 1;
	scan_pagemap_read(c, start, end);
}

/* Memory that is the process's own data: what zswap and zram would compress. */
static int mapping_eligible(const char *perms, uint64_t inode, const char *path)
{
	if (perms[0] != 'r' || perms[3] != 'p' || inode)
		return 0;
	return !path[0] || !strcmp(path, "[heap]") || !strncmp(path, "[stack", 6) ||
	       !strncmp(path, "[anon:", 6);
}

/* Reads /proc/PID/maps and lists the pages to consider, in address order. */
static void scan_maps(struct capture *c, int all)
{
	const int fd = open_proc(c, "maps");
	FILE *f = fdopen(fd, "r");
	size_t cap = 0;
	char *line = NULL;

	if (!f) {
		close(fd);
		capture_die(c, 1, "out of memory");
	}
	while (getline(&line, &cap, f) > 0) {
		uint64_t start, end, inode;
		char perms[5], *path;
		int off = -1;

		check_interrupted(c);
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %*s %*s %" SCNu64 " %n", &start, &end,
			   perms, &inode, &off) < 4 ||
		    off < 0 || strlen(perms) != 4 || end <= start) {
			fclose(f);
			capture_die(c, 1, "/proc/%d/maps: unexpected line: %s", (int)c->pid, line);
		}
		path = line + off;
		path[strcspn(path, "\n")] = '\0';
		if (!mapping_eligible(perms, inode, path)) {
			c->mappings_skipped++;
			continue;
		}
		c->mappings++;
		if (all)
			add_run(c, &c->runs, start, (end - start) / ZF_PAGE_SIZE);
		else
			scan_pagemap(c, start, end);
	}
	free(line);
	if (ferror(f)) {
		const int err = errno;

		fclose(f);
		capture_die(c, 1, "/proc/%d/maps: %s", (int)c->pid, strerror(err));
	}
	fclose(f);
	c->eligible_pages = c->runs.pages;
}

/*
 * Keeps max_pages of the eligible pages: K evenly spaced runs of RUN_PAGES consecutive
 * eligible pages (one shorter run when max_pages < RUN_PAGES). Run i starts at eligible
 * page floor(i * E / K), computed without overflow; the runs cannot overlap because
 * E / K >= RUN_PAGES whenever E > max_pages.
 */
static void select_max(struct capture *c, uint64_t max_pages)
{
	const uint64_t e = c->runs.pages;
	struct run_list out = { 0 };
	uint64_t chunk = RUN_PAGES, k, base = 0;
	size_t r = 0;

	if (e <= max_pages)
		return;
	k = max_pages / chunk;
	if (!k) {
		k = 1;
		chunk = max_pages;
	}
	for (uint64_t i = 0; i < k; i++) {
		uint64_t s = i * (e / k) + i * (e % k) / k, len = chunk;

		while (len) {
			uint64_t off, take;

			while (base + c->runs.v[r].pages <= s)
				base += c->runs.v[r++].pages;
			off = s - base;
			take = c->runs.v[r].pages - off < len ? c->runs.v[r].pages - off : len;
			if (run_list_add(&out, c->runs.v[r].addr + off * ZF_PAGE_SIZE, take) < 0) {
				free(out.v);
				capture_die(c, 1, "out of memory");
			}
			s += take;
			len -= take;
		}
	}
	free(c->runs.v);
	c->runs = out;
}

static void count_pages(struct capture *c, const uint8_t *p, size_t pages)
{
	for (size_t i = 0; i < pages; i++, p += ZF_PAGE_SIZE) {
		uint64_t v;

		if (zf_same_filled(p, ZF_PAGE_SIZE, &v)) {
			if (v)
				c->same_filled_pages++;
			else
				c->zero_pages++;
		}
	}
	c->pages += pages;
}

/* Reads the selected runs from /proc/PID/mem into the image writer. */
static void dump_pages(struct capture *c)
{
	const uint64_t total = c->runs.pages;
	double shown = 0;

	c->buf = aligned_alloc(ZF_PAGE_SIZE, (size_t)RUN_PAGES * ZF_PAGE_SIZE);
	if (!c->buf)
		capture_die(c, 1, "out of memory");
	for (size_t r = 0; r < c->runs.n; r++) {
		uint64_t addr = c->runs.v[r].addr, left = c->runs.v[r].pages;

		while (left) {
			const size_t n = left < RUN_PAGES ? (size_t)left : RUN_PAGES;
			const ssize_t got = pread(c->mem_fd, c->buf, n * ZF_PAGE_SIZE, (off_t)addr);
			size_t pages;
			int ret;

			check_interrupted(c);
			if (got < 0 && errno == EINTR)
				continue;
			if (got == 0)
				capture_die(c, 1, "process %d exited during the capture",
					    (int)c->pid);
			/*
			 * The kernel stops at the first page it cannot read and returns the
			 * bytes before it, or EIO when that is the first page: skip one page.
			 */
			if ((got < 0 && (errno == EIO || errno == EFAULT)) ||
			    (got > 0 && got < (ssize_t)ZF_PAGE_SIZE)) {
				c->unreadable_pages++;
				addr += ZF_PAGE_SIZE;
				left--;
				continue;
			}
			if (got < 0)
				capture_die(c, 1, "/proc/%d/mem at 0x%" PRIx64 ": %s", (int)c->pid,
					    addr, strerror(errno));
			pages = (size_t)got / ZF_PAGE_SIZE;
			count_pages(c, c->buf, pages);
			ret = zf_image_writer_append(c->writer, c->buf, pages * ZF_PAGE_SIZE);
			if (ret < 0)
				capture_die(c, 1, "%s: write failed: %s", c->path,
					    zf_strerror(ret));
			addr += pages * ZF_PAGE_SIZE;
			left -= pages;
			if (cli_now() - shown > 0.2) {
				shown = cli_now();
				cli_progress("capture %d: %" PRIu64 " of %" PRIu64 " pages",
					     (int)c->pid, c->pages + c->unreadable_pages, total);
			}
		}
	}
	cli_progress_done();
}

static int ends_with(const char *s, const char *suffix)
{
	const size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static void print_summary(const struct capture *c, int all, uint64_t file_bytes, int json)
{
	const uint64_t bytes = c->pages * ZF_PAGE_SIZE;

	if (json) {
		/* One line in the shape of the other commands' JSON. */
		printf("{\"bench\":\"capture\",\"pid\":%d", (int)c->pid);
		cli_json_u64("pages", c->pages);
		cli_json_u64("bytes", bytes);
		cli_json_u64("zero_pages", c->zero_pages);
		cli_json_u64("same_filled_pages", c->same_filled_pages);
		cli_json_u64("unreadable_pages", c->unreadable_pages);
		cli_json_u64("mappings", c->mappings);
		cli_json_u64("mappings_skipped", c->mappings_skipped);
		cli_json_u64("eligible_pages", c->eligible_pages);
		printf(",\"file\":");
		cli_json_string(stdout, c->path);
		cli_json_u64("file_bytes", file_bytes);
		printf("}\n");
		return;
	}
	printf("process %d: %u private anonymous mappings used, %u other mappings skipped\n",
	       (int)c->pid, c->mappings, c->mappings_skipped);
	printf("  eligible     %12" PRIu64 " pages (%.1f MiB, %s)\n", c->eligible_pages,
	       (double)c->eligible_pages * ZF_PAGE_SIZE / (1 << 20),
	       all ? "every page of the mappings" : "present in RAM or swap");
	printf("  dumped       %12" PRIu64 " pages, %" PRIu64 " bytes (%.1f MiB)\n", c->pages,
	       bytes, (double)bytes / (1 << 20));
	printf("  zero         %12" PRIu64 " pages (%.2f%%)\n", c->zero_pages,
	       pct(c->zero_pages, c->pages));
	printf("  same-filled  %12" PRIu64 " pages (%.2f%%, not zero)\n", c->same_filled_pages,
	       pct(c->same_filled_pages, c->pages));
	printf("  unreadable   %12" PRIu64 " pages (skipped)\n", c->unreadable_pages);
	printf("  file         %s, %" PRIu64 " bytes (%.2fx)\n", c->path, file_bytes,
	       file_bytes ? (double)bytes / (double)file_bytes : 0.0);
}

int cmd_capture(int argc, char **argv)
{
	static struct capture cap;
	struct capture *const c = &cap;
	const struct cli_args *a = cli_parse(&capture_cmd, argc, argv);
	const int all = a->v[OPT_ALL].n, stop = a->v[OPT_STOP].n, json = a->v[OPT_JSON].n;
	const uint64_t max_bytes = a->v[OPT_MAX].n ? a->v[OPT_MAX].num[0] : 0;
	int level = 0, ret;
	uint64_t v;
	struct stat st;

	memset(c, 0, sizeof(*c));
	c->mem_fd = c->pagemap_fd = -1;
	if (cli_parse_uint(a->operand, 1, INT_MAX, &v) < 0)
		cli_die(EXIT_USAGE, "capture: invalid PID '%s' (a process id, a positive number)",
			a->operand);
	c->pid = (pid_t)v;
	c->path = a->v[OPT_OUTPUT].str[0];
	if (!*c->path)
		cli_die(EXIT_USAGE, "capture: missing -o FILE (see 'zfolio capture --help')");
	if (ends_with(c->path, ".zst"))
		level = 19;
	if (a->v[OPT_LEVEL].n) {
		if (!level)
			cli_die(EXIT_USAGE, "capture: --level is for a .zst output file ('%s')",
				c->path);
		level = (int)a->v[OPT_LEVEL].num[0];
	}
	if (stop && c->pid == getpid())
		cli_die(EXIT_USAGE, "capture: --stop on the capturing process itself");

	current = c;
	atexit(cleanup_at_exit);
	install_signal_handlers();

	/* Open first: this is where a missing process or a missing permission shows. */
	c->mem_fd = open_proc(c, "mem");
	if (!all)
		c->pagemap_fd = open_proc(c, "pagemap");
	if (stop)
		stop_process(c);
	scan_maps(c, all);
	if (!c->runs.pages)
		capture_die(c, EXIT_USAGE,
			    "process %d has no private anonymous memory to dump (%u mappings, none "
			    "eligible%s)",
			    (int)c->pid, c->mappings + c->mappings_skipped,
			    all ? "" : " with pages present");
	if (max_bytes)
		select_max(c, max_bytes / ZF_PAGE_SIZE);

	ret = zf_image_writer_open(c->path, level, &c->writer);
	if (ret < 0)
		capture_die(c, ret == -EINVAL ? EXIT_USAGE : 1, "%s: %s", c->path,
			    zf_strerror(ret));
	dump_pages(c);
	/* Everything is read: the process may go on while the file is finished. */
	resume_process(c);
	if (!c->pages)
		capture_die(c, 1, "process %d: none of its %" PRIu64 " pages could be read",
			    (int)c->pid, c->unreadable_pages);
	ret = zf_image_writer_finish(c->writer, 1);
	c->writer = NULL;
	if (ret < 0)
		capture_die(c, 1, "%s: %s", c->path, zf_strerror(ret));
	if (stat(c->path, &st) < 0)
		memset(&st, 0, sizeof(st));
	print_summary(c, all, (uint64_t)st.st_size, json);
	cleanup(c);
	current = NULL;
	if (fflush(stdout) == EOF)
		return 1;
	return 0;
}
