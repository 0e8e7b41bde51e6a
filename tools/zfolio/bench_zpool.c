/*
 * bench_zpool.c - "zfolio bench zpool": what zf_pool costs in memory to hold the compressed
 * units of a memory image, beside glibc malloc and mimalloc holding the same objects.
 *
 * Each unit of the image is compressed on its own, as in bench codec: a same-filled unit
 * needs no object and is skipped, a unit that does not compress below its size becomes a
 * raw object of its full size. The objects are kept in a staging buffer (one unit-sized
 * slot per unit) and then go through three phases, each followed by zf_pool_get_stats():
 *
 *  - fill: zf_pool_alloc + zf_pool_write of every object, in address order (the order a
 *    scan of the image would store them); timed, as alloc+write pairs per second;
 *  - free: a random half of the objects is freed in random order (a seeded Fisher-Yates
 *    shuffle, so --seed repeats a run); timed;
 *  - compact: zf_pool_compact(); timed. Then every live object is read back
 *    (zf_pool_read_begin/end) and compared with its staged bytes.
 *
 * The same objects, freed in the same order, go through glibc malloc (malloc + memcpy,
 * free, then malloc_trim(0)) and mimalloc (mi_malloc + memcpy, mi_free, then
 * mi_collect(true)), each in a child forked before the pool exists, so that its heap
 * starts empty and nothing it does is left in this process; each child sends its numbers
 * back through a pipe. An allocator has no stats comparable to the pool's, so for it the
 * measure is what the process gained in resident memory since before its fill: the
 * Anonymous line of /proc/self/smaps_rollup, the resident anonymous pages of every mapping
 * (/proc/self/statm's resident - shared where the kernel has no smaps_rollup). Anonymous
 * rather than Rss, because a forked child does not inherit the page tables of file
 * mappings: the first call of malloc or memcpy in the child faults in their code and
 * would add a few hundred KiB of text to Rss. Each process calls malloc_trim(0) before
 * its baseline, so that free pages left in the inherited heap (by the image's zstd
 * decoder, say) are not given back during the phases and counted against the allocator.
 * The LazyFree line goes with it: pages given back with MADV_FREE stay resident until the
 * kernel needs them, and the reader should know when an allocator's resident bytes are
 * partly such pages. The pool's own delta is measured the same way, as a check on
 * mem_used_total + meta_bytes.
 *
 * mimalloc: Debian's libmimalloc.so exports malloc and free itself, so linking it would
 * put it under glibc malloc's name in the whole process (the glibc child included). It
 * is therefore dlopen()ed with RTLD_LOCAL in its child only, and used through mi_malloc,
 * mi_free and mi_collect. A build configured without it (ZF_HAVE_MIMALLOC unset), or a
 * library that does not load, reports mimalloc as absent.
 */
#define ZF_ADVANCED /* the pool itself */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef ZF_HAVE_MIMALLOC
#include <dlfcn.h>
#endif

#include "cli.h"

enum phase { PHASE_FILL, PHASE_FREE, PHASE_COMPACT, NR_PHASES };
static const char *const phase_names[NR_PHASES] = { "fill", "free", "compact" };

/* Memory of this process, in bytes. */
struct rss {
	int64_t rss, lazyfree;
};

/* Where struct rss comes from: changed by rss_read() where there is no smaps_rollup. */
static const char *rss_source = "smaps_rollup:Anonymous";

/* The compressed objects of one image at one unit size. */
struct staging {
	const char *image;
	uint64_t unit, n_units, same_filled_units, raw_units, data_bytes;
	uint8_t *slots; /* n_units slots of unit bytes */
	size_t slots_len;
	uint32_t *len; /* object length of each unit; 0 for a same-filled unit */
	uint32_t *objects; /* the unit of each object, in fill order */
	uint64_t n_objects;
	uint32_t *free_order; /* indexes into objects[]: the first n_free are freed, in order */
	uint64_t n_free;
};

/* One phase of the pool. */
struct zpool_phase {
	zf_pool_stats st;
	int64_t rss_delta;
	double seconds;
};

struct zpool_result {
	struct zpool_phase ph[NR_PHASES];
	size_t compact_pages; /* zf_pool_compact()'s return */
};

/* What a heap child sends back: fixed size, one write() (below PIPE_BUF). */
struct heap_result {
	int status; /* 0, or -errno: the allocator is absent (-ENOENT) or failed */
	int version; /* mimalloc's mi_version(), 0 for glibc */
	double seconds[NR_PHASES];
	struct rss delta[NR_PHASES]; /* after each phase, from before the fill */
	char msg[160]; /* why, when status < 0 */
};

