/*
 * options.h - the caller's options and stats structs, whatever header it was built with
 * (options.c says how sizes are judged).
 */
#ifndef ZF_OPTIONS_H
#define ZF_OPTIONS_H

#include "common.h"

/* No options struct will be larger: a struct_size above it is garbage. */
#define OPTIONS_SIZE_MAX 4096

/*
 * Copies the caller's options at src over dst, which holds the defaults (its
 * *_options_init()) and is size bytes long, and sets dst's struct_size to size. sizes[]
 * lists the sizes the struct has had in releases, the current one (size) among them.
 * src NULL leaves the defaults. Returns 0; -EINVAL for a struct_size that was never the
 * struct's size; -E2BIG for a larger struct whose bytes past size are not all zero
 * (options this library does not know, set).
 */
int options_load(void *dst, size_t size, const void *src, const size_t *sizes,
		 size_t nsizes) ZF_MUST_CHECK;

/* options_load() of a struct whose only published size is its current one. */
#define OPTIONS_LOAD(dst, src)                                                                     \
	options_load((dst), sizeof(*(dst)), (src), (const size_t[]){ sizeof(*(dst)) }, 1)

/*
 * Copies a stats struct out to a caller who has room for size bytes of it (statx's
 * way): the first min(size, src_size) bytes; a larger caller's struct, from a newer
 * header, gets zeros past src_size. Returns 0, or -EINVAL (dst NULL, size 0 or absurd).
 */
int struct_copy_out(void *dst, size_t size, const void *src, size_t src_size);

#endif /* ZF_OPTIONS_H */
