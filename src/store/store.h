/*
 * store.h - the store's internals for the region and for tests: readers for gets from a
 * signal handler, and hooks that make the backing file fail or corrupt a unit.
 * See store.c for the design; the API is in include/zfolio.h.
 */
#ifndef ZF_STORE_H
#define ZF_STORE_H

#include "../common/common.h"

#ifdef ZF_TEST_HOOKS
/*
 * Test hooks, in the test build of the library only.
 *
 * Makes the (after_n + 1)-th read (op BACKING_READ) or write (BACKING_WRITE) of the
 * store's backing file fail with err, once (backing_inject_error()). Returns 0, or
 * -ENODEV for a store without a backing file.
 */
int store_inject_backing_error(zf_store *s, int op, uint64_t after_n, int err);

/* Flips a byte of the stored unit that holds page index of owner, so that its checksum
 * fails. Returns 0, -ENOENT, or -ENOTSUP (same-filled or written back). */
int store_corrupt(zf_store *s, uint32_t owner, uint64_t index);

/* The pins held on the store's pool objects now (zpool_pins()). */
uint64_t store_pool_pins(zf_store *s);

/* The counters of the store's engines (zf_engines_get_stats()). */
int store_engines_stats(zf_store *s, zf_engines_stats *stats);
#endif

/*
 * A reader: a codec context and scratch room of its own, for gets made where the
 * per-thread one of zf_store_get() cannot be made (a signal handler must not allocate).
 * store_get_with() is zf_store_get() with it, store_get_folio_with() zf_store_get_folio()
 * but that on a store with engines the folio's units decompress on them, the reader's
 * thread helping (a batch made with the reader); the reader serves one thread at a time.
 */
struct store_reader;
int store_reader_create(zf_store *s, struct store_reader **r);
void store_reader_destroy(struct store_reader *r);
int store_get_with(zf_store *s, struct store_reader *r, uint32_t owner, uint64_t index, void *dst,
		   size_t len);
/* zf_store_get_folio() with a reader. */
int store_get_folio_with(zf_store *s, struct store_reader *r, uint32_t owner, uint64_t index,
			 void *dst, size_t len);

/* The store's unit: 4096 in split mode. */
uint32_t store_unit(const zf_store *s);

/*
 * fork() (the region's ZF_FORK_COPY, region_fork.c). A store can be copied into a child
 * when it has no backing file (whose io_uring and slots the child would share with the
 * parent): 1, or 0. store_fork_child(), in the child, with no operation of the store in
 * flight at the fork: its engines started again. 0, or a negative error.
 */
int store_fork_ok(const zf_store *s);
int store_fork_child(zf_store *s);

#endif /* ZF_STORE_H */
