/*
 * options.c - one check of the struct_size that opens every options struct, and one
 * copy of a stats struct out to the caller.
 *
 * A program built against an older zfolio.h passes an older, smaller struct; one built
 * against a newer header passes a larger one. Like clone3() and openat2(), the library
 * takes a struct of any size it has published (the fields it does not know the program
 * could not set: they keep their defaults) and a larger one whose extra bytes are all
 * zero (options the program left alone); it refuses any other size, so that a size
 * cutting a field in half, or a garbage struct_size, never reaches the fields. A size
 * above OPTIONS_SIZE_MAX is garbage: nothing past the struct is read for it.
 */
#include <string.h>

#include "options.h"

int options_load(void *dst, size_t size, const void *src, const size_t *sizes, size_t nsizes)
{
	size_t given;
	int known = 0;

	if (!src)
		return 0;
	memcpy(&given, src, sizeof(given));
	for (size_t i = 0; i < nsizes; i++)
		known |= given == sizes[i];
	RETURN_IF(given > OPTIONS_SIZE_MAX, -EINVAL);
	if (!known && given > size) {
		const unsigned char *tail = (const unsigned char *)src + size;

		for (size_t i = 0; i < given - size; i++)
			RETURN_IF(tail[i], -E2BIG);
		given = size;
		known = 1;
	}
	RETURN_IF(!known || given > size, -EINVAL);
	memcpy(dst, src, given);
	memcpy(dst, &size, sizeof(size));
	return 0;
}

int struct_copy_out(void *dst, size_t size, const void *src, size_t src_size)
{
	RETURN_IF(!dst || size == 0 || size > INT32_MAX, -EINVAL);
	memcpy(dst, src, ZF_MIN(size, src_size));
	if (size > src_size)
		memset((unsigned char *)dst + src_size, 0, size - src_size);
	return 0;
}
