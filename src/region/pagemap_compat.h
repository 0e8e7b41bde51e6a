/*
 * pagemap_compat.h - PAGEMAP_SCAN (Linux 6.7), which Debian 12's kernel headers (6.1)
 * lack: the ioctl on /proc/self/pagemap that tells, per range, whether pages are mapped
 * by a huge page or map the zero page. The region's frames ask it (region_frame.c); so do
 * the region tests. A kernel without it answers ENOTTY, and the callers do without.
 */
#ifndef ZF_PAGEMAP_COMPAT_H
#define ZF_PAGEMAP_COMPAT_H

#include <linux/fs.h>
#include <linux/types.h>

#ifndef PAGEMAP_SCAN
#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#define PAGE_IS_PFNZERO (1 << 5)
#define PAGE_IS_HUGE (1 << 6)
struct page_region {
	__u64 start, end, categories;
};
struct pm_scan_arg {
	__u64 size, flags, start, end, walk_end, vec, vec_len, max_pages;
	__u64 category_inverted, category_mask, category_anyof_mask, return_mask;
};
#endif

#endif /* ZF_PAGEMAP_COMPAT_H */
