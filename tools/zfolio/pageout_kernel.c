/*
 * pageout_kernel.c - the kernel backend of "zfolio pageout": the same loop on ordinary
 * memory, swapped by the running kernel to its own zram with madvise(MADV_PAGEOUT).
 *
 * Set-up (root only): a zram device with no disk size (zram0, or one hot-added), its
 * algorithm set and sized to hold the job, a swap header written to it and swapon(2) at
 * the highest priority; the mTHP size equal to the unit set to "madvise" and every other
 * size (the PMD size too) to "never", so that memory mapped with MADV_HUGEPAGE gets folios
 * of the unit's size and nothing larger (4k: every size "never").
 *
 * Every setting changed is written back, in reverse order, by pageout_kernel_restore():
 * swapoff, zram reset, its algorithm, the hot-added device removed, the mTHP sizes. It
 * runs at the end of a run, at exit() (cli_die() on any error) and after SIGINT, SIGTERM
 * or SIGHUP (which only set a flag; the loop stops between phases). zswap is never
 * touched: once enabled, this kernel swaps large folios in page by page until the next
 * boot. The per-size counters show whether the folios went out and came back whole; when
 * they did not, the run says so loudly and is marked degraded.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "pageout.h"

#define THP_DIR "/sys/kernel/mm/transparent_hugepage"
#define ZRAM_CONTROL "/sys/class/zram-control"
#define MAX_SAVED 32

/* -------------------------------------------------------------------------------- */
/* Files of /sys and /proc                                                          */
/* -------------------------------------------------------------------------------- */

/* Reads a small file into buf (NUL-terminated, trailing newline cut). 0 or -errno. */
static int read_text(const char *path, char *buf, size_t cap)
{
	const int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, cap - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	return 0;
}

static int write_text(const char *path, const char *value)
{
	const int fd = open(path, O_WRONLY | O_CLOEXEC);
	const size_t len = strlen(value);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, value, len);
	if (n < 0) {
		const int err = errno;

		close(fd);
		return -err;
	}
	close(fd);
	return (size_t)n == len ? 0 : -EIO;
}

static uint64_t read_u64(const char *path)
{
	char buf[64];

	return read_text(path, buf, sizeof(buf)) ? 0 : strtoull(buf, NULL, 10);
}

/* The bracketed choice of a sysfs selector ("always [madvise] never" -> "madvise"). */
static int selected(const char *text, char *out, size_t cap)
{
	const char *open_b = strchr(text, '['), *close_b = open_b ? strchr(open_b, ']') : NULL;
	size_t n;

	if (!open_b || !close_b)
		return -EINVAL;
	n = (size_t)(close_b - open_b - 1);
	if (n + 1 > cap)
		return -EINVAL;
	memcpy(out, open_b + 1, n);
	out[n] = '\0';
	return 0;
}

/* Whether the space-separated list (brackets allowed) has word. */
static int list_has(const char *list, const char *word)
{
	const size_t len = strlen(word);

	for (const char *p = list; (p = strstr(p, word)); p += len) {
		const char before = p == list ? ' ' : p[-1], after = p[len];

		if ((before == ' ' || before == '[') &&
		    (after == ' ' || after == ']' || after == '\0' || after == '\n'))
			return 1;
	}
	return 0;
}

/* A value of /proc/vmstat ("name value" lines). */
static uint64_t vmstat(const char *name)
{
	FILE *f = fopen("/proc/vmstat", "re");
	char key[64];
	unsigned long long v;
	uint64_t out = 0;

	if (!f)
		return 0;
	while (fscanf(f, "%63s %llu", key, &v) == 2) {
		if (!strcmp(key, name)) {
			out = v;
			break;
		}
	}
	fclose(f);
	return out;
}

/* Swap: and Rss: of the mapping that holds addr, in kB, from /proc/self/smaps. */
static void smaps_of(const void *addr, uint64_t *rss_kb, uint64_t *swap_kb)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[256];
	int in = 0;

	*rss_kb = *swap_kb = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long start, end;
		unsigned long long kb;

		if (sscanf(line, "%lx-%lx ", &start, &end) == 2 &&
		    strchr(line, '-') < strchr(line, ' ')) {
			if (in)
				break;
			in = start <= (uintptr_t)addr && (uintptr_t)addr < end;
		} else if (in && sscanf(line, "Rss: %llu kB", &kb) == 1) {
			*rss_kb = kb;
		} else if (in && sscanf(line, "Swap: %llu kB", &kb) == 1) {
			*swap_kb = kb;
		}
	}
	fclose(f);
}

