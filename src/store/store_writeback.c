/*
 * store_writeback.c - the store's limits and its writeback: when the pool is full
 * (max_pool_bytes, with zswap's accept threshold), what a put does about it (compact,
 * write the oldest entries back to the backing file, or refuse), and the writeback
 * itself, also on request (zf_store_writeback).
 *
 * Writeback is the one place where what an entry points at changes: from its pool
 * object to its backing slots, and only when nobody but the writeback holds the entry
 * (store.c explains why readers stay safe).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

#define WRITEBACK_BATCH 32u

/*
 * zswap_check_limits(): whether the pool is full; a put's first check (count) counts
 * pool_limit_hit when the pool is at its limit, as zswap counts each store that finds it
 * there.
 */
int store_pool_full(zf_store *s, int count)
{
	const uint64_t max = s->o.max_pool_bytes;
	uint64_t used;
	int full;

	if (!max)
		return 0;
	used = zf_pool_mem_used(s->pool);
	pthread_mutex_lock(&s->stats_lock);
	if (used >= max) {
		s->n.pool_limit_hit += count;
		s->full = 1;
	} else if (s->full && used <= max / 100 * s->o.accept_threshold_pct) {
		s->full = 0;
	}
	full = s->full;
	pthread_mutex_unlock(&s->stats_lock);
	return full;
}

struct wb_item {
	struct entry *e;
	uint64_t slot;
	uint32_t clen;
	int io; /* its index in the batch's ios, or -1 */
	int flagged; /* we set ENTRY_WRITEBACK on it */
	uint8_t *buf;
};

/* Takes up to max entries off the LRU tail, each with a reference. */
static unsigned wb_take(zf_store *s, struct wb_item *items, unsigned max)
{
	struct list_node *node;
	unsigned n = 0;

	pthread_mutex_lock(&s->lru_lock);
	while (n < max && (node = list_last(&s->lru))) {
		struct entry *e = list_entry(node, struct entry, lru);

		lru_del(e);
		atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
		items[n++].e = e;
	}
	pthread_mutex_unlock(&s->lru_lock);
	return n;
}

/*
 * Puts an entry a writeback could not move back on the LRU, at the old end. Caller
 * holds its shard lock (so it cannot leave the table meanwhile).
 */
static void wb_return(zf_store *s, struct entry *e)
{
	pthread_mutex_lock(&s->lru_lock);
	if (!(e->flags & ENTRY_DEAD) && list_empty(&e->lru) && e->kind == ENTRY_POOL)
		list_add_tail(&s->lru, &e->lru);
	pthread_mutex_unlock(&s->lru_lock);
}

/*
 * One batch of writeback: up to WRITEBACK_BATCH of the oldest entries are copied out of
 * the pool, written with one backing_rw(), and switched to their slots. Returns the
 * compressed bytes that left the pool (>= 0), or -errno when nothing could be written.
 */
