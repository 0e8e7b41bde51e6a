/*
 * codec_pick.h - the codec of a test that needs one but not a particular one, for the
 * unit, system and stress tests alike.
 *
 * lz4 is the store's and the region's default codec, and the tests' when the build has
 * it. A build without it (ZF_WITH_LZ4=OFF) refuses those defaults with -ENOTSUP (the
 * options name a codec it lacks), so the tests name this codec instead: the first of
 * lzo, zstd, deflate and isal the build has, said once on stderr; or none, which
 * compresses nothing, in a build with no codec at all.
 */
#ifndef ZF_CODEC_PICK_H
#define ZF_CODEC_PICK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>

#include "zfolio.h"

static inline const char *test_codec_name(void)
{
	static const char *const names[] = { "lz4", "lzo", "zstd:1", "deflate:1", "isal:1" };
	static atomic_int told;
	const zf_codec *c;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (zf_codec_find(names[i], &c) == 0) {
			if (i && !atomic_exchange(&told, 1))
				fprintf(stderr,
					"codec lz4 is not in this build: the tests use %s\n",
					names[i]);
			return names[i];
		}
	}
	return "none";
}

#endif /* ZF_CODEC_PICK_H */