/* -------------------------------------------------------------------------------- */
/* Settings changed, and their restoration                                          */
/* -------------------------------------------------------------------------------- */

static struct {
	struct {
		char path[160];
		char value[64];
	} saved[MAX_SAVED]; /* settings as found, restored in reverse order */
	int n_saved;
	int zram_id; /* the device used, -1 none */
	int zram_added; /* hot-added by us: removed at the end */
	char dev[PATH_MAX]; /* its block device node */
	char node_dir[64]; /* a directory of ours holding the node, when /dev had none */
	int swap_on;
	void *map;
	size_t map_len;
	int restoring;
} ks = { .zram_id = -1 };

static volatile sig_atomic_t stop_signal;
static struct sigaction old_actions[3];
static const int stop_signals[3] = { SIGINT, SIGTERM, SIGHUP };

static void zram_path(char *buf, size_t cap, const char *file)
{
	snprintf(buf, cap, "/sys/block/zram%d/%s", ks.zram_id, file);
}

/*
 * Writes value to the setting at path, first saving what it held (the bracketed choice
 * of a selector) unless saved already. Dies when the write fails.
 */
static void set_setting(const char *path, const char *value)
{
	char now[256], cur[64];
	int ret, found = 0;

	ret = read_text(path, now, sizeof(now));
	if (ret)
		cli_die(1, "%s: %s", path, strerror(-ret));
	if (selected(now, cur, sizeof(cur)))
		snprintf(cur, sizeof(cur), "%.63s", now);
	if (!strcmp(cur, value))
		return;
	for (int i = 0; i < ks.n_saved; i++)
		found |= !strcmp(ks.saved[i].path, path);
	if (!found) {
		if (ks.n_saved == MAX_SAVED)
			cli_die(1, "too many settings to save (%s)", path);
		snprintf(ks.saved[ks.n_saved].path, sizeof(ks.saved[0].path), "%s", path);
		snprintf(ks.saved[ks.n_saved].value, sizeof(ks.saved[0].value), "%s", cur);
		ks.n_saved++;
	}
	ret = write_text(path, value);
	if (ret)
		cli_die(1, "cannot write '%s' to %s: %s", value, path, strerror(-ret));
}

static void restore_warn(const char *what, int err)
{
	fprintf(stderr, "zfolio: could not restore %s: %s: put it back by hand\n", what,
		strerror(err));
}

/*
 * Puts back everything the kernel backend changed, in reverse order. Idempotent: runs at
 * the end of a run and again at exit().
 */
static void pageout_kernel_restore(void)
{
	char path[192];

	if (ks.restoring)
		return;
	ks.restoring = 1;
	if (ks.map) {
		munmap(ks.map, ks.map_len); /* its swapped pages are freed, not read back */
		ks.map = NULL;
	}
	if (ks.swap_on) {
		if (swapoff(ks.dev))
			restore_warn(ks.dev, errno);
		ks.swap_on = 0;
	}
	if (ks.zram_id >= 0) {
		int ret;

		zram_path(path, sizeof(path), "reset");
		ret = write_text(path, "1");
		if (ret)
			restore_warn(path, -ret);
	}
	while (ks.n_saved > 0) {
		const int i = --ks.n_saved;
		const int ret = write_text(ks.saved[i].path, ks.saved[i].value);

		if (ret)
			restore_warn(ks.saved[i].path, -ret);
	}
	if (ks.zram_added) {
		char id[16];
		int ret;

		snprintf(id, sizeof(id), "%d", ks.zram_id);
		ret = write_text(ZRAM_CONTROL "/hot_remove", id);
		if (ret)
			restore_warn("the zram device zfolio added", -ret);
		ks.zram_added = 0;
	}
	ks.zram_id = -1;
	if (ks.node_dir[0]) {
		unlink(ks.dev);
		rmdir(ks.node_dir);
		ks.node_dir[0] = '\0';
	}
	for (int i = 0; i < 3; i++)
		sigaction(stop_signals[i], &old_actions[i], NULL);
	ks.restoring = 0;
}

static void on_stop_signal(int sig)
{
	stop_signal = sig;
}

/* Between phases: after SIGINT, SIGTERM or SIGHUP, restore and exit 128 + signal. */
static void stop_point(void)
{
	if (stop_signal) {
		const int sig = stop_signal;

		pageout_kernel_restore();
		fprintf(stderr, "zfolio: %s: settings restored, stopping\n", strsignal(sig));
		exit(128 + sig);
	}
}

