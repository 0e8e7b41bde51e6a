/*
 * region.c - transparent compressed swap of a program's memory through userfaultfd: the
 * life cycle of a region (create, destroy), advice and statistics.
 *
 * A region is an anonymous mapping registered with a userfaultfd in MISSING and WP modes.
 * Its units (4 KiB..2 MiB) have one state word each; a unit is evicted into a zf_store
 * and its pages dropped, and a fault on it brings it back. docs/region.md describes the
 * whole; each file says what it does and how, next to the code:
 *
 *   region_internal.h  the unit state word and who owns a unit, struct zf_region and its
 *                      lock order, the fault path's inline helpers
 *   region_uffd.c      the userfaultfd: open, feature probe, registration, placing pages
 *   region_evict.c     eviction: claim, write-protect, store, drop (zf_region_pageout())
 *   region_reclaim.c   the residency limit, the clock, readahead (the background threads)
 *   region_fault.c     swap-in, serving a fault, the fault-service threads
 *   region_events.c    the program's madvise, munmap and mremap (UFFD events)
 *   region_sigbus.c    SIGBUS mode: faults served in the faulting thread
 *
 * Fault service modes (see the header and ../../bench/results/region.md for figures):
 * service threads reading the descriptor (transparent; one wakeup per fault), or
 * UFFD_FEATURE_SIGBUS, where the faulting thread serves itself in a SIGBUS handler (no
 * wakeup).
 *
 * fork(): the region is MADV_DONTFORK; a child does not have it (userfaultfd
 * registrations are not inherited either without UFFD_FEATURE_EVENT_FORK, and evicted
 * pages would read as zeros in the child: silent corruption; not having it is loud).
 *
 * A fault that cannot be served (checksum mismatch, backing read error) fails closed:
 * UFFDIO_POISON on the page in thread mode (the thread gets SIGBUS), the program's or
 * the default SIGBUS disposition in SIGBUS mode; never a page of zeros.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>

#include "../common/options.h"
#include "region_internal.h"

/* The upper bound of bucket i, in ns. */
static uint64_t lat_upper(unsigned i)
{
	const unsigned b = i / 2;

	if (b == 0)
		return 2;
	return ((uint64_t)1 << b) + ((uint64_t)(i % 2 + 1) << (b - 1));
}

/* -------------------------------------------------------------------------------- */
/* Creation and teardown                                                            */
/* -------------------------------------------------------------------------------- */

void zf_region_options_init(zf_region_options *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->struct_size = sizeof(*o);
	o->unit = 64u << 10;
	o->codec = "lz4";
	o->fault_threads = 1;
	o->reclaim_batch = (uint64_t)2 << 20;
}

static _Atomic uint32_t next_owner = 0x52000000u;

/*
 * Anonymous memory like the region's: eviction moves pages between the region and its
 * staging areas (UFFDIO_MOVE), which the kernel allows only between mappings of the same
 * kind. The staging areas own whole page tables (aligned to 2 MiB, a multiple of it), so
 * that no move ever shares a page table with the program's own memory.
 */
