/*
 * store.h - the store's internals for its tests: a hook to make the backing file fail.
 * See store.c for the design; the API is in include/zfolio.h.
 */
#ifndef ZF_STORE_H
#define ZF_STORE_H

#include "../common/common.h"

/*
 * Makes the (after_n + 1)-th read (op BACKING_READ) or write (BACKING_WRITE) of the
 * store's backing file fail with err, once (backing_inject_error()). Returns 0, or
 * -ENODEV for a store without a backing file.
 */
int store_inject_backing_error(zf_store *s, int op, uint64_t after_n, int err);

#endif /* ZF_STORE_H */
