/*
 * none.c - the copy codec: what a store costs with compression taken out, and the
 * format of units kept raw because they did not compress.
 */
#include <string.h>

#include "codec.h"

static int none_compress(struct zf_codec_ctx *ctx, const void *src, int src_len, void *dst,
			 int dst_cap)
{
	(void)ctx;
	RETURN_IF(dst_cap < src_len, -E2BIG);
	memcpy(dst, src, (size_t)src_len);
	return src_len;
}

static int none_decompress(struct zf_codec_ctx *ctx, const void *src, int src_len, void *dst,
			   int dst_len)
{
	(void)ctx;
	RETURN_IF(src_len != dst_len, -EBADMSG);
	memcpy(dst, src, (size_t)dst_len);
	return dst_len;
}

const struct codec_ops codec_none_ops = {
	.algorithm = "none",
	.compress = none_compress,
	.decompress = none_decompress,
};