/* -------------------------------------------------------------------------------- */
/* Set-up                                                                           */
/* -------------------------------------------------------------------------------- */

/* A zram algorithm name for a zfolio codec name: the name without its level. */
static void kernel_algorithm(const char *codec, char *out, size_t cap)
{
	snprintf(out, cap, "%.*s", (int)strcspn(codec, ":"), codec);
}

/* The algorithms of zram0 (or of the first zram device), "" when there is none. */
static void zram_algorithms(char *buf, size_t cap)
{
	DIR *d = opendir("/sys/block");
	struct dirent *e;

	buf[0] = '\0';
	while (d && (e = readdir(d))) {
		char path[300];

		if (strncmp(e->d_name, "zram", 4))
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s/comp_algorithm", e->d_name);
		if (!read_text(path, buf, cap))
			break;
	}
	if (d)
		closedir(d);
}

int pageout_kernel_has_codec(const char *name)
{
	char algos[256], algo[32];

	zram_algorithms(algos, sizeof(algos));
	kernel_algorithm(name, algo, sizeof(algo));
	return algos[0] && list_has(algos, algo);
}

static void thp_size_path(char *buf, size_t cap, uint64_t unit)
{
	snprintf(buf, cap, THP_DIR "/hugepages-%llukB/enabled", (unsigned long long)(unit >> 10));
}

void pageout_kernel_check(const struct pageout_job *job, const struct pageout_config *cfgs, int n)
{
	char algos[256], text[4096], path[192];

	if (geteuid() != 0)
		cli_die(EXIT_SKIP, "the kernel backend needs root: it sets up zram as swap and "
				   "changes mTHP settings (it puts them back afterwards)");
	zram_algorithms(algos, sizeof(algos));
	if (!algos[0] && access(ZRAM_CONTROL, F_OK))
		cli_die(EXIT_SKIP, "the kernel backend needs zram, and this kernel has none loaded "
				   "(modprobe zram)");
	for (int i = 0; i < n; i++) {
		char algo[32], ub[16];

		if (cfgs[i].backend != BACKEND_KERNEL)
			continue;
		kernel_algorithm(cfgs[i].codec, algo, sizeof(algo));
		if (strchr(cfgs[i].codec, ':'))
			cli_die(EXIT_USAGE,
				"--codec %s: the kernel backend uses zram's default level (give "
				"'%s')",
				cfgs[i].codec, algo);
		if (algos[0] && !list_has(algos, algo))
			cli_die(EXIT_USAGE, "--codec %s: this kernel's zram has only: %s", algo,
				algos);
		thp_size_path(path, sizeof(path), cfgs[i].unit);
		if (cfgs[i].unit > ZF_PAGE_SIZE && access(path, W_OK))
			cli_die(EXIT_SKIP, "--unit %s: this kernel has no %s mTHP size (%s)",
				cli_format_unit(cfgs[i].unit, ub, sizeof(ub)), ub, path);
	}
	if (!read_text("/proc/swaps", text, sizeof(text)) && strchr(text, '\n') && !job->allow_swap)
		cli_die(EXIT_SKIP,
			"a swap device is active already (/proc/swaps): pages would go to it too, "
			"and zfolio would have to share it. swapoff it, or give --allow-swap to "
			"run "
			"beside it (zram is given the highest priority)");
	if (!read_text("/sys/module/zswap/parameters/enabled", text, sizeof(text)) &&
	    (text[0] == 'Y' || text[0] == '1'))
		fprintf(stderr, "zfolio: WARNING: zswap is enabled: pages swapped out go to zswap "
				"before zram, "
				"and large folios come back in page by page until the next boot. "
				"The kernel "
				"figures measure zswap, not zram. zfolio never enables it\n");
}

/* A zram device to use: one with no disk size, else one hot-added. */
static void zram_pick(void)
{
	DIR *d = opendir("/sys/block");
	struct dirent *e;
	char buf[64];
	int ret;

	while (d && (e = readdir(d)) && ks.zram_id < 0) {
		char path[320];
		int id;

		if (sscanf(e->d_name, "zram%d", &id) != 1)
			continue;
		snprintf(path, sizeof(path), "/sys/block/zram%d/disksize", id);
		if (read_u64(path) == 0) {
			snprintf(path, sizeof(path), "/sys/block/zram%d/initstate", id);
			if (read_u64(path) == 0)
				ks.zram_id = id;
		}
	}
	if (d)
		closedir(d);
	if (ks.zram_id >= 0)
		return;
	ret = read_text(ZRAM_CONTROL "/hot_add", buf, sizeof(buf));
	if (ret)
		cli_die(1, "every zram device is in use, and hot_add failed: %s", strerror(-ret));
	ks.zram_id = atoi(buf);
	ks.zram_added = 1;
}

