/*
 * test_point.c - the test build's points (test_point.h): one function and argument per
 * point, set by a test, run by the thread that reaches the point.
 */
#include <stdatomic.h>
#include <stddef.h>

#include "test_point.h"

struct point {
	_Atomic(test_point_fn) fn;
	void *_Atomic arg;
};

static struct point points[TP_COUNT];

void test_point_set(enum test_point point, test_point_fn fn, void *arg)
{
	if ((unsigned)point >= TP_COUNT)
		return;
	/*
	 * A thread at the point loads fn, then arg: arg goes first, and a clear leaves it,
	 * so that one that loaded fn just before the clear still gets the arg it was set
	 * with (the test keeps it alive until its region is gone).
	 */
	if (fn)
		atomic_store(&points[point].arg, arg);
	atomic_store(&points[point].fn, fn);
}

int test_point_reached(enum test_point point)
{
	test_point_fn fn = atomic_load(&points[point].fn);

	return fn ? fn(point, atomic_load(&points[point].arg)) : 0;
}
