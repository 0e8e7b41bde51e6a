/*
 * store_testhooks.c - the store's test hooks (store.h), built only into the test
 * library (ZF_TEST_HOOKS): they corrupt a stored unit, make the backing file fail, and
 * count the pool's pins, so that tests can reach the failure paths.
 */
#include <stdint.h>

#include "store_internal.h"

#ifdef ZF_TEST_HOOKS
int store_corrupt(zf_store *s, uint32_t owner, uint64_t index)
{
	struct entry_view v;
	struct entry *e;
	uint8_t *data;
	int ret = 0;

	RETURN_IF(!s, -EINVAL);
	e = store_entry_lookup(s, owner, index, &v);
	RETURN_IF(!e, -ENOENT);
	if (v.kind != ENTRY_POOL) {
		ret = -ENOTSUP;
	} else if ((data = (uint8_t *)(uintptr_t)zf_pool_read_begin(s->pool, v.where, NULL))) {
		data[v.clen / 2] ^= 0x5a;
		zf_pool_read_end(s->pool, v.where);
	} else {
		ret = -EBADMSG;
	}
	store_entry_put(s, e);
	return ret;
}

uint64_t store_pool_pins(zf_store *s)
{
	return zpool_pins(s->pool);
}

int store_engines_stats(zf_store *s, zf_engines_stats *stats)
{
	RETURN_IF(!s, -EINVAL);
	return zf_engines_get_stats(s->engines, stats, sizeof(*stats));
}

int store_inject_backing_error(zf_store *s, int op, uint64_t after_n, int err)
{
	RETURN_IF(!s, -EINVAL);
	RETURN_IF(!s->backing, -ENODEV);
	backing_inject_error(s->backing, op, after_n, err);
	return 0;
}
#endif