/* The device node of the zram device: /dev/zramN, or one made in a directory of ours. */
static void zram_node(void)
{
	char path[192], devno[32];
	unsigned maj, min;
	struct stat st;

	zram_path(path, sizeof(path), "dev");
	if (read_text(path, devno, sizeof(devno)) || sscanf(devno, "%u:%u", &maj, &min) != 2)
		cli_die(1, "%s: cannot read the device number", path);
	snprintf(ks.dev, sizeof(ks.dev), "/dev/zram%d", ks.zram_id);
	if (!stat(ks.dev, &st) && S_ISBLK(st.st_mode) && st.st_rdev == makedev(maj, min))
		return;
	snprintf(ks.node_dir, sizeof(ks.node_dir), "/tmp/zfolio-zram.XXXXXX");
	if (!mkdtemp(ks.node_dir)) {
		ks.node_dir[0] = '\0';
		cli_die(1, "mkdtemp: %s", strerror(errno));
	}
	snprintf(ks.dev, sizeof(ks.dev), "%s/zram%d", ks.node_dir, ks.zram_id);
	if (mknod(ks.dev, S_IFBLK | 0600, makedev(maj, min)))
		cli_die(1, "mknod %s: %s", ks.dev, strerror(errno));
}

/*
 * A version-1 swap header on the device (what mkswap writes): in its first page, after
 * 1024 bytes of boot sector, the version, the last usable page, no bad pages, a UUID;
 * "SWAPSPACE2" in the last 10 bytes of the page.
 */
static void write_swap_header(uint64_t disksize)
{
	static uint8_t page[ZF_PAGE_SIZE];
	const uint32_t version = 1, last_page = (uint32_t)(disksize / ZF_PAGE_SIZE - 1);
	const int fd = open(ks.dev, O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		cli_die(1, "%s: %s", ks.dev, strerror(errno));
	memset(page, 0, sizeof(page));
	memcpy(page + 1024, &version, 4);
	memcpy(page + 1028, &last_page, 4);
	if (getrandom(page + 1036, 16, 0) != 16)
		memset(page + 1036, 0x5a, 16);
	memcpy(page + ZF_PAGE_SIZE - 10, "SWAPSPACE2", 10);
	if (pwrite(fd, page, sizeof(page), 0) != (ssize_t)sizeof(page) || fsync(fd)) {
		const int err = errno;

		close(fd);
		cli_die(1, "cannot write a swap header to %s: %s", ks.dev, strerror(err));
	}
	close(fd);
}

static void setup(const struct pageout_job *job, const struct pageout_config *c)
{
	/* Room for the data uncompressed, and some: zram allocates only what it stores. */
	const uint64_t disksize = (job->size + job->size / 4 + (16u << 20)) & ~(uint64_t)4095;
	char path[320], algo[32], value[32];
	struct sigaction sa;
	DIR *d;
	struct dirent *e;
	int ret;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	for (int i = 0; i < 3; i++)
		sigaction(stop_signals[i], &sa, &old_actions[i]);

	/* The mTHP sizes: the unit's to madvise, the others to never. */
	d = opendir(THP_DIR);
	while (d && (e = readdir(d))) {
		unsigned long kb;

		if (sscanf(e->d_name, "hugepages-%lukB", &kb) != 1)
			continue;
		snprintf(path, sizeof(path), THP_DIR "/%s/enabled", e->d_name);
		if (access(path, F_OK))
			continue;
		set_setting(path, (uint64_t)kb << 10 == c->unit ? "madvise" : "never");
	}
	if (d)
		closedir(d);

	zram_pick();
	kernel_algorithm(c->codec, algo, sizeof(algo));
	zram_path(path, sizeof(path), "comp_algorithm");
	set_setting(path, algo);
	zram_path(path, sizeof(path), "disksize");
	snprintf(value, sizeof(value), "%llu", (unsigned long long)disksize);
	ret = write_text(path, value);
	if (ret)
		cli_die(1, "cannot size zram%d to %s bytes: %s", ks.zram_id, value, strerror(-ret));
	zram_node();
	write_swap_header(disksize);
	if (swapon(ks.dev, SWAP_FLAG_PREFER | (32767 & SWAP_FLAG_PRIO_MASK)))
		cli_die(1, "swapon %s: %s", ks.dev, strerror(errno));
	ks.swap_on = 1;
	stop_point();
}

/* -------------------------------------------------------------------------------- */
/* The loop                                                                         */
/* -------------------------------------------------------------------------------- */

/* The per-size counters of the unit's mTHP size ("" for 4k: the kernel has none). */
struct size_stats {
	uint64_t v[8];
};
static const char *const size_stat_names[8] = {
	"anon_fault_alloc", "anon_fault_fallback",   "swpout", "swpout_fallback", "swpin",
	"swpin_fallback",   "swpin_fallback_charge", "split",
};
enum { S_FAULT_ALLOC, S_FAULT_FALLBACK, S_SWPOUT, S_SWPOUT_FB, S_SWPIN, S_SWPIN_FB };

static void read_size_stats(uint64_t unit, struct size_stats *s)
{
	char path[192];

	memset(s, 0, sizeof(*s));
	if (unit <= ZF_PAGE_SIZE)
		return;
	for (int i = 0; i < 8; i++) {
		snprintf(path, sizeof(path), THP_DIR "/hugepages-%llukB/stats/%s",
			 (unsigned long long)(unit >> 10), size_stat_names[i]);
		s->v[i] = read_u64(path);
	}
}

static uint64_t majflt(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)ru.ru_majflt;
}

