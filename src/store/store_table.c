/*
 * store_table.c - the store's table of entries, apart from its lookups and insertions
 * (which the put and get paths inline from store_internal.h): growing it, releasing and
 * counting entries, and taking ranges of them out (zf_store_invalidate, and a put over
 * units of other sizes).
 *
 * The table, its shards and the reference rule an entry lives by are described at the
 * top of store.c.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

/*
 * Doubles a shard's buckets, once its entries are as many (table_insert()); failing to is
 * harmless: the chains only grow longer. Caller holds the shard lock.
 */
void store_table_grow(struct shard *sh)
{
	const size_t n = sh->nbuckets * 2;
	struct entry **b;

	b = calloc(n, sizeof(*b));
	if (!b)
		return;
	for (size_t i = 0; i < sh->nbuckets; i++) {
		struct entry *e = sh->buckets[i];

		while (e) {
			struct entry *next = e->hnext;
			struct entry **to = &b[key_hash(e->owner, e->index) & (n - 1)];

			e->hnext = *to;
			*to = e;
			e = next;
		}
	}
	free(sh->buckets);
	sh->buckets = b;
	sh->nbuckets = n;
}

/* Drops a reference; the last one frees the object and the entry. */
void store_entry_put(zf_store *s, struct entry *e)
{
	uint64_t handle;

	if (entry_unref(s, e, &handle))
		pool_free(s, handle);
}

/*
 * What an entry adds to the counters (sign +1) or takes from them (-1) while it is in
 * the table, into n (the store's, under stats_lock, or a delta to add to them later).
 */
void store_count_entry(struct counters *n, const struct entry *e, int sign)
{
	const uint64_t pages = entry_pages(e);

	n->stored_pages += sign * pages;
	n->units[e->order] += (uint64_t)(int64_t)sign;
	n->orig_data_size += sign * pages * STORE_PAGE;
	n->compr_data_size += sign * (uint64_t)e->clen;
	if (e->kind == ENTRY_SAME)
		n->same_filled_pages += sign * pages;
	if (e->flags & ENTRY_RAW)
		n->stored_incompressible_pages += sign * pages;
	if (e->kind == ENTRY_BACKING)
		n->written_back_pages += sign * pages;
}

/* entry_remove_locked() for a caller that holds only the shard lock. */
static void entry_remove(zf_store *s, struct shard *sh, uint64_t hash, struct entry *e)
{
	pthread_mutex_lock(&s->lru_lock);
	entry_remove_locked(sh, hash, e);
	pthread_mutex_unlock(&s->lru_lock);
}

/*
 * Drops every unit that holds a page of index .. index + pages - 1; what it takes from
 * the counters goes into delta. Returns the units dropped.
 */
long store_drop_range(zf_store *s, uint32_t owner, uint64_t index, uint64_t pages,
		      struct counters *delta)
{
	long dropped = 0;
	unsigned orders = 0; /* the sizes of units in the table (or about to be) */
	uint64_t step;

	/*
	 * Only sizes the store holds are looked for, and only where such a unit could begin:
	 * a store of 64 KiB units holding no smaller ones looks once per 64 KiB, not five
	 * times per page (an empty store's puts did 2560 lookups per 2 MiB folio). A unit
	 * is counted before it is in the table, so no unit there is missed; one a concurrent
	 * put adds is its race with this one, as it always was.
	 */
	pthread_mutex_lock(&s->stats_lock);
	for (unsigned order = 0; order <= s->unit_order; order++)
		if (s->n.units[order])
			orders |= 1u << order;
	pthread_mutex_unlock(&s->stats_lock);
	if (!orders)
		return 0;
	step = (uint64_t)1 << __builtin_ctz(orders);
	for (uint64_t p = index; p - index < pages;) {
		uint64_t next = (p | (step - 1)) + 1;

		for (int order = (int)s->unit_order; order >= 0; order--) {
			if (!(orders & (1u << order)))
				continue;
			const uint64_t first = p & ~(((uint64_t)1 << order) - 1);
			const uint64_t hash = key_hash(owner, first);
			struct shard *sh = shard_of(s, owner, first);
			struct entry *e;

			pthread_mutex_lock(&sh->lock);
			e = table_find(sh, hash, owner, first);
			if (!e || e->order != order) {
				pthread_mutex_unlock(&sh->lock);
				continue;
			}
			entry_remove(s, sh, hash, e);
			store_count_entry(delta, e, -1);
			delta->invalidates++;
			next = first + entry_pages(e);
			pthread_mutex_unlock(&sh->lock);
			store_entry_put(s, e);
			dropped++;
			break;
		}
		if (next <= p)
			break; /* the unit ends at the top of the index space */
		p = next;
	}
	return dropped;
}

long zf_store_invalidate(zf_store *s, uint32_t owner, uint64_t index, uint64_t pages)
{
	struct counters delta;
	long dropped;

	RETURN_IF(!s, -EINVAL);
	memset(&delta, 0, sizeof(delta));
	dropped = store_drop_range(s, owner, index, pages, &delta);
	counters_add(s, &delta);
	return dropped;
}
