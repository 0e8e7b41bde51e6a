/*
 * zpool.h - what the library uses of the pool beyond the public zf_pool_* functions: the
 * store's puts write into an object in two steps and ask for an object's lines ahead of
 * a free or a read; tests ask where an object is and check the pool's invariants. The
 * pool's structures stay in zpool_internal.h.
 */
#ifndef ZF_ZPOOL_H
#define ZF_ZPOOL_H

#include <stdint.h>

#include "zfolio.h"

/*
 * zf_pool_write() in two steps, for the store's puts, which copy a unit into its object
 * a compression later: the object's bytes, pinned until zf_pool_read_end(), or NULL for
 * a handle that is not allocated.
 */
void *zpool_write_begin(zf_pool *pool, uint64_t handle);

/*
 * Ask for the lines a free or a read of handle's object begins with, ahead of it:
 * zpool_prefetch_entry() for its table entry, then (once that has come: it loads the
 * entry) zpool_prefetch_object() for its zspage and the object's header.
 */
void zpool_prefetch_entry(zf_pool *pool, uint64_t handle);
void zpool_prefetch_object(zf_pool *pool, uint64_t handle);

/* The class a handle's object is in now (spilling may have moved it up), or UINT32_MAX. */
unsigned zpool_handle_class(zf_pool *pool, uint64_t handle);

#ifdef ZF_TEST_HOOKS
/* For tests: checks every invariant of every class. Returns 0 or -EFAULT (and logs). */
int zpool_check(zf_pool *pool);

/* For tests: the pins held on the pool's zspages now (none once every read has ended). */
uint64_t zpool_pins(zf_pool *pool);
#endif

#endif /* ZF_ZPOOL_H */