/* mm_stat: orig_data_size compr_data_size mem_used_total mem_limit mem_used_max same_pages
 * pages_compacted huge_pages ... */
static void read_mm_stat(uint64_t v[8])
{
	char path[192], text[256];

	memset(v, 0, 8 * sizeof(v[0]));
	zram_path(path, sizeof(path), "mm_stat");
	if (read_text(path, text, sizeof(text)))
		return;
	sscanf(text,
	       "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
	       " %" SCNu64,
	       &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
}

void pageout_kernel(const struct pageout_job *job, struct pageout_result *res)
{
	const struct pageout_config *c = &res->cfg;
	const uint64_t units = job->size / c->unit, pages = job->size / ZF_PAGE_SIZE;
	const int large = c->unit > ZF_PAGE_SIZE;
	uint64_t mm[8], swap_min_kb = UINT64_MAX, rss_max_kb = 0, maj0 = 0, maj1, pswpout0 = 0,
			pswpin0 = 0;
	struct size_stats s0, s1, f0;
	uint8_t *base;
	char ub[16];
	static int atexit_done;

	if (!atexit_done) {
		atexit(pageout_kernel_restore);
		atexit_done = 1;
	}
	cli_format_unit(c->unit, ub, sizeof(ub));
	cli_progress("kernel %s %s: set up zram", c->codec, ub);
	setup(job, c);

	ks.map_len = job->size + c->unit;
	ks.map = mmap(NULL, ks.map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ks.map == MAP_FAILED) {
		ks.map = NULL;
		cli_die(1, "cannot map %llu MiB", (unsigned long long)(job->size >> 20));
	}
	base = (uint8_t *)(((uintptr_t)ks.map + c->unit - 1) & ~(uintptr_t)(c->unit - 1));
	if (madvise(base, job->size, large ? MADV_HUGEPAGE : MADV_NOHUGEPAGE))
		cli_die(1, "madvise(%s): %s", large ? "MADV_HUGEPAGE" : "MADV_NOHUGEPAGE",
			strerror(errno));

	cli_progress("kernel %s %s: fill", c->codec, ub);
	read_size_stats(c->unit, &f0);
	memcpy(base, job->data, job->size);
	read_size_stats(c->unit, &s0);
	if (large && s0.v[S_FAULT_ALLOC] - f0.v[S_FAULT_ALLOC] < units) {
		fprintf(stderr,
			"zfolio: note: kernel %s %s: only %llu of %llu units were given a %s folio "
			"at first touch (anon_fault_fallback %llu): the rest are smaller pages\n",
			c->codec, ub,
			(unsigned long long)(s0.v[S_FAULT_ALLOC] - f0.v[S_FAULT_ALLOC]),
			(unsigned long long)units, ub,
			(unsigned long long)(s0.v[S_FAULT_FALLBACK] - f0.v[S_FAULT_FALLBACK]));
		res->degraded = 1;
	}

	for (int k = -1; k < job->iterations; k++) {
		uint64_t t0, t1, rss_kb, swap_kb;

		cli_progress("kernel %s %s: iteration %d of %d%s", c->codec, ub, k < 0 ? 0 : k + 1,
			     job->iterations, k < 0 ? " (warm-up)" : "");
		if (k == 0) {
			read_size_stats(c->unit, &s0);
			maj0 = majflt();
			pswpout0 = vmstat("pswpout");
			pswpin0 = vmstat("pswpin");
		}
		t0 = cli_now_ns();
		if (madvise(base, job->size, MADV_PAGEOUT))
			cli_die(errno == EINVAL ? EXIT_SKIP : 1, "madvise(MADV_PAGEOUT): %s%s",
				strerror(errno),
				errno == EINVAL ? " (it needs Linux 5.4 or later)" : "");
		t1 = cli_now_ns();
		if (k >= 0)
			res->out_ms[k] = (double)(t1 - t0) / 1e6;
		smaps_of(base, &rss_kb, &swap_kb);
		if (swap_kb < swap_min_kb)
			swap_min_kb = swap_kb;
		if (rss_kb > rss_max_kb)
			rss_max_kb = rss_kb;
		read_mm_stat(mm);
		stop_point();

		pageout_swapin(job, res, base, k);
		stop_point();
	}
	read_size_stats(c->unit, &s1);
	maj1 = majflt();

	res->orig_bytes = mm[0];
	res->compr_bytes = mm[1];
	res->mem_used_bytes = mm[2];
	res->faults = (maj1 - maj0) / (uint64_t)job->iterations;
	if (swap_min_kb * 1024 < job->size) {
		fprintf(stderr,
			"zfolio: note: kernel %s %s: MADV_PAGEOUT left pages resident: %llu of "
			"%llu "
			"kB swapped out in the worst iteration\n",
			c->codec, ub, (unsigned long long)swap_min_kb,
			(unsigned long long)(job->size >> 10));
		res->degraded = 1;
	}
	if (large) {
		const uint64_t out = s1.v[S_SWPOUT] - s0.v[S_SWPOUT],
			       in = s1.v[S_SWPIN] - s0.v[S_SWPIN];

		if (in == 0) {
			fprintf(stderr,
				"zfolio: WARNING: kernel %s %s: DEGRADED. The kernel swapped %llu "
				"%s "
				"folios out but brought none back in at %s (swpin 0, "
				"swpin_fallback "
				"%llu): it swaps them in page by page, as it does until the next "
				"boot "
				"once zswap has been enabled. These kernel swap-in figures are not "
				"those of large-folio swap-in\n",
				c->codec, ub, (unsigned long long)out, ub, ub,
				(unsigned long long)(s1.v[S_SWPIN_FB] - s0.v[S_SWPIN_FB]));
			res->degraded = 1;
		} else if (out < units * (uint64_t)job->iterations ||
			   in < units * (uint64_t)job->iterations) {
			fprintf(stderr,
				"zfolio: note: kernel %s %s: %llu %s folios out and %llu in over "
				"%d "
				"iterations of %llu units: some went out or came in smaller\n",
				c->codec, ub, (unsigned long long)out, ub, (unsigned long long)in,
				job->iterations, (unsigned long long)units);
		}
	}

	/* The counters over the timed iterations, and the pool after the last swap-out. */
	pageout_counter(&res->counters, "pages", pages);
	for (int i = 0; i < 8 && large; i++) {
		char name[64];

		snprintf(name, sizeof(name), "%s_%s", size_stat_names[i], ub);
		pageout_counter(&res->counters, name, s1.v[i] - s0.v[i]);
	}
	pageout_counter(&res->counters, "pswpout", vmstat("pswpout") - pswpout0);
	pageout_counter(&res->counters, "pswpin", vmstat("pswpin") - pswpin0);
	pageout_counter(&res->counters, "majflt", maj1 - maj0);
	pageout_counter(&res->counters, "swapped_kb_min", swap_min_kb);
	pageout_counter(&res->counters, "resident_kb_after_pageout_max", rss_max_kb);
	pageout_counter(&res->counters, "zram_orig_data_size", mm[0]);
	pageout_counter(&res->counters, "zram_compr_data_size", mm[1]);
	pageout_counter(&res->counters, "zram_mem_used_total", mm[2]);
	pageout_counter(&res->counters, "zram_same_pages", mm[5]);
	pageout_counter(&res->counters, "zram_huge_pages", mm[7]);

	pageout_kernel_restore();
}