static uint8_t *map_anonymous(void *hint, size_t len)
{
	void *p = mmap(hint, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Anonymous memory of len bytes at a 2 MiB boundary (ZF_UNIT_MAX), near hint if not NULL. */
static uint8_t *map_aligned_at(void *hint, size_t len)
{
	const size_t align = ZF_UNIT_MAX;
	uint8_t *p = map_anonymous(hint, len + align), *q;

	if (!p)
		return NULL;
	q = (uint8_t *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
	if (q > p)
		munmap(p, (size_t)(q - p));
	munmap(q + len, (size_t)(p + align - q));
	return q;
}

uint8_t *region_map_aligned(size_t len)
{
	return map_aligned_at(NULL, len);
}

static int region_setup_store(zf_region *r, zf_store *store)
{
	zf_store_options so;

	if (store) {
		r->store = store;
	} else {
		zf_store_options_init(&so);
		so.codec = r->o.codec;
		so.unit = r->o.unit > RG_PAGE ? r->o.unit : 0;
		so.engines = r->o.engines;
		/*
		 * A region empties and refills its pool all the time (units out, units in):
		 * emptied pool pages stay for reuse, up to the region's size (the most its
		 * compressed units can take, bar fragmentation), as a page fault costs more
		 * than compressing the page. On the 2-vCPU VM of bench/results/pageout.md a
		 * quarter of the size made a 100 MiB swap-out of redis at 64k units take
		 * 189 ms, the whole size 137 ms. The price: after a swap-in the pool keeps
		 * its pages (zf_store_options.pool_warm_bytes, with a store of one's own).
		 */
		so.pool_warm_bytes = ZF_MAX((uint64_t)r->size, (uint64_t)ZF_UNIT_MAX);
		TRY(zf_store_create(&so, &r->store));
		r->own_store = 1;
	}
	return 0;
}

static int start_thread(pthread_t *t, void *(*fn)(void *), void *arg)
{
	int ret = internal_thread_create(t, fn, arg);

	return ret ? -ret : 0;
}

/*
 * The eventfds that stop the service threads and, in SIGBUS mode, ask the service thread
 * to log a failure (the handler cannot: region_sigbus.c). 0 or -errno.
 */
int region_open_eventfds(zf_region *r)
{
	r->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->stop_fd < 0)
		return -errno;
	if (r->o.fault_mode == ZF_FAULT_SIGBUS) {
		r->log_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (r->log_fd < 0)
			return -errno;
	}
	return 0;
}

/*
 * The region's threads: its service threads (one in SIGBUS mode, for the events), the
 * reclaim thread under a limit, the readahead thread; their contexts are made. At
 * creation, and in a child after fork() (region_fork.c).
 */
int region_start_threads(zf_region *r)
{
	const unsigned n = r->o.fault_mode == ZF_FAULT_SIGBUS ? 1 : r->o.fault_threads;

	for (unsigned i = 0; i < n; i++) {
		struct service_arg *a = malloc(sizeof(*a));

		if (!a)
			return -ENOMEM;
		*a = (struct service_arg){ r, &r->thread_ctx[i] };
		if (start_thread(&r->threads[r->nthreads], region_service_main, a)) {
			free(a);
			return -ENOMEM;
		}
		r->nthreads++;
	}
	/* A group's member answers requests for its counters from it, also without a limit. */
	if (r->limit_units || r->group) {
		TRY(start_thread(&r->reclaimer, region_reclaim_main, r));
		r->have_reclaimer = 1;
	}
	if (r->want_reader || r->want_filler) {
		TRY(start_thread(&r->reader, region_readahead_main, r));
		r->have_reader = 1;
	}
	return 0;
}

static int region_start(zf_region *r)
{
	const unsigned n = r->o.fault_mode == ZF_FAULT_SIGBUS ? 1 : r->o.fault_threads;

	/* Decided before any service thread reads it. */
	r->want_reader = r->o.readahead && r->o.swapin == ZF_SWAPIN_WHOLE;
	r->want_filler = r->frames;
	TRY(region_open_eventfds(r));
	r->threads = calloc(n, sizeof(*r->threads));
	r->thread_ctx = calloc(n, sizeof(*r->thread_ctx));
	if (!r->threads || !r->thread_ctx)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		r->thread_ctx[i].service = 1;
		TRY(region_fault_ctx_init(r, &r->thread_ctx[i]));
	}
	if (r->o.fault_mode == ZF_FAULT_SIGBUS) {
		for (int i = 0; i < RG_SIG_CTXS; i++) {
			TRY(region_fault_ctx_init(r, &r->sig_ctx[i]));
			r->sig_ctx[i].in_signal = 1;
		}
		atomic_store(&r->sig_free, (uint32_t)((1ull << RG_SIG_CTXS) - 1));
		TRY(region_sigbus_register(r));
	}
	if (r->want_reader)
		TRY(region_fault_ctx_init(r, &r->ra_ctx));
	return region_start_threads(r);
}

/* The region's locks, unlocked: at creation, and in a child after fork (region_fork.c). */
void region_locks_init(zf_region *r)
{
	pthread_rwlockattr_t attr;

	pthread_mutex_init(&r->evict_lock, NULL);
	pthread_rwlock_init(&r->read_lock, NULL);
	/* A fork waiting for the faults in flight goes before new ones. */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&r->fork_lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	pthread_mutex_init(&r->bg_lock, NULL);
	pthread_mutex_init(&r->advise_lock, NULL);
	pthread_cond_init(&r->bg_cond, NULL);
}

static int options_check(const zf_region_options *o, size_t size)
{
	RETURN_IF(o->unit < RG_PAGE || o->unit > ZF_UNIT_MAX || (o->unit & (o->unit - 1)), -EINVAL);
	RETURN_IF(!size || size > ((size_t)1 << 46), -EINVAL);
	RETURN_IF(o->fault_mode != ZF_FAULT_THREAD && o->fault_mode != ZF_FAULT_SIGBUS, -EINVAL);
	RETURN_IF(o->swapin != ZF_SWAPIN_WHOLE && o->swapin != ZF_SWAPIN_PER_PAGE, -EINVAL);
	RETURN_IF(o->fault_mode == ZF_FAULT_THREAD && (!o->fault_threads || o->fault_threads > 64),
		  -EINVAL);
	RETURN_IF(o->swapin == ZF_SWAPIN_PER_PAGE && o->keep_clean, -EINVAL);
	/*
	 * Frames: 2 MiB or none. A frame is placed by moving a huge page in, which can be
	 * neither write-protected on the way (clean copies) nor cut to one page (per page).
	 */
	RETURN_IF(o->frame && o->frame != ZF_FRAME_2M, -EINVAL);
	RETURN_IF(o->frame && (o->keep_clean || o->swapin == ZF_SWAPIN_PER_PAGE), -EINVAL);
	RETURN_IF(o->fork != ZF_FORK_NONE && o->fork != ZF_FORK_COPY, -EINVAL);
	RETURN_IF(o->group && o->limit, -EINVAL);
	return 0;
}

int zf_region_create(zf_store *store, size_t size, const zf_region_options *options,
		     zf_region **out)
{
	zf_region_options o;
	zf_region *r;
	int ret;

	RETURN_IF(!out, -EINVAL);
	*out = NULL;
	zf_region_options_init(&o);
	TRY(OPTIONS_LOAD(&o, options));
	options = &o;
	TRY(options_check(options, size));
	r = calloc(1, sizeof(*r));
	RETURN_IF(!r, -ENOMEM);
	r->o = *options;
	r->uffd = r->stop_fd = r->log_fd = r->pagemap_fd = -1;
	r->slot = r->group_slot = -1;
	r->frames = options->frame != 0;
	r->unit = r->frames ? options->frame : options->unit;
	r->unit_pages = r->unit / RG_PAGE;
	r->order = (uint32_t)__builtin_ctz(r->unit_pages);
	r->nunits = (size + r->unit - 1) / r->unit;
	r->size = r->nunits * r->unit;
	r->owner = options->owner ? options->owner : atomic_fetch_add(&next_owner, 1);
	r->group = options->group;
	if (r->group || options->limit) {
		const uint64_t limit = r->group ? group_limit(r->group) : options->limit;
		const uint64_t batch = r->group ? group_batch(r->group) : options->reclaim_batch;

		r->limit_units = limit ? ZF_MAX(limit / r->unit, 2) : 0;
		r->batch_units = ZF_MAX(batch / r->unit, 1);
		r->batch_units = ZF_MIN(r->batch_units, ZF_MAX(r->limit_units / 2, 1));
	}
	region_locks_init(r);
	r->state = calloc(r->nunits, sizeof(*r->state));
	r->base = r->frames || options->address ? map_aligned_at(options->address, r->size)
						: map_anonymous(NULL, r->size);
	r->evict_stage = region_map_aligned(RG_CHUNK);
	r->probe = region_map_aligned(ZF_UNIT_MAX);
	ret = !r->base || !r->evict_stage || !r->probe || !r->state ? -ENOMEM : 0;
	if (!ret && r->group) {
		r->group_slot = group_join(r->group);
		ret = ZF_MIN(r->group_slot, 0);
	}
	if (!ret)
		ret = region_order_init(r);
	if (!ret)
		ret = region_setup_store(r, store);
	/* A store with a backing file cannot be copied into a child (store_fork_ok()). */
	if (!ret && r->o.fork == ZF_FORK_COPY && !store_fork_ok(r->store))
		ret = -ENOTSUP;
	if (!ret)
		ret = region_uffd_register(r);
	if (!ret) {
		/* Without it all works, but units a REMOVE left (F_DOUBT) are never evicted. */
		r->pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
		ret = region_frame_setup(r);
	}
	if (!ret)
		ret = region_start(r);
	if (ret)
		goto fail;
	/* The fork handlers: also for regions a child does not get (region_sigbus.c). */
	zf_region_atfork();
	if (r->o.fork == ZF_FORK_COPY)
		region_fork_add(r);
	*out = r;
	return 0;
fail:
	zf_region_destroy(r);
	return ret;
}

/*
 * Calls fn on each run of units that are still the region's (not GONE): the program may
 * have unmapped some and mapped its own memory there, which we must leave alone. (The
 * still-mapped part of a partly unmapped unit is left mapped: we cannot tell it apart.)
 */
void region_live_runs(zf_region *r, void (*fn)(zf_region *r, uint8_t *addr, size_t len, int arg),
		      int arg)
{
	for (uint64_t u = 0; u < r->nunits;) {
		uint64_t v = u;

		while (v < r->nunits && (atomic_load(&r->state[v]) & ST_MASK) != ST_GONE)
			v++;
		if (v > u)
			fn(r, unit_addr(r, u), (v - u) * r->unit, arg);
		u = v + 1;
	}
}

static void unregister_run(zf_region *r, uint8_t *addr, size_t len, int arg)
{
	struct uffdio_range rg = { .start = (uintptr_t)addr, .len = len };

	(void)arg;
	(void)uffd_range(r, UFFDIO_UNREGISTER, &rg);
}

void region_unmap_run(zf_region *r, uint8_t *addr, size_t len, int arg)
{
	(void)r;
	(void)arg;
	munmap(addr, len);
}

static void stop_background(zf_region *r)
{
	pthread_mutex_lock(&r->bg_lock);
	r->bg_stop = 1;
	atomic_store(&r->bg_stopping, 1);
	pthread_cond_broadcast(&r->bg_cond);
	pthread_mutex_unlock(&r->bg_lock);
	if (r->group)
		group_kick(r->group); /* a member's reclaim thread waits on the group */
	if (r->have_reclaimer)
		pthread_join(r->reclaimer, NULL);
	if (r->have_reader)
		pthread_join(r->reader, NULL);
}

void zf_region_destroy(zf_region *r)
{
	if (!r)
		return;
	/* Out of the fork list first: waits for a fork in progress. */
	if (r->o.fork == ZF_FORK_COPY)
		region_fork_remove(r);
	stop_background(r);
	/* Let a pageout in flight finish, then no more evictions. */
	pthread_mutex_lock(&r->evict_lock);
	/* Wakes every thread waiting on the range; faults from now on are plain. */
	if (r->uffd >= 0 && r->base)
		region_live_runs(r, unregister_run, 0);
	atomic_store(&r->dying, 1); /* SIGBUS-mode faults waiting for room give up */
	pthread_mutex_unlock(&r->evict_lock);
	region_sigbus_unregister(r);
	if (r->stop_fd >= 0) {
		uint64_t one = 1;
		ssize_t ignored = write(r->stop_fd, &one, sizeof(one));

		(void)ignored;
	}
	for (unsigned i = 0; i < r->nthreads; i++)
		pthread_join(r->threads[i], NULL);
	/* Memory the program moved out still gets its data, then leaves us with the descriptor. */
	if (r->nthreads)
		region_drain_events(r, &r->thread_ctx[0]);
	if (r->uffd >= 0)
		close(r->uffd);
	region_sigbus_closed(r);
	if (r->base)
		region_live_runs(r, region_unmap_run, 0);
	if (r->stop_fd >= 0)
		close(r->stop_fd);
	if (r->log_fd >= 0)
		close(r->log_fd);
	if (r->pagemap_fd >= 0)
		close(r->pagemap_fd);
	if (r->store && r->state) {
		for (uint64_t u = 0; u < r->nunits; u++) {
			const uint32_t st = atomic_load(&r->state[u]);

			if ((st & ST_MASK) == ST_EVICTED || (st & F_CLEAN))
				zf_store_invalidate(r->store, r->owner, unit_index(r, u),
						    r->unit_pages);
		}
	}
	if (r->thread_ctx)
		for (unsigned i = 0;
		     i < (r->o.fault_mode == ZF_FAULT_SIGBUS ? 1 : r->o.fault_threads); i++)
			region_fault_ctx_fini(r, &r->thread_ctx[i]);
	for (int i = 0; i < RG_SIG_CTXS; i++)
		region_fault_ctx_fini(r, &r->sig_ctx[i]);
	region_fault_ctx_fini(r, &r->ra_ctx);
	region_fault_ctx_fini(r, &r->advise_ctx);
	region_fault_ctx_fini(r, &r->evict_ctx);
	if (r->own_store)
		zf_store_destroy(r->store);
	pthread_mutex_destroy(&r->evict_lock);
	pthread_rwlock_destroy(&r->read_lock);
	pthread_rwlock_destroy(&r->fork_lock);
	pthread_mutex_destroy(&r->bg_lock);
	pthread_mutex_destroy(&r->advise_lock);
	pthread_cond_destroy(&r->bg_cond);
	if (r->evict_stage)
		munmap(r->evict_stage, RG_CHUNK);
	if (r->probe)
		munmap(r->probe, ZF_UNIT_MAX);
	region_order_fini(r);
	if (r->group_slot >= 0)
		group_leave(r->group, r->group_slot);
	free(r->threads);
	free(r->thread_ctx);
	free((void *)r->state);
	free((void *)r->premapped);
	free(r);
}

void *zf_region_base(const zf_region *r)
{
	return r ? r->base : NULL;
}

size_t zf_region_size(const zf_region *r)
{
	return r ? r->size : 0;
}

uint32_t zf_region_unit(const zf_region *r)
{
	return r ? r->unit : 0;
}

zf_store *zf_region_store(const zf_region *r)
{
	return r ? r->store : NULL;
}

/* -------------------------------------------------------------------------------- */
/* Advice and stats                                                                 */
/* -------------------------------------------------------------------------------- */

int zf_region_advise(zf_region *r, void *addr, size_t len, enum zf_region_advice advice)
{
	uint64_t u0, u1;

	RETURN_IF(!r || !len, -EINVAL);
	RETURN_IF((uint8_t *)addr < r->base || (uint8_t *)addr + len > r->base + r->size, -EINVAL);
	RETURN_IF(advice != ZF_ADV_COLD && advice != ZF_ADV_HOT, -EINVAL);
	if (!units_of(r, (uintptr_t)addr, (uintptr_t)addr + len, &u0, &u1))
		return 0;
	for (uint64_t u = u0; u < u1; u++) {
		if (advice == ZF_ADV_COLD) {
			uint32_t old = atomic_fetch_or_explicit(&r->state[u], F_COLD,
								memory_order_relaxed);

			atomic_fetch_and_explicit(&r->state[u], ~(F_REF | F_HOT),
						  memory_order_relaxed);
			if (!(old & F_COLD))
				atomic_fetch_add_explicit(&r->cold_units, 1, memory_order_relaxed);
			continue;
		}
		{
			uint32_t old = atomic_fetch_and_explicit(&r->state[u], ~F_COLD,
								 memory_order_relaxed);

			if (old & F_COLD)
				atomic_fetch_sub_explicit(&r->cold_units, 1, memory_order_relaxed);
		}
		atomic_fetch_or_explicit(&r->state[u], F_REF | F_HOT, memory_order_relaxed);
		/* Bring evicted units in now, as readahead does (in the caller's thread). */
		pthread_mutex_lock(&r->advise_lock);
		for (int tries = 0; tries < 1000; tries++) {
			enum serve_result res;

			if ((atomic_load(&r->state[u]) & (ST_MASK | F_PARTIAL)) != ST_EVICTED)
				break;
			if (!r->advise_ctx.reader && region_fault_ctx_init(r, &r->advise_ctx))
				break;
			fork_gate_enter(r);
			res = region_swap_in(r, &r->advise_ctx, u, unit_addr(r, u), 1);
			fork_gate_leave(r);
			if (res != RETRY)
				break;
			sched_yield();
		}
		pthread_mutex_unlock(&r->advise_lock);
	}
	return 0;
}

/* The counters of r, or zeros for NULL. */
static void stats_fill(zf_region *r, zf_region_stats *s)
{
	uint64_t total = 0, seen = 0;
	int o;

	memset(s, 0, sizeof(*s));
	if (!r)
		return;
	o = (int)r->order;
	s->size = r->size;
	s->unit = r->o.unit;
	s->frame = r->frames ? r->unit : 0;
	s->resident_bytes = atomic_load(&r->resident) * r->unit;
	s->resident_max = atomic_load(&r->n.resident_max) * r->unit;
	for (uint64_t u = 0; u < r->nunits; u++)
		s->evicted_units += (atomic_load_explicit(&r->state[u], memory_order_relaxed) &
				     ST_MASK) == ST_EVICTED;
#define GET(f) s->f = atomic_load_explicit(&r->n.f, memory_order_relaxed)
	GET(swpout);
	GET(swpin);
	GET(pgmajfault);
	GET(pgfault_zero);
	GET(wp_faults);
	GET(fault_waits);
	GET(limit_waits);
	GET(evict_pageout);
	GET(evict_reclaim);
	GET(reject);
	GET(clean_kept);
	GET(clean_evict);
	GET(clean_dropped);
	GET(swap_ra);
	GET(swap_ra_hit);
	GET(ev_remove);
	GET(ev_remove_unzapped);
	GET(ev_unmap);
	GET(ev_remap);
	GET(copy_eagain);
	GET(copy_eexist);
	GET(fault_fail);
	GET(fault_ns);
	GET(swapin_load_ns);
	GET(swapin_place_ns);
	GET(thp_swpin);
	GET(thp_fault_alloc);
	GET(thp_zero);
	GET(frame_split);
	GET(frame_fallback);
	GET(fresh_ahead);
	GET(fresh_filled);
	GET(fork_unshared);
#undef GET
	s->staging_bytes = atomic_load(&r->n.staging) * r->unit;
	s->staging_max = atomic_load(&r->n.staging_max) * r->unit;
	s->meta_bytes = sizeof(*r) + r->nunits * sizeof(*r->state) + atomic_load(&r->n.ctx_bytes);
	s->swpout_units[o] = atomic_load(&r->n.swpout_units);
	s->swpin_units[o] = atomic_load(&r->n.swpin_units);
	s->swpin_fallback[o] = atomic_load(&r->n.swpin_fallback);
	for (int i = 0; i < ZF_REGION_LAT_BUCKETS; i++) {
		s->fault_lat[i] = atomic_load_explicit(&r->n.lat[i], memory_order_relaxed);
		total += s->fault_lat[i];
	}
	for (int i = 0; i < ZF_REGION_LAT_BUCKETS && total; i++) {
		const uint64_t before = seen;

		seen += s->fault_lat[i];
		if (before * 100 < total * 50 && seen * 100 >= total * 50)
			s->fault_p50_ns = lat_upper((unsigned)i);
		if (before * 100 < total * 99 && seen * 100 >= total * 99)
			s->fault_p99_ns = lat_upper((unsigned)i);
		if (before * 1000 < total * 999 && seen * 1000 >= total * 999)
			s->fault_p999_ns = lat_upper((unsigned)i);
	}
}

int zf_region_get_stats(zf_region *r, zf_region_stats *out, size_t size)
{
	zf_region_stats s;

	RETURN_IF(!r, -EINVAL);
	stats_fill(r, &s);
	return struct_copy_out(out, size, &s, sizeof(s));
}

size_t zf_region_stats_text(zf_region *r, char *buf, size_t cap)
{
	zf_region_stats s;
	size_t len = 0;
	char sz[16], dummy[1];

	stats_fill(r, &s);
	if (!buf || !cap) {
		buf = dummy;
		cap = 0;
	}
	/* The per-size counters are the placement unit's: the frame's, with frames. */
	snprintf(sz, sizeof(sz), "%uk", (unsigned)((r ? r->unit : 0) >> 10));
#define LINE(fmt, ...)                                                                             \
	do {                                                                                       \
		const int k = snprintf(len < cap ? buf + len : NULL, len < cap ? cap - len : 0,    \
				       fmt "\n", __VA_ARGS__);                                     \
		len += k > 0 ? (size_t)k : 0;                                                      \
	} while (0)
#define FIELD(f) LINE("%s %llu", #f, (unsigned long long)s.f)
	FIELD(size);
	FIELD(unit);
	FIELD(frame);
	FIELD(resident_bytes);
	FIELD(resident_max);
	FIELD(evicted_units);
	FIELD(swpout);
	FIELD(swpin);
	LINE("swpout_%s %llu", sz, (unsigned long long)s.swpout_units[r ? r->order : 0]);
	LINE("swpin_%s %llu", sz, (unsigned long long)s.swpin_units[r ? r->order : 0]);
	LINE("swpin_fallback_%s %llu", sz, (unsigned long long)s.swpin_fallback[r ? r->order : 0]);
	FIELD(pgmajfault);
	FIELD(pgfault_zero);
	FIELD(wp_faults);
	FIELD(fault_waits);
	FIELD(limit_waits);
	FIELD(evict_pageout);
	FIELD(evict_reclaim);
	FIELD(reject);
	FIELD(clean_kept);
	FIELD(clean_evict);
	FIELD(clean_dropped);
	FIELD(swap_ra);
	FIELD(swap_ra_hit);
	FIELD(ev_remove);
	FIELD(ev_remove_unzapped);
	FIELD(ev_unmap);
	FIELD(ev_remap);
	FIELD(copy_eagain);
	FIELD(copy_eexist);
	FIELD(fault_fail);
	FIELD(fault_p50_ns);
	FIELD(fault_p99_ns);
	FIELD(fault_p999_ns);
	FIELD(fault_ns);
	FIELD(swapin_load_ns);
	FIELD(swapin_place_ns);
	FIELD(thp_swpin);
	FIELD(thp_fault_alloc);
	FIELD(thp_zero);
	FIELD(frame_split);
	FIELD(frame_fallback);
	FIELD(fresh_ahead);
	FIELD(fresh_filled);
	FIELD(staging_bytes);
	FIELD(staging_max);
	FIELD(meta_bytes);
	FIELD(fork_unshared);
#undef FIELD
#undef LINE
	return len;
}