static long writeback_batch(zf_store *s, unsigned *pages_out)
{
	struct wb_item items[WRITEBACK_BATCH];
	struct backing_io ios[WRITEBACK_BATCH];
	unsigned n = wb_take(s, items, WRITEBACK_BATCH), nio = 0;
	long moved = 0, err = 0;
	uint64_t wrote_pages = 0, failed = 0;

	*pages_out = 0;
	if (!n)
		return -ENOENT;
	for (unsigned i = 0; i < n; i++) {
		struct entry *e = items[i].e;
		struct shard *sh = shard_of(s, e->owner, e->index);
		const void *obj;
		uint64_t handle = 0;
		int ok;

		items[i].buf = NULL;
		items[i].io = -1;
		pthread_mutex_lock(&sh->lock);
		ok = !(e->flags & (ENTRY_DEAD | ENTRY_WRITEBACK)) && e->kind == ENTRY_POOL;
		if (ok) {
			e->flags |= ENTRY_WRITEBACK;
			handle = e->where;
			items[i].clen = e->clen;
		}
		items[i].flagged = ok;
		pthread_mutex_unlock(&sh->lock);
		if (!ok)
			continue;
		items[i].buf = malloc(items[i].clen);
		if (!items[i].buf || backing_alloc(s->backing, items[i].clen, &items[i].slot)) {
			/* A full backing file counts as a failed write. */
			err = items[i].buf ? -ENOSPC : -ENOMEM;
			failed += items[i].buf != NULL;
			free(items[i].buf);
			items[i].buf = NULL;
			continue;
		}
		/* The entry is ours to switch (WRITEBACK), so its handle stays valid. */
		obj = zf_pool_read_begin(s->pool, handle, NULL);
		memcpy(items[i].buf, obj, items[i].clen);
		zf_pool_read_end(s->pool, handle);
		items[i].io = (int)nio;
		ios[nio++] = (struct backing_io){ .slot = items[i].slot,
						  .buf = items[i].buf,
						  .len = items[i].clen,
						  .op = BACKING_WRITE };
	}
	if (nio && backing_rw(s->backing, ios, nio))
		err = -EIO;
	/*
	 * The newest first: the ones that stay go back to the old end of the LRU one by one,
	 * so they keep their order there.
	 */
	for (unsigned i = n; i-- > 0;) {
		struct entry *e = items[i].e;
		struct shard *sh = shard_of(s, e->owner, e->index);
		uint64_t old_handle = 0;
		int io_ok = 0;

		if (items[i].io >= 0) {
			io_ok = ios[items[i].io].result == 0;
			if (!io_ok)
				err = ios[items[i].io].result;
			failed += !io_ok;
		}
		pthread_mutex_lock(&sh->lock);
		if (items[i].flagged)
			e->flags &= (uint8_t)~ENTRY_WRITEBACK;
		if (!items[i].buf) {
			wb_return(s, e); /* skipped: dead, or not in the pool; or no slot */
		} else {
			/* Switch only with no reader: a reader's snapshot names the handle. */
			if (io_ok && !(e->flags & ENTRY_DEAD) && atomic_load(&e->refs) == 2) {
				old_handle = e->where;
				e->kind = ENTRY_BACKING;
				e->where = items[i].slot;
				pthread_mutex_lock(&s->stats_lock);
				s->n.written_back_pages += entry_pages(e);
				s->n.written_back_total += entry_pages(e);
				s->n.bd_writes++;
				pthread_mutex_unlock(&s->stats_lock);
				moved += e->clen;
				wrote_pages += entry_pages(e);
			} else {
				wb_return(s, e); /* failed, or read meanwhile: it stays */
			}
		}
		pthread_mutex_unlock(&sh->lock);
		if (items[i].buf && !old_handle)
			backing_free(s->backing, items[i].slot, items[i].clen);
		if (old_handle)
			pool_free(s, old_handle);
		free(items[i].buf);
		store_entry_put(s, e);
	}
	if (failed) {
		pthread_mutex_lock(&s->stats_lock);
		s->n.bd_write_errors += failed;
		pthread_mutex_unlock(&s->stats_lock);
	}
	*pages_out = (unsigned)wrote_pages;
	return moved ? moved : err;
}

long zf_store_writeback(zf_store *s, uint64_t bytes)
{
	uint64_t done = 0, pages = 0;

	RETURN_IF(!s, -EINVAL);
	RETURN_IF(!s->backing, -ENODEV);
	while (done < bytes) {
		unsigned p;
		const long r = writeback_batch(s, &p);

		pages += p;
		if (r <= 0)
			return pages ? (long)pages : (r == -ENOENT ? 0 : r);
		done += (uint64_t)r;
	}
	return (long)pages;
}

/*
 * The rest of a put's admission (admit() in store_put.c), once its first check found the
 * pool full: 0 when compaction, or writeback if that is the policy, brought the pool
 * under the accept threshold, or -ENOSPC (counted in reject_pool_full).
 */
int store_make_room(zf_store *s)
{
	uint64_t frees, seen;

	/*
	 * Full. Objects freed since the last compaction (invalidated, written back) leave
	 * holes in partly used pages, and empty zspages stay warm: a compaction gives that
	 * memory back. Once per batch of frees, not once per refused put. Then the check
	 * that counts: pool_limit_hit is a put that finds the pool at its limit.
	 */
	frees = atomic_load(&s->pool_frees);
	seen = atomic_load(&s->frees_at_compact);
	if (frees != seen && atomic_compare_exchange_strong(&s->frees_at_compact, &seen, frees))
		zf_pool_compact(s->pool);
	if (!store_pool_full(s, 1))
		return 0;
	if (s->o.when_full == ZF_STORE_WRITEBACK && s->backing) {
		for (unsigned batches = 1;; batches++) {
			unsigned p;

			if (writeback_batch(s, &p) <= 0) {
				/* Nothing more to write: what was freed may sit in partly used pages. */
				zf_pool_compact(s->pool);
				if (!store_pool_full(s, 0))
					return 0;
				break;
			}
			if (batches % 8 == 0)
				zf_pool_compact(s->pool);
			if (!store_pool_full(s, 0))
				return 0;
		}
	}
	pthread_mutex_lock(&s->stats_lock);
	s->n.reject_pool_full++;
	pthread_mutex_unlock(&s->stats_lock);
	return -ENOSPC;
}

long zf_store_compact(zf_store *s)
{
	RETURN_IF(!s, -EINVAL);
	return zf_pool_compact(s->pool);
}
