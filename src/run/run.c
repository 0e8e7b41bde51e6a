/*
 * run.c - the preload runtime's life: its settings from the environment, the region made
 * at the first mapping it takes, and its counters written out at exit.
 *
 * The region is made lazily, in the first mmap() that is the arena's, because most of a
 * program's start (the loader, the C library) maps nothing large, and because a region
 * costs threads: a program that never maps anything large never has one. It is never
 * destroyed: the program's exit handlers may still read their heap, and the process's
 * exit takes the memory and the threads with it.
 *
 * docs/run.md has the environment variables and the design.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run_internal.h"

#define RUN_ARENA_DEFAULT ((size_t)16 << 30)
/*
 * Where the arena goes: below 20 TiB, the most mimalloc's segment map covers
 * (mi_is_in_heap_region(), which free() asks: run_heap.c), and above the 2-6 TiB where
 * mimalloc places its own segments when it maps them itself.
 */
#define RUN_ARENA_AT ((uintptr_t)8 << 40)

static struct run rt;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static atomic_int state; /* 0: not made yet, 1: on, -1: off */

/* "123", "64k", "2m", "1g" (powers of 1024) into *out: 0, or -1. */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10;
		end++;
		break;
	case 'm':
	case 'M':
		v <<= 20;
		end++;
		break;
	case 'g':
	case 'G':
		v <<= 30;
		end++;
		break;
	default:
		break;
	}
	if (*end)
		return -1;
	*out = v;
	return 0;
}

/* One setting: its value parsed, or a warning and the default kept. */
static void size_setting(const char *name, uint64_t *out)
{
	const char *s = getenv(name);

	if (s && parse_size(s, out))
		fprintf(stderr, "zfolio: %s=%s is not a size (bytes, or with k, m, g): ignored\n",
			name, s);
}

static void run_config_load(struct run_config *c)
{
	uint64_t v;
	const char *s;

	*c = (struct run_config){ .unit = 64 << 10,
				  .frame = ZF_FRAME_2M,
				  .engines = 2,
				  .mode = ZF_FAULT_THREAD,
				  .min_size = 256 << 10,
				  .arena = RUN_ARENA_DEFAULT };
	strcpy(c->codec, "lz4");
	size_setting("ZFOLIO_LIMIT", &c->limit);
	v = c->unit;
	size_setting("ZFOLIO_UNIT", &v);
	c->unit = (uint32_t)v;
	v = c->min_size;
	size_setting("ZFOLIO_MIN_SIZE", &v);
	c->min_size = v;
	v = c->arena;
	size_setting("ZFOLIO_ARENA", &v);
	c->arena = v;
	if ((s = getenv("ZFOLIO_ENGINES")))
		c->engines = (unsigned)strtoul(s, NULL, 10);
	if ((s = getenv("ZFOLIO_CODEC")) && strlen(s) < sizeof(c->codec))
		strcpy(c->codec, s);
	if ((s = getenv("ZFOLIO_MODE")) && strcmp(s, "thread") && strcmp(s, "sigbus"))
		fprintf(stderr, "zfolio: ZFOLIO_MODE=%s is not thread or sigbus: ignored\n", s);
	else if (s)
		c->mode = !strcmp(s, "sigbus") ? ZF_FAULT_SIGBUS : ZF_FAULT_THREAD;
	if ((s = getenv("ZFOLIO_FRAME")) && strcmp(s, "2m") && strcmp(s, "none"))
		fprintf(stderr, "zfolio: ZFOLIO_FRAME=%s is not 2m or none: ignored\n", s);
	else if (s)
		c->frame = !strcmp(s, "none") ? 0 : ZF_FRAME_2M;
	if ((s = getenv("ZFOLIO_STATS")) && strlen(s) < sizeof(c->stats))
		strcpy(c->stats, s);
	if ((s = getenv("ZFOLIO_GROUP")) && strlen(s) < sizeof(c->group))
		strcpy(c->group, s);
	c->quiet = (s = getenv("ZFOLIO_QUIET")) && !strcmp(s, "1");
}

static void run_init(void)
{
	zf_region_options o;
	int ret;

	common_internal++;
	run_config_load(&rt.cfg);
	zf_region_options_init(&o);
	o.unit = rt.cfg.unit;
	o.frame = rt.cfg.frame;
	o.limit = rt.cfg.limit;
	o.codec = rt.cfg.codec;
	o.engines = rt.cfg.engines;
	o.fault_mode = rt.cfg.mode;
	o.address = (void *)RUN_ARENA_AT;
	o.fork = ZF_FORK_COPY; /* a child of fork() sees the heap it was forked with */
	if (rt.cfg.group[0]) {
		/* The run's limit, shared with every process of the run. */
		ret = zf_group_open(rt.cfg.group, &rt.group);
		if (ret && !rt.cfg.quiet)
			fprintf(stderr,
				"zfolio: cannot join the run's group %s (%s): this process has "
				"a limit of its own\n",
				rt.cfg.group, zf_strerror(ret));
		if (!ret) {
			o.group = rt.group;
			o.limit = 0;
		}
	}
	ret = zf_region_create(NULL, rt.cfg.arena, &o, &rt.region);
	if (!ret)
		ret = run_arena_init(&rt.arena, zf_region_base(rt.region),
				     zf_region_size(rt.region), ZF_MAX(rt.cfg.unit, 64u << 10));
	if (ret)
		run_heap_stop();
	if (ret && !rt.cfg.quiet)
		fprintf(stderr,
			"zfolio: cannot start (%s): the program's memory stays with the "
			"kernel\n",
			zf_strerror(ret));
	common_internal--;
	atomic_store_explicit(&state, ret ? -1 : 1, memory_order_release);
}

