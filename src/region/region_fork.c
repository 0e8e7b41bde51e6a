/*
 * region_fork.c - fork(): a child gets a copy of a region made with ZF_FORK_COPY, its
 * evicted units included, and both go on privately.
 *
 * The kernel copies the memory (the region is MADV_DOFORK for the fork only), but not the
 * userfaultfd registration (without UFFD_FEATURE_EVENT_FORK the child's copy is plain
 * memory, where evicted pages would read as zeros) nor any thread. So, in pthread_atfork()
 * handlers the library installs once:
 *
 *   prepare  for each such region: evict_lock (no eviction in flight), read_lock written
 *            (no event being handled, no placement), fork_lock written (no fault being
 *            served: region_serve() and every swap-in run under it read); then no unit
 *            is in transition and no thread is inside the store, so the store's locks
 *            are all free and its state whole; MADV_DOFORK.
 *   parent   MADV_DONTFORK again, the locks released.
 *   child    the child's copy of each region is made a region again before fork()
 *            returns: its locks made anew, a userfaultfd of its own with the region's
 *            units registered, new fault buffers (they were MADV_DONTFORK), new eventfds
 *            and /proc/self/pagemap (the parent's are shared with the parent), the
 *            store's engine threads and the region's threads started again, its queued
 *            events handled, and the pages the kernel unprotected in the copy
 *            protected again (the huge zero page of never-written frames: their first
 *            write must fault). The child's store is the copy of the parent's at the
 *            fork: the child reads its evicted units from it, the parent from its own.
 *            A member of a group joins it as a member of its own (a new slot).
 *   every region in a SIGBUS-mode child: the handler's registry keeps the copied regions
 *            and forgets the others (MADV_DONTFORK: not there).
 *
 * The handlers are installed at the first region, or earlier by zf_region_atfork(): a
 * prepare handler runs after those installed later, and a child handler before them, so
 * that theirs may touch region memory. One installed earlier than zfolio's must not touch
 * region memory in its prepare handler (the fault would wait for the fork) nor in its
 * child handler (the memory is not the region's yet). A raw clone() without the handlers
 * gives the child no region memory (MADV_DONTFORK): SIGSEGV, never silent zeros.
 *
 * docs/region.md: "fork".
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "region_internal.h"

static pthread_mutex_t forks_lock = PTHREAD_MUTEX_INITIALIZER;
static zf_region *forks; /* the regions with ZF_FORK_COPY, under forks_lock */

void region_fork_add(zf_region *r)
{
	pthread_mutex_lock(&forks_lock);
	r->fork_next = forks;
	forks = r;
	pthread_mutex_unlock(&forks_lock);
}

void region_fork_remove(zf_region *r)
{
	pthread_mutex_lock(&forks_lock);
	for (zf_region **p = &forks; *p; p = &(*p)->fork_next) {
		if (*p == r) {
			*p = r->fork_next;
			break;
		}
	}
	pthread_mutex_unlock(&forks_lock);
}

static void madvise_run(zf_region *r, uint8_t *addr, size_t len, int advice)
{
	(void)r;
	(void)madvise(addr, len, advice);
}

/*
 * The order of the locks is theirs everywhere: an eviction holds evict_lock and takes
 * read_lock; a fault holds fork_lock and takes read_lock; an event holds read_lock.
 */
static void fork_prepare(void)
{
	common_internal++;
	pthread_mutex_lock(&forks_lock);
	for (zf_region *r = forks; r; r = r->fork_next) {
		pthread_mutex_lock(&r->evict_lock);
		pthread_rwlock_wrlock(&r->fork_lock);
		pthread_rwlock_wrlock(&r->read_lock);
		region_live_runs(r, madvise_run, MADV_DOFORK);
	}
	common_internal--;
}

static void fork_parent(void)
{
	common_internal++;
	for (zf_region *r = forks; r; r = r->fork_next) {
		region_live_runs(r, madvise_run, MADV_DONTFORK);
		pthread_rwlock_unlock(&r->read_lock);
		pthread_rwlock_unlock(&r->fork_lock);
		pthread_mutex_unlock(&r->evict_lock);
	}
	pthread_mutex_unlock(&forks_lock);
	common_internal--;
}

/* A buffer of c's, which was MADV_DONTFORK, made again (a context never made: left). */
static int rebuf(zf_region *r, struct fault_ctx *c)
{
	if (!c->reader)
		return 0;
	region_buf_set(r, c, BUF_EMPTY); /* what it held is not there (the staging gauge) */
	c->buf = NULL;
	return region_fault_ctx_buf(r, c);
}

/*
 * Pages the kernel unprotected in the child's copy (a copied VMA that is not registered
 * loses its userfaultfd write protection) are protected again: never-written frames that
 * map the huge zero page (their first write must reach the region), and units a REMOVE
 * left in doubt (their writes must be seen). Clean copies are dropped instead.
 */
