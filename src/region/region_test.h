/*
 * region_test.h - the region's test hooks: only the test build (zfolio_testlib,
 * ZF_TEST_HOOKS) has them. The region tests include it from src/.
 */
#ifndef ZF_REGION_TEST_H
#define ZF_REGION_TEST_H

#ifdef ZF_TEST_HOOKS
#include "zfolio.h"

/*
 * Takes the page at addr out of the region with no event, as the program's zap of a
 * MADV_DONTNEED does when it comes after its REMOVE was read and handled (the kernel lets
 * the dropping thread go on once the event is read; it zaps later). 0, or -errno.
 */
int region_test_zap_page(zf_region *r, void *addr);

/*
 * 1 if the region's descriptor holds a message nobody has read (an event, or in thread
 * mode a fault), else 0. The service thread reads under read_lock exclusive: a caller
 * that holds it shared keeps what it sees unread.
 */
int region_test_events_unread(zf_region *r);
#endif

#endif /* ZF_REGION_TEST_H */