enum heap_kind { HEAP_GLIBC, HEAP_MIMALLOC, NR_HEAPS };
static const char *const heap_names[NR_HEAPS] = { "glibc malloc", "mimalloc" };

static const struct cli_command bench_zpool_cmd = {
	.name = "bench zpool",
	.about = "Measures the memory zfolio's allocator for compressed objects (zf_pool) takes to hold\n"
		 "the compressed units of memory images, beside glibc malloc and mimalloc holding the\n"
		 "same objects.\n"
		 "\n"
		 "Every unit of an image is compressed on its own; same-filled units (one repeated 64-bit\n"
		 "value) need no object and are skipped, units that do not compress below their size are\n"
		 "kept raw at full size. The objects then go through three phases:\n"
		 "\n"
		 "  fill      every object is allocated and written (zf_pool_alloc + zf_pool_write), in\n"
		 "            address order\n"
		 "  free      a random half of the objects is freed, in random order (see --seed)\n"
		 "  compact   zf_pool_compact()\n"
		 "\n"
		 "and every live object is then read back and compared (a mismatch fails, naming the\n"
		 "unit). The same objects, freed in the same order, go through glibc malloc (malloc +\n"
		 "memcpy; free; compact = malloc_trim(0)) and mimalloc (mi_malloc + memcpy; mi_free;\n"
		 "compact = mi_collect(true)), each in a child process of its own, so that its heap\n"
		 "starts empty.\n"
		 "mimalloc runs with its defaults (MIMALLOC_* variables apply); a build without it, or a\n"
		 "library that does not load, shows it as absent.\n",
	.notes = "Columns (one table per image and unit, one row per phase):\n"
		 "  objects        live objects in the pool (zf_pool_stats.objects)\n"
		 "  data           the sum of their sizes (compr_data_size)\n"
		 "  zpool mem      the pages of the pool's zspages (mem_used_total)\n"
		 "  overhead       zpool mem / data: 1.00 would be no waste at all\n"
		 "  meta           the pool's bookkeeping outside its pages (meta_bytes)\n"
		 "  malloc RSS     the resident bytes the glibc malloc child gained since before its fill:\n"
		 "                 the Anonymous line of /proc/self/smaps_rollup (resident anonymous\n"
		 "                 memory, without the code pages a child faults in; statm without it)\n"
		 "  mimalloc RSS   the same for the mimalloc child\n"
		 "  zpool/malloc   (zpool mem + meta) / malloc RSS: below 1, the pool holds the same\n"
		 "                 objects in less memory than glibc malloc\n"
		 "  ops/s          fill: zpool alloc+write pairs per second; free: frees per second\n"
		 "Sizes are in KiB (K), MiB (M) or GiB (G) of 1024. --json: one object per image, unit\n"
		 "and phase.\n",
	.uses = {
		{ .opt = OPT_IMAGE, .def = "sample" },
		{ .opt = OPT_CODEC, .def = "lz4", .max_values = 1 },
		{ .opt = OPT_UNIT, .def = "4k" },
		{ .opt = OPT_SEED, .def_help = "from the clock" },
		{ .opt = OPT_JSON },
	},
};

static double safe_div(double a, double b)
{
	return b > 0 ? a / b : NAN;
}

/* -------------------------------------------------------------------------------- */
/* Resident memory                                                                  */
/* -------------------------------------------------------------------------------- */

/* The "Name:   123 kB" value of a field at the start of a line, in bytes; -1 if absent. */
static int64_t field_kb(const char *buf, const char *name)
{
	const size_t n = strlen(name);

	for (const char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (!strncmp(p, name, n))
			return strtoll(p + n, NULL, 10) * 1024;
	}
	return -1;
}

