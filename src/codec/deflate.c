/*
 * deflate.c - raw DEFLATE by libdeflate, levels 0..12.
 *
 * libdeflate compresses a whole buffer in one call into a bounded output and returns 0
 * when it would not fit, which maps directly to -E2BIG. Its decompressor, called
 * without an "actual length" pointer, succeeds only when the stream decodes to exactly
 * the buffer's length, and the _ex variant tells how much input it consumed, so
 * trailing garbage is caught too.
 */
#include <stdlib.h>

#include <libdeflate.h>

#include "codec.h"

struct deflate_priv {
	struct libdeflate_compressor *c;
	struct libdeflate_decompressor *d;
};

static void deflate_fini(struct zf_codec_ctx *ctx)
{
	struct deflate_priv *p = ctx->priv;

	libdeflate_free_compressor(p->c);
	libdeflate_free_decompressor(p->d);
	free(p);
}

static int deflate_init(struct zf_codec_ctx *ctx)
{
	struct deflate_priv *p = calloc(1, sizeof(*p));

	RETURN_IF(!p, -ENOMEM);
	ctx->priv = p;
	p->c = libdeflate_alloc_compressor(ctx->level);
	p->d = libdeflate_alloc_decompressor();
	if (!p->c || !p->d) {
		deflate_fini(ctx);
		return -ENOMEM;
	}
	return 0;
}

static int deflate_compress(struct zf_codec_ctx *ctx, const void *src, int src_len, void *dst,
			    int dst_cap)
{
	struct deflate_priv *p = ctx->priv;
	const size_t n =
		libdeflate_deflate_compress(p->c, src, (size_t)src_len, dst, (size_t)dst_cap);

	return n ? (int)n : -E2BIG;
}

static int deflate_decompress(struct zf_codec_ctx *ctx, const void *src, int src_len, void *dst,
			      int dst_len)
{
	struct deflate_priv *p = ctx->priv;
	size_t in_used = 0;
	const enum libdeflate_result r = libdeflate_deflate_decompress_ex(
		p->d, src, (size_t)src_len, dst, (size_t)dst_len, &in_used, NULL);

	return r == LIBDEFLATE_SUCCESS && in_used == (size_t)src_len ? dst_len : -EBADMSG;
}

const struct codec_ops codec_deflate_ops = {
	.algorithm = "deflate",
	.has_level = 1,
	.level_min = 0,
	.level_max = 12,
	.level_default = 6,
	.init = deflate_init,
	.fini = deflate_fini,
	.compress = deflate_compress,
	.decompress = deflate_decompress,
};