struct run *run_get(void)
{
	if (atomic_load_explicit(&state, memory_order_acquire) == 0)
		pthread_once(&once, run_init);
	return atomic_load_explicit(&state, memory_order_acquire) > 0 ? &rt : NULL;
}

struct run *run_peek(void)
{
	return atomic_load_explicit(&state, memory_order_acquire) > 0 ? &rt : NULL;
}

/* The counters, as one JSON object, to cfg.stats (for zfolio run's summary). */
static void write_stats(void)
{
	zf_region_stats rs;
	zf_store_stats ss;
	char path[300], line[1024];
	int fd, n;

	if (!run_peek() || !rt.cfg.stats[0])
		return;
	if (zf_region_get_stats(rt.region, &rs, sizeof(rs)) ||
	    zf_store_get_stats(zf_region_store(rt.region), &ss, sizeof(ss)))
		return;
	n = snprintf(line, sizeof(line),
		     "{\"pid\":%d,\"resident_bytes\":%llu,\"resident_max\":%llu,"
		     "\"stored_bytes\":%llu,\"compressed_bytes\":%llu,\"pool_bytes\":%llu,"
		     "\"pool_max\":%llu,"
		     "\"meta_bytes\":%llu,\"swpout\":%llu,\"swpin\":%llu,\"pgmajfault\":%llu,"
		     "\"fault_ns\":%llu,\"arena_bytes\":%zu,\"maps\":%llu,\"unmaps\":%llu,"
		     "\"remaps\":%llu,\"remap_copies\":%llu}\n",
		     (int)getpid(), (unsigned long long)rs.resident_bytes,
		     (unsigned long long)rs.resident_max, (unsigned long long)ss.orig_data_size,
		     (unsigned long long)ss.compr_data_size, (unsigned long long)ss.pool_total_size,
		     (unsigned long long)ss.mem_used_max,
		     (unsigned long long)(rs.meta_bytes + ss.meta_bytes),
		     (unsigned long long)rs.swpout, (unsigned long long)rs.swpin,
		     (unsigned long long)rs.pgmajfault, (unsigned long long)rs.fault_ns,
		     rt.arena.mapped, (unsigned long long)rt.maps, (unsigned long long)rt.unmaps,
		     (unsigned long long)rt.remaps, (unsigned long long)rt.copies);
	/* One file per process: STATS.PID, renamed into place whole. */
	snprintf(path, sizeof(path), "%s.%d.tmp", rt.cfg.stats, (int)getpid());
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (n > 0 && write(fd, line, (size_t)n) == n) {
		char final[300];

		snprintf(final, sizeof(final), "%s.%d", rt.cfg.stats, (int)getpid());
		close(fd);
		rename(path, final);
		return;
	}
	close(fd);
	unlink(path);
}

/*
 * fork(): the arena's lock is free in the child (a thread of the parent's may hold it at
 * the fork), and the region's copy is the child's (region_fork.c).
 */
static int fork_locked; /* run_prepare() took the arena's lock (the forking thread's) */

static void run_prepare(void)
{
	fork_locked = run_peek() != NULL;
	if (fork_locked)
		pthread_mutex_lock(&rt.arena.lock);
}

static void run_parent(void)
{
	if (fork_locked)
		pthread_mutex_unlock(&rt.arena.lock);
}

static void run_child(void)
{
	if (fork_locked)
		pthread_mutex_init(&rt.arena.lock, NULL);
}

__attribute__((constructor)) static void run_load(void)
{
	/*
	 * zfolio's fork handlers before the program's, so that those may touch the heap
	 * (zf_region_atfork()); the runtime's after them, so that its prepare runs first and
	 * its child handler last. The region itself comes later, at the first mapping.
	 */
	common_internal++;
	zf_region_atfork();
	pthread_atfork(run_prepare, run_parent, run_child);
	common_internal--;
	run_heap_start();
}

/* ZFOLIO_DEBUG=1: the region's and the store's counters on stderr at exit. */
static void debug_stats(void)
{
	static char buf[16384];
	const char *s = getenv("ZFOLIO_DEBUG");
	size_t n;

	if (!run_peek() || !s || strcmp(s, "1"))
		return;
	n = zf_region_stats_text(rt.region, buf, sizeof(buf));
	fprintf(stderr, "zfolio[%d] region:\n%.*s", (int)getpid(), (int)n, buf);
	n = zf_store_stats_text(zf_region_store(rt.region), buf, sizeof(buf));
	fprintf(stderr, "zfolio[%d] store:\n%.*s", (int)getpid(), (int)n, buf);
}

__attribute__((destructor)) static void run_unload(void)
{
	common_internal++;
	write_stats();
	debug_stats();
	common_internal--;
}
