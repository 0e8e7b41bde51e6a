/*
 * lz4.c - LZ4 and LZ4 HC (liblz4), the codecs zram and zswap default to.
 *
 * Both write the plain LZ4 block format, so they share one decoder. The compressors use
 * the "extState" calls on a state kept in the context, so no call allocates;
 * LZ4_compress_fast_extState() takes the output bound and returns 0 when the block
 * would not fit, which is exactly zfolio's -E2BIG. LZ4_decompress_safe() never writes
 * past its capacity and never reads past its input; zfolio adds the check that the
 * block decodes to exactly the expected length.
 */
#include <stdlib.h>

#include <lz4.h>
#include <lz4hc.h>

#include "codec.h"

static int lz4_init(struct zf_codec_ctx *ctx)
{
	ctx->priv = malloc((size_t)LZ4_sizeofState());
	return ctx->priv ? 0 : -ENOMEM;
}

static int lz4hc_init(struct zf_codec_ctx *ctx)
{
	ctx->priv = malloc((size_t)LZ4_sizeofStateHC());
	return ctx->priv ? 0 : -ENOMEM;
}

static void lz4_fini(struct zf_codec_ctx *ctx)
{
	free(ctx->priv);
}

static int lz4_compress(struct zf_codec_ctx *ctx, const void *src, int src_len, void *dst,
			int dst_cap)
{
	const int n = LZ4_compress_fast_extState(ctx->priv, src, dst, src_len, dst_cap, ctx->level);

	return n > 0 ? n : -E2BIG;
}

static int lz4hc_compress(struct zf_codec_ctx *ctx, const void *src, int src_len, void *dst,
			  int dst_cap)
{
	const int n = LZ4_compress_HC_extStateHC(ctx->priv, src, dst, src_len, dst_cap, ctx->level);

	return n > 0 ? n : -E2BIG;
}

static int lz4_decompress(struct zf_codec_ctx *ctx, const void *src, int src_len, void *dst,
			  int dst_len)
{
	(void)ctx;
	return LZ4_decompress_safe(src, dst, src_len, dst_len) == dst_len ? dst_len : -EBADMSG;
}

const struct codec_ops codec_lz4_ops = {
	.algorithm = "lz4",
	.has_level = 1,
	.level_min = 1,
	.level_max = 65537, /* LZ4_ACCELERATION_MAX */
	.level_default = 1,
	.init = lz4_init,
	.fini = lz4_fini,
	.compress = lz4_compress,
	.decompress = lz4_decompress,
};

const struct codec_ops codec_lz4hc_ops = {
	.algorithm = "lz4hc",
	.has_level = 1,
	.level_min = 1,
	.level_max = LZ4HC_CLEVEL_MAX,
	.level_default = LZ4HC_CLEVEL_DEFAULT,
	.init = lz4hc_init,
	.fini = lz4_fini,
	.compress = lz4hc_compress,
	.decompress = lz4_decompress,
};