/* Reads a small /proc file into buf with read() (no stdio: no malloc in the heap children). */
static int read_proc(const char *path, char *buf, size_t cap)
{
	size_t len = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	while (len < cap - 1 && (n = read(fd, buf + len, cap - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	return len ? 0 : -EIO;
}

/*
 * This process's resident anonymous bytes, and the part of them that is lazily freed.
 * Returns 0 or -ENOENT (no /proc).
 */
static int rss_read(struct rss *r)
{
	char buf[4096] = "";
	long long size, resident, shared;

	if (read_proc("/proc/self/smaps_rollup", buf, sizeof(buf)) == 0) {
		r->rss = field_kb(buf, "Anonymous:");
		r->lazyfree = field_kb(buf, "LazyFree:");
		if (r->lazyfree < 0)
			r->lazyfree = 0;
		if (r->rss >= 0)
			return 0;
	}
	/* statm: resident - shared (file and shmem pages) is the anonymous part. */
	rss_source = "statm";
	if (read_proc("/proc/self/statm", buf, sizeof(buf)) < 0 ||
	    sscanf(buf, "%lld %lld %lld", &size, &resident, &shared) != 3)
		return -ENOENT;
	r->rss = (resident - shared) * sysconf(_SC_PAGESIZE);
	r->lazyfree = 0;
	return 0;
}

static struct rss rss_now(void)
{
	struct rss r;

	if (rss_read(&r) < 0)
		cli_die(1, "cannot read /proc/self/smaps_rollup nor /proc/self/statm");
	return r;
}

static struct rss rss_sub(struct rss a, struct rss b)
{
	return (struct rss){ a.rss - b.rss, a.lazyfree - b.lazyfree };
}

/* -------------------------------------------------------------------------------- */
/* Staging: the compressed objects and the half to free                             */
/* -------------------------------------------------------------------------------- */

/* splitmix64: small, and the same sequence on every machine. */
static uint64_t next_random(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void stage_units(const zf_image *img, zf_codec_ctx *ctx, uint64_t unit, uint64_t seed,
			struct staging *s)
{
	const uint8_t *data = zf_image_data(img);
	const uint64_t size = zf_image_size(img);
	uint64_t state = seed;

	memset(s, 0, sizeof(*s));
	s->image = zf_image_name(img);
	s->unit = unit;
	s->n_units = (size + unit - 1) / unit;
	if (s->n_units > UINT32_MAX)
		cli_die(EXIT_USAGE, "%s: too many units", s->image);
	s->slots_len = s->n_units * unit;
	s->slots = cli_map_buffer(s->slots_len);
	s->len = calloc(s->n_units, sizeof(*s->len));
	s->objects = calloc(s->n_units, sizeof(*s->objects));
	s->free_order = calloc(s->n_units, sizeof(*s->free_order));
	if (!s->len || !s->objects || !s->free_order)
		cli_die(1, "out of memory");

	for (uint64_t i = 0; i < s->n_units; i++) {
		const uint64_t len = unit < size - i * unit ? unit : size - i * unit;
		uint8_t *slot = s->slots + i * unit;
		int n;

		if (zf_same_filled(data + i * unit, len, NULL)) {
			s->same_filled_units++;
			continue;
		}
		/* Smaller than the unit, or it is kept raw. */
		n = zf_codec_compress(ctx, data + i * unit, len, slot, len - 1);
		if (n == -E2BIG) {
			memcpy(slot, data + i * unit, len);
			n = (int)len;
			s->raw_units++;
		} else if (n < 0) {
			cli_die(1, "%s: compressing unit %llu: %s",
				zf_codec_name(zf_codec_ctx_codec(ctx)), (unsigned long long)i,
				zf_strerror(n));
		}
		s->len[i] = (uint32_t)n;
		s->data_bytes += (uint64_t)n;
		s->objects[s->n_objects++] = (uint32_t)i;
	}

	/* A seeded Fisher-Yates shuffle of the objects; the first half is freed. */
	for (uint64_t k = 0; k < s->n_objects; k++)
		s->free_order[k] = (uint32_t)k;
	for (uint64_t k = s->n_objects; k > 1; k--) {
		const uint64_t j = next_random(&state) % k;
		const uint32_t t = s->free_order[k - 1];

		s->free_order[k - 1] = s->free_order[j];
		s->free_order[j] = t;
	}
	s->n_free = s->n_objects / 2;
}

static void staging_free(struct staging *s)
{
	munmap(s->slots, s->slots_len);
	free(s->len);
	free(s->objects);
	free(s->free_order);
}

/* -------------------------------------------------------------------------------- */
/* The allocators, each in a child                                                  */
/* -------------------------------------------------------------------------------- */

struct heap_ops {
	void *(*alloc)(size_t size);
	void (*release)(void *p);
	void (*collect)(bool force);
};

static void glibc_trim(bool force)
{
	(void)force;
	malloc_trim(0);
}

/* Fills *ops for kind; returns 0 or -ENOENT with the reason in r->msg. */
static int heap_ops_get(enum heap_kind kind, struct heap_ops *ops, struct heap_result *r)
{
	if (kind == HEAP_GLIBC) {
		*ops = (struct heap_ops){ malloc, free, glibc_trim };
		return 0;
	}
#ifdef ZF_HAVE_MIMALLOC
	static const char *const names[] = { ZF_MIMALLOC_PATH, "libmimalloc.so.2",
					     "libmimalloc.so" };
	void *lib = NULL;
	int (*version)(void);

	for (size_t i = 0; !lib && i < sizeof(names) / sizeof(names[0]); i++)
		lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(r->msg, sizeof(r->msg), "%s", dlerror());
		return -ENOENT;
	}
	/* POSIX makes dlsym's void * convertible to a function pointer. */
	ops->alloc = (void *(*)(size_t))dlsym(lib, "mi_malloc");
	ops->release = (void (*)(void *))dlsym(lib, "mi_free");
	ops->collect = (void (*)(bool))dlsym(lib, "mi_collect");
	version = (int (*)(void))dlsym(lib, "mi_version");
	if (!ops->alloc || !ops->release || !ops->collect) {
		snprintf(r->msg, sizeof(r->msg), "mi_malloc, mi_free or mi_collect missing");
		return -ENOENT;
	}
	r->version = version ? version() : 0;
	return 0;
#else
	(void)ops;
	snprintf(r->msg, sizeof(r->msg), "zfolio was built without mimalloc (libmimalloc-dev)");
	return -ENOENT;
#endif
}

/* The child's job: the three phases on one allocator. Never returns. */
static void heap_child(int fd, enum heap_kind kind, const struct staging *s)
{
	struct heap_result r;
	struct heap_ops ops;
	struct rss base;
	void **ptrs;
	double t0;

	memset(&r, 0, sizeof(r));
	if (heap_ops_get(kind, &ops, &r) < 0) {
		r.status = -ENOENT;
		goto out;
	}
	/* Outside both heaps, and resident before the baseline, like the pool's handles. */
	ptrs = cli_map_buffer(s->n_units * sizeof(*ptrs));
	memset(ptrs, 0, s->n_units * sizeof(*ptrs));
	malloc_trim(0);
	base = rss_now();

	t0 = cli_now();
	for (uint64_t k = 0; k < s->n_objects; k++) {
		const uint32_t u = s->objects[k];
		void *p = ops.alloc(s->len[u]);

		if (!p) {
			r.status = -ENOMEM;
			snprintf(r.msg, sizeof(r.msg), "out of memory at object %llu",
				 (unsigned long long)k);
			goto out;
		}
		memcpy(p, s->slots + (uint64_t)u * s->unit, s->len[u]);
		ptrs[u] = p;
	}
	r.seconds[PHASE_FILL] = cli_now() - t0;
	r.delta[PHASE_FILL] = rss_sub(rss_now(), base);

	t0 = cli_now();
	for (uint64_t j = 0; j < s->n_free; j++) {
		const uint32_t u = s->objects[s->free_order[j]];

		ops.release(ptrs[u]);
		ptrs[u] = NULL;
	}
	r.seconds[PHASE_FREE] = cli_now() - t0;
	r.delta[PHASE_FREE] = rss_sub(rss_now(), base);

	t0 = cli_now();
	ops.collect(true);
	r.seconds[PHASE_COMPACT] = cli_now() - t0;
	r.delta[PHASE_COMPACT] = rss_sub(rss_now(), base);
out:
	_exit(write(fd, &r, sizeof(r)) == (ssize_t)sizeof(r) ? 0 : 1);
}

/* Runs heap_child() in a child process and collects its result. */
static void run_heap(enum heap_kind kind, const struct staging *s, struct heap_result *r)
{
	int fds[2], status;
	ssize_t n;
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	if (pipe(fds) < 0)
		cli_die(1, "pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		cli_die(1, "fork: %s", strerror(errno));
	if (pid == 0) {
		close(fds[0]);
		heap_child(fds[1], kind, s);
	}
	close(fds[1]);
	do
		n = read(fds[0], r, sizeof(*r));
	while (n < 0 && errno == EINTR);
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			cli_die(1, "waitpid: %s", strerror(errno));
	}
	if (WIFSIGNALED(status))
		cli_die(1, "%s: the %s child died of signal %d", s->image, heap_names[kind],
			WTERMSIG(status));
	if (n != (ssize_t)sizeof(*r) || !WIFEXITED(status) || WEXITSTATUS(status))
		cli_die(1, "%s: the %s child failed", s->image, heap_names[kind]);
	if (r->status < 0 && r->status != -ENOENT)
		cli_die(1, "%s: %s: %s", s->image, heap_names[kind], r->msg);
}

/* -------------------------------------------------------------------------------- */
/* The pool                                                                         */
/* -------------------------------------------------------------------------------- */

/* Reads every live object back; dies naming the first unit that differs. */
static void verify_pool(zf_pool *pool, const struct staging *s, const uint64_t *handles)
{
	uint64_t live = 0;

	for (uint64_t u = 0; u < s->n_units; u++) {
		const uint8_t *want = s->slots + u * s->unit;
		const void *got;
		size_t size;
		int same;

		if (!handles[u])
			continue;
		got = zf_pool_read_begin(pool, handles[u], &size);
		if (!got)
			cli_die(1, "%s: unit %llu: handle %#llx is not allocated", s->image,
				(unsigned long long)u, (unsigned long long)handles[u]);
		same = size == s->len[u] && !memcmp(got, want, size);
		zf_pool_read_end(pool, handles[u]);
		if (!same) {
			const uint64_t offset = u * s->unit;

			cli_die(1, "%s: unit %llu (image offset %llu): the pool gives back %s",
				s->image, (unsigned long long)u, (unsigned long long)offset,
				size == s->len[u] ? "other bytes" : "another size");
		}
		live++;
	}
	if (live != s->n_objects - s->n_free)
		cli_die(1, "%s: %llu live objects, expected %llu", s->image,
			(unsigned long long)live, (unsigned long long)(s->n_objects - s->n_free));
}

/* The pool's stats are exact: a count that disagrees with the staging is an error. */
static void check_stats(const struct staging *s, const zf_pool_stats *st, uint64_t objects,
			uint64_t bytes, const char *phase)
{
	if (st->objects != objects || st->compr_data_size != bytes)
		cli_die(1,
			"%s: after %s, the pool counts %llu objects of %llu bytes, not %llu of "
			"%llu",
			s->image, phase, (unsigned long long)st->objects,
			(unsigned long long)st->compr_data_size, (unsigned long long)objects,
			(unsigned long long)bytes);
}

static void run_zpool(const struct staging *s, struct zpool_result *r)
{
	uint64_t *handles = cli_map_buffer(s->n_units * sizeof(*handles));
	uint64_t live_bytes = s->data_bytes;
	struct rss base;
	zf_pool *pool;
	double t0;
	int ret;

	memset(r, 0, sizeof(*r));
	memset(handles, 0, s->n_units * sizeof(*handles));
	malloc_trim(0);
	base = rss_now();
	ret = zf_pool_create(NULL, &pool);
	if (ret < 0)
		cli_die(1, "zf_pool_create: %s", zf_strerror(ret));

	t0 = cli_now();
	for (uint64_t k = 0; k < s->n_objects; k++) {
		const uint32_t u = s->objects[k];

		ret = zf_pool_alloc(pool, s->len[u], &handles[u]);
		if (ret == 0)
			ret = zf_pool_write(pool, handles[u], s->slots + (uint64_t)u * s->unit,
					    s->len[u]);
		if (ret < 0)
			cli_die(1, "%s: unit %u: zf_pool_alloc/write of %u bytes: %s", s->image, u,
				s->len[u], zf_strerror(ret));
	}
	r->ph[PHASE_FILL].seconds = cli_now() - t0;
	zf_pool_get_stats(pool, &r->ph[PHASE_FILL].st, sizeof(r->ph[PHASE_FILL].st));
	check_stats(s, &r->ph[PHASE_FILL].st, s->n_objects, s->data_bytes, "fill");
	r->ph[PHASE_FILL].rss_delta = rss_sub(rss_now(), base).rss;

	for (uint64_t j = 0; j < s->n_free; j++)
		live_bytes -= s->len[s->objects[s->free_order[j]]];
	t0 = cli_now();
	for (uint64_t j = 0; j < s->n_free; j++) {
		const uint32_t u = s->objects[s->free_order[j]];

		zf_pool_free(pool, handles[u]);
		handles[u] = 0;
	}
	r->ph[PHASE_FREE].seconds = cli_now() - t0;
	zf_pool_get_stats(pool, &r->ph[PHASE_FREE].st, sizeof(r->ph[PHASE_FREE].st));
	check_stats(s, &r->ph[PHASE_FREE].st, s->n_objects - s->n_free, live_bytes, "free");
	r->ph[PHASE_FREE].rss_delta = rss_sub(rss_now(), base).rss;

	t0 = cli_now();
	r->compact_pages = zf_pool_compact(pool);
	r->ph[PHASE_COMPACT].seconds = cli_now() - t0;
	zf_pool_get_stats(pool, &r->ph[PHASE_COMPACT].st, sizeof(r->ph[PHASE_COMPACT].st));
	r->ph[PHASE_COMPACT].rss_delta = rss_sub(rss_now(), base).rss;

	verify_pool(pool, s, handles);
	zf_pool_destroy(pool);
	munmap(handles, s->n_units * sizeof(*handles));
}

/* -------------------------------------------------------------------------------- */
/* Output                                                                           */
/* -------------------------------------------------------------------------------- */

struct bench_case {
	const struct staging *s;
	const char *codec;
	uint64_t seed;
	struct zpool_result z;
	struct heap_result heap[NR_HEAPS];
};

/* Operations per second of a phase: alloc+write pairs for fill, frees for free. */
static double ops_per_s(const struct staging *s, enum phase p, double seconds)
{
	if (p == PHASE_FILL)
		return safe_div((double)s->n_objects, seconds);
	if (p == PHASE_FREE)
		return safe_div((double)s->n_free, seconds);
	return NAN;
}

/* The pool's footprint over the allocator's resident bytes. */
static double zpool_over(const struct bench_case *c, enum phase p, enum heap_kind k)
{
	const zf_pool_stats *st = &c->z.ph[p].st;

	if (c->heap[k].status < 0)
		return NAN;
	return safe_div((double)(st->mem_used_total + st->meta_bytes),
			(double)c->heap[k].delta[p].rss);
}

static void json_heap(const struct bench_case *c, enum heap_kind k, const char *prefix,
		      enum phase p)
{
	const struct heap_result *h = &c->heap[k];
	char name[32];

	if (h->status < 0) {
		printf(",\"%s_resident_bytes\":null,\"%s_lazyfree_bytes\":null,"
		       "\"%s_ops_per_s\":null",
		       prefix, prefix, prefix);
		return;
	}
	printf(",\"%s_resident_bytes\":%lld,\"%s_lazyfree_bytes\":%lld", prefix,
	       (long long)h->delta[p].rss, prefix, (long long)h->delta[p].lazyfree);
	snprintf(name, sizeof(name), "%s_ops_per_s", prefix);
	cli_json_num(name, ops_per_s(c->s, p, h->seconds[p]), 0);
}

static void print_json(const struct bench_case *c)
{
	const struct staging *s = c->s;
	char unit_name[16];

	for (int p = 0; p < NR_PHASES; p++) {
		const struct zpool_phase *z = &c->z.ph[p];

		printf("{\"bench\":\"zpool\",\"image\":");
		cli_json_string(stdout, s->image);
		printf(",\"codec\":");
		cli_json_string(stdout, c->codec);
		printf(",\"unit\":%llu,\"unit_name\":\"%s\",\"seed\":%llu,\"phase\":\"%s\","
		       "\"objects\":%llu,\"compr_data_size\":%llu,\"mem_used_total\":%llu",
		       (unsigned long long)s->unit,
		       cli_format_unit(s->unit, unit_name, sizeof(unit_name)),
		       (unsigned long long)c->seed, phase_names[p],
		       (unsigned long long)z->st.objects, (unsigned long long)z->st.compr_data_size,
		       (unsigned long long)z->st.mem_used_total);
		cli_json_num("overhead",
			     safe_div((double)z->st.mem_used_total, (double)z->st.compr_data_size),
			     4);
		printf(",\"pages_used\":%llu,\"pages_compacted\":%llu,\"compactions\":%llu,"
		       "\"meta_bytes\":%llu,\"mem_used_max\":%llu,\"zpool_rss_delta\":%lld",
		       (unsigned long long)z->st.pages_used,
		       (unsigned long long)z->st.pages_compacted,
		       (unsigned long long)z->st.compactions, (unsigned long long)z->st.meta_bytes,
		       (unsigned long long)z->st.mem_used_max, (long long)z->rss_delta);
		cli_json_num("alloc_ops_per_s", p == PHASE_FILL ? ops_per_s(s, p, z->seconds) : NAN,
			     0);
		cli_json_num("free_ops_per_s", p == PHASE_FREE ? ops_per_s(s, p, z->seconds) : NAN,
			     0);
		cli_json_num("compact_s", p == PHASE_COMPACT ? z->seconds : NAN, 6);
		if (p == PHASE_COMPACT)
			printf(",\"compact_pages\":%zu", c->z.compact_pages);
		else
			printf(",\"compact_pages\":null");
		json_heap(c, HEAP_GLIBC, "malloc", (enum phase)p);
		json_heap(c, HEAP_MIMALLOC, "mimalloc", (enum phase)p);
		cli_json_num("zpool_over_malloc", zpool_over(c, (enum phase)p, HEAP_GLIBC), 4);
		cli_json_num("zpool_over_mimalloc", zpool_over(c, (enum phase)p, HEAP_MIMALLOC), 4);
		if (c->heap[HEAP_MIMALLOC].status == 0)
			printf(",\"mimalloc_version\":%d", c->heap[HEAP_MIMALLOC].version);
		else
			printf(",\"mimalloc_version\":null");
		printf(",\"units\":%llu,\"same_filled_units\":%llu,\"raw_units\":%llu,"
		       "\"freed_objects\":%llu,\"rss_source\":\"%s\"}\n",
		       (unsigned long long)s->n_units, (unsigned long long)s->same_filled_units,
		       (unsigned long long)s->raw_units, (unsigned long long)s->n_free, rss_source);
	}
}

/* Bytes as "12.3K", "205.0M", "1.50G" (1024-based), or "-" for none. */
static const char *fmt_bytes(double v, char *buf, size_t len)
{
	const double a = fabs(v);

	if (!isfinite(v))
		snprintf(buf, len, "-");
	else if (a >= 1024.0 * 1024 * 1024)
		snprintf(buf, len, "%.2fG", v / (1024.0 * 1024 * 1024));
	else if (a >= 1024.0 * 1024)
		snprintf(buf, len, "%.1fM", v / (1024.0 * 1024));
	else if (a >= 1024.0)
		snprintf(buf, len, "%.1fK", v / 1024.0);
	else
		snprintf(buf, len, "%.0f", v);
	return buf;
}

static const char *fmt_ratio(double v, char *buf, size_t len)
{
	if (isfinite(v))
		snprintf(buf, len, "%.3f", v);
	else
		snprintf(buf, len, "-");
	return buf;
}

static const char *fmt_ops(double v, char *buf, size_t len)
{
	if (!isfinite(v))
		snprintf(buf, len, "-");
	else if (v >= 1e6)
		snprintf(buf, len, "%.2fM", v / 1e6);
	else if (v >= 1e3)
		snprintf(buf, len, "%.1fk", v / 1e3);
	else
		snprintf(buf, len, "%.0f", v);
	return buf;
}

static double heap_rss(const struct bench_case *c, enum heap_kind k, enum phase p)
{
	return c->heap[k].status < 0 ? NAN : (double)c->heap[k].delta[p].rss;
}

static void print_table(const struct bench_case *c)
{
	const struct staging *s = c->s;
	const struct heap_result *mi = &c->heap[HEAP_MIMALLOC];
	char unit_name[16], b[10][24];
	int64_t lazy = 0;

	printf("image %s, codec %s, unit %s, seed %llu", s->image, c->codec,
	       cli_format_unit(s->unit, unit_name, sizeof(unit_name)), (unsigned long long)c->seed);
	if (mi->status == 0)
		printf(", mimalloc %d.%d.%d", mi->version / 100, mi->version / 10 % 10,
		       mi->version % 10);
	printf("\n");
	printf("%llu units: %llu objects (%llu kept raw), %llu same-filled; %llu freed\n",
	       (unsigned long long)s->n_units, (unsigned long long)s->n_objects,
	       (unsigned long long)s->raw_units, (unsigned long long)s->same_filled_units,
	       (unsigned long long)s->n_free);
	printf("%-7s %7s %8s %9s %8s %7s %10s %12s %12s %8s\n", "phase", "objects", "data",
	       "zpool mem", "overhead", "meta", "malloc RSS", "mimalloc RSS", "zpool/malloc",
	       "ops/s");
	for (int p = 0; p < NR_PHASES; p++) {
		const zf_pool_stats *st = &c->z.ph[p].st;

		printf("%-7s %7llu %8s %9s %8s %7s %10s %12s %12s %8s\n", phase_names[p],
		       (unsigned long long)st->objects,
		       fmt_bytes((double)st->compr_data_size, b[0], sizeof(b[0])),
		       fmt_bytes((double)st->mem_used_total, b[1], sizeof(b[1])),
		       fmt_ratio(safe_div((double)st->mem_used_total, (double)st->compr_data_size),
				 b[2], sizeof(b[2])),
		       fmt_bytes((double)st->meta_bytes, b[3], sizeof(b[3])),
		       fmt_bytes(heap_rss(c, HEAP_GLIBC, (enum phase)p), b[4], sizeof(b[4])),
		       fmt_bytes(heap_rss(c, HEAP_MIMALLOC, (enum phase)p), b[5], sizeof(b[5])),
		       fmt_ratio(zpool_over(c, (enum phase)p, HEAP_GLIBC), b[6], sizeof(b[6])),
		       fmt_ops(ops_per_s(s, (enum phase)p, c->z.ph[p].seconds), b[7],
			       sizeof(b[7])));
		for (int k = 0; k < NR_HEAPS; k++) {
			if (c->heap[k].status == 0 && c->heap[k].delta[p].lazyfree > lazy)
				lazy = c->heap[k].delta[p].lazyfree;
		}
	}
	printf("compact gave back %zu pages in %.1f ms; pool RSS delta after compact %s;"
	       " %llu objects read back OK\n",
	       c->z.compact_pages, c->z.ph[PHASE_COMPACT].seconds * 1e3,
	       fmt_bytes((double)c->z.ph[PHASE_COMPACT].rss_delta, b[8], sizeof(b[8])),
	       (unsigned long long)(s->n_objects - s->n_free));
	if (mi->status < 0)
		printf("mimalloc: absent (%s)\n", mi->msg);
	if (lazy > 0)
		printf("note: up to %s of an allocator's RSS was lazily freed (MADV_FREE)\n",
		       fmt_bytes((double)lazy, b[9], sizeof(b[9])));
	printf("\n");
}

/* -------------------------------------------------------------------------------- */
/* The command                                                                      */
/* -------------------------------------------------------------------------------- */

int bench_zpool(int argc, char **argv)
{
	const struct cli_args *a = cli_parse(&bench_zpool_cmd, argc, argv);
	const struct cli_value *images = &a->v[OPT_IMAGE], *units = &a->v[OPT_UNIT];
	const zf_codec *codec = cli_find_codec(a->v[OPT_CODEC].str[0]);
	const int json = a->v[OPT_JSON].n;
	uint64_t seed = a->v[OPT_SEED].num[0];
	zf_codec_ctx *ctx;
	int ret;

	if (!a->v[OPT_SEED].n) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		seed = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		seed ^= (uint64_t)getpid() << 32;
	}
	ret = zf_codec_ctx_create(codec, &ctx);
	if (ret < 0)
		cli_die(1, "%s: %s", zf_codec_name(codec), zf_strerror(ret));

	for (int ii = 0; ii < images->n; ii++) {
		zf_image *img = cli_open_image(images->str[ii]);

		for (int ui = 0; ui < units->n; ui++) {
			struct bench_case c;
			struct staging s;
			char unit_name[16];

			memset(&c, 0, sizeof(c));
			c.s = &s;
			c.codec = zf_codec_name(codec);
			c.seed = seed;
			cli_format_unit(units->num[ui], unit_name, sizeof(unit_name));
			cli_progress("%s %s %s: compressing", zf_image_name(img), c.codec,
				     unit_name);
			stage_units(img, ctx, units->num[ui], seed, &s);
			/* The children first: the pool must not leave freed chunks in the heap. */
			for (int k = 0; k < NR_HEAPS; k++) {
				cli_progress("%s %s %s: %s", s.image, c.codec, unit_name,
					     heap_names[k]);
				run_heap((enum heap_kind)k, &s, &c.heap[k]);
			}
			cli_progress("%s %s %s: zpool fill, free, compact, verify", s.image,
				     c.codec, unit_name);
			run_zpool(&s, &c.z);
			cli_progress_done();
			if (json)
				print_json(&c);
			else
				print_table(&c);
			fflush(stdout);
			staging_free(&s);
		}
		zf_image_close(img);
	}
	zf_codec_ctx_destroy(ctx);
	return 0;
}
