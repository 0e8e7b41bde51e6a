/*
 * lzo.c - LZO1X-1 (liblzo2), the codec zram used before lzo-rle.
 *
 * lzo1x_1_compress() takes no output bound: it may write up to len + len/16 + 67 bytes.
 * When the caller's bound is at least that, it compresses in place; otherwise it
 * compresses into the context's scratch buffer and copies out only if the result fits.
 * The safe decompressor checks both input and output bounds and reports input left
 * over, so exact-length decoding is one comparison.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <lzo1x.h>

#include "codec.h"

#define LZO_BOUND(n) ((n) + (n) / 16 + 64 + 3)

struct lzo_priv {
	void *scratch; /* LZO_BOUND(ZF_UNIT_MAX) bytes, made on first need */
	uint8_t wrkmem[LZO1X_1_MEM_COMPRESS];
};

static int lzo_init_status = LZO_E_ERROR;

static void lzo_global_init(void)
{
	lzo_init_status = lzo_init();
}

static int lzo_ctx_init(struct zf_codec_ctx *ctx)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct lzo_priv *p;

	pthread_once(&once, lzo_global_init);
	RETURN_IF(lzo_init_status != LZO_E_OK, -ENOTSUP);
	p = calloc(1, sizeof(*p));
	RETURN_IF(!p, -ENOMEM);
	ctx->priv = p;
	return 0;
}

static void lzo_ctx_fini(struct zf_codec_ctx *ctx)
{
	struct lzo_priv *p = ctx->priv;

	free(p->scratch);
	free(p);
}

static int lzo_compress(struct zf_codec_ctx *ctx, const void *src, int src_len, void *dst,
			int dst_cap)
{
	struct lzo_priv *p = ctx->priv;
	const int direct = dst_cap >= LZO_BOUND(src_len);
	lzo_uint out_len = 0;

	if (!direct && !p->scratch) {
		p->scratch = malloc(LZO_BOUND(ZF_UNIT_MAX));
		RETURN_IF(!p->scratch, -ENOMEM);
	}
	if (lzo1x_1_compress(src, (lzo_uint)src_len, direct ? dst : p->scratch, &out_len,
			     p->wrkmem) != LZO_E_OK)
		return -EINVAL; /* documented as impossible */
	if (direct)
		return (int)out_len;
	RETURN_IF(out_len > (lzo_uint)dst_cap, -E2BIG);
	memcpy(dst, p->scratch, out_len);
	return (int)out_len;
}

static int lzo_decompress(struct zf_codec_ctx *ctx, const void *src, int src_len, void *dst,
			  int dst_len)
{
	lzo_uint out_len = (lzo_uint)dst_len;
	const int r = lzo1x_decompress_safe(src, (lzo_uint)src_len, dst, &out_len, NULL);

	(void)ctx;
	return r == LZO_E_OK && out_len == (lzo_uint)dst_len ? dst_len : -EBADMSG;
}

const struct codec_ops codec_lzo_ops = {
	.algorithm = "lzo",
	.init = lzo_ctx_init,
	.fini = lzo_ctx_fini,
	.compress = lzo_compress,
	.decompress = lzo_decompress,
};
