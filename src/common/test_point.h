/*
 * test_point.h - named points between two steps of the library where a test can run
 * code of its own: a race that needs a program's call to land between two steps (a
 * munmap while an eviction holds pages, an mremap before an event is handled) is made
 * to happen on demand, every run, instead of once in a thousand.
 *
 * Only the test build (zfolio_testlib, ZF_TEST_HOOKS) has them; in the library that is
 * installed TEST_POINT() compiles to nothing. A point's function runs in whatever thread
 * reaches the point, with no lock of the library's held unless the point says so.
 */
#ifndef ZF_TEST_POINT_H
#define ZF_TEST_POINT_H

enum test_point {
	TP_EVICT_SETTLED, /* eviction: units seen settled, none claimed yet (read_lock shared) */
	TP_EVICT_CLAIMED, /* eviction: units claimed (EVICTING), pages still in place */
	TP_EVICT_MOVED, /* eviction: pages moved out to staging, nothing stored yet */
	TP_EVICT_STORED, /* eviction: stored, units not yet settled (still EVICTING) */
	TP_EVENTS_PENDING, /* service thread: the descriptor is readable, nothing read yet */
	TP_EVENTS_READ, /* service thread: messages read, events not yet handled (read_lock) */
	TP_EVENT_HANDLE, /* an event at the head of the queue, about to be handled (read_lock); a
			  * function that returns nonzero makes it wait, as a unit in
			  * transition would */
	TP_FAULT_RESIDENT, /* a fault on a resident unit (a hole, a write to a clean page),
			    * about to claim it */
	TP_FAULT_FIXED, /* the same: claimed (LOADING), the page fixed, not yet released */
	TP_ZEROS_UNPROTECT, /* a write to a frame that maps the huge zero page: about to lift
			     * its protection (claimed LOADING, read_lock shared) */
	TP_SWAPIN_LOADED, /* a swap-in: the unit claimed (LOADING) and read from the store,
			   * not yet placed (fork_lock shared) */
	TP_FILL_SEEN, /* the reader: a fresh frame opened ahead seen resident, not yet written
		       * (no lock held) */
	TP_PREMAP_MOVED, /* a block premapped at its first fault: the huge zero page moved into
			  * a frame, not yet write-protected (claimed LOADING, read_lock shared) */
	TP_COUNT
};

/* Returns 0, or (at a point that asks) nonzero to make the library wait there. */
typedef int (*test_point_fn)(enum test_point point, void *arg);

#ifdef ZF_TEST_HOOKS
/* Sets (fn) or clears (NULL) the function run at point; a cleared point keeps its arg. */
void test_point_set(enum test_point point, test_point_fn fn, void *arg);
int test_point_reached(enum test_point point);
#define TEST_POINT(point) ((void)test_point_reached(point))
#define TEST_POINT_WAITS(point) (test_point_reached(point) != 0)
#else
#define TEST_POINT(point) ((void)0)
#define TEST_POINT_WAITS(point) 0
#endif

#endif /* ZF_TEST_POINT_H */