static void reprotect(zf_region *r)
{
	for (uint64_t u = 0; u < r->nunits; u++) {
		uint32_t st = atomic_load(&r->state[u]);
		const uint32_t s = st & ST_MASK;

		if ((s == ST_EMPTY && r->frames && region_frame_mapped(unit_addr(r, u))) ||
		    (s != ST_GONE && (st & F_DOUBT)))
			(void)protect(r, unit_addr(r, u), r->unit, 1);
		if (st & F_CLEAN) {
			zf_store_invalidate(r->store, r->owner, unit_index(r, u), r->unit_pages);
			atomic_fetch_and(&r->state[u], ~F_CLEAN);
		}
	}
}

/* The child's copy of r made a region again: 0, or an error (fork_child() unmaps it). */
static int child_one(zf_region *r)
{
	const unsigned n = r->o.fault_mode == ZF_FAULT_SIGBUS ? 1 : r->o.fault_threads;
	uint64_t st;

	region_locks_init(r); /* held by the thread that forked: made anew, unlocked */
	/* Nothing was in transition (fork_prepare()): no waiter, no mark, no event half done. */
	for (uint64_t u = 0; u < r->nunits; u++) {
		st = atomic_load(&r->state[u]) & ST_MASK;
		if (st == ST_LOADING || st == ST_EVICTING)
			common_log(ZF_LOG_ERROR, "region %p: unit %llu in transition at fork",
				   (void *)r->base, (unsigned long long)u);
	}
	/* The parent's files: the child's must be its own. */
	close(r->uffd);
	close(r->stop_fd);
	if (r->log_fd >= 0)
		close(r->log_fd);
	if (r->pagemap_fd >= 0)
		close(r->pagemap_fd);
	r->uffd = r->log_fd = -1;
	r->pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	TRY(region_open_eventfds(r));
	/* What was MADV_DONTFORK: the staging area, the probe page, the fault buffers. */
	r->evict_stage = region_map_aligned(RG_CHUNK);
	r->probe = region_map_aligned(ZF_UNIT_MAX);
	if (!r->evict_stage || !r->probe)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++)
		TRY(rebuf(r, &r->thread_ctx[i]));
	for (int i = 0; i < RG_SIG_CTXS; i++)
		TRY(rebuf(r, &r->sig_ctx[i]));
	/* SIGBUS mode: a context a faulting thread of the parent's held is free here. */
	if (r->o.fault_mode == ZF_FAULT_SIGBUS)
		atomic_store(&r->sig_free, (uint32_t)((1ull << RG_SIG_CTXS) - 1));
	TRY(rebuf(r, &r->ra_ctx));
	TRY(rebuf(r, &r->advise_ctx));
	TRY(rebuf(r, &r->evict_ctx));
	if (madvise(r->evict_stage, RG_CHUNK, r->frames ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) ||
	    madvise(r->evict_stage, RG_CHUNK, MADV_DONTFORK) ||
	    madvise(r->probe, ZF_UNIT_MAX, MADV_NOHUGEPAGE))
		return -errno;
	TRY(region_uffd_reopen(r));
	region_live_runs(r, madvise_run,
			 MADV_DONTFORK); /* as the parent's: until the child's next fork */
	/* The program's events read before the fork and queued: the child's layout too. */
	if (r->nqueue)
		region_run_queue(r, &r->thread_ctx[0]);
	reprotect(r);
	r->nthreads = 0;
	r->have_reclaimer = r->have_reader = 0;
	if (r->group) {
		/*
		 * A member of its own (the parent's slot stays the parent's), charged nothing
		 * for the units resident at the fork: their pages are the parent's too, and
		 * the parent is charged for them (F_FORKED). Until here group_slot was the
		 * parent's, which group_leave() from this process cannot let go.
		 */
		r->group_slot = group_join(r->group);
		if (r->group_slot < 0)
			return r->group_slot;
		for (uint64_t u = 0; u < r->nunits; u++) {
			st = atomic_load(&r->state[u]);
			if ((st & ST_MASK) == ST_RESIDENT || (st & F_PARTIAL))
				atomic_fetch_or(&r->state[u], F_FORKED);
		}
		atomic_store(&r->room_wanted, 0);
	}
	return region_start_threads(r);
}

/* Whether a region before r in the list has r's store (made whole once). */
static int store_seen(const zf_region *r)
{
	for (const zf_region *q = forks; q != r; q = q->fork_next) {
		if (q->store == r->store)
			return 1;
	}
	return 0;
}

static void fork_child(void)
{
	common_internal++;
	pthread_mutex_init(&forks_lock, NULL);
	region_sigbus_fork_child();
	for (zf_region *r = forks; r; r = r->fork_next) {
		int ret = 0;

		if (!store_seen(r))
			ret = store_fork_child(r->store);
		if (!ret)
			ret = child_one(r);
		if (ret) {
			/* Loud, not zeros: the child's copy goes, as without ZF_FORK_COPY. */
			common_log(ZF_LOG_ERROR,
				   "region %p: cannot be made in the child after fork (%s): the "
				   "child does not get it",
				   (void *)r->base, zf_strerror(ret));
			region_live_runs(r, region_unmap_run, 0);
			if (r->group && r->group_slot >= 0)
				group_leave(r->group, r->group_slot);
		}
	}
	common_internal--;
}

static void install(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

void zf_region_atfork(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, install);
}
