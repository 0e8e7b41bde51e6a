/*
 * zstd.c - Zstandard (libzstd), levels -131072..22.
 *
 * A unit is compressed as one frame without the content size, checksum or dictionary
 * id: the caller keeps the length, and the store keeps its own checksum, so those
 * header bytes would be pure overhead. The parameters are set once on the context;
 * ZSTD_compress2() sizes the window to the input. Decompression demands exactly the
 * expected length.
 *
 * The frames keep their 4-byte magic number. The magicless format would save those 4
 * bytes (0.5% of a 4 KiB page at zstd:1), but libzstd before 1.5.5 - Debian 12 has
 * 1.5.4 - reads past the end of magicless input when 1 to 3 bytes are left after a
 * frame (fixed upstream by "fix potential over-reads", zstd PR 3592); our fuzzer found
 * it (tests/fuzz/corpus/zstd/regress-magicless-*). Reading past an untrusted buffer is
 * not a price worth 0.5%.
 */
#include <stdlib.h>

#include <zstd.h>
#include <zstd_errors.h>

#include "codec.h"

struct zstd_priv {
	ZSTD_CCtx *cctx;
	ZSTD_DCtx *dctx;
};

static void zstd_fini(struct zf_codec_ctx *ctx)
{
	struct zstd_priv *p = ctx->priv;

	ZSTD_freeCCtx(p->cctx);
	ZSTD_freeDCtx(p->dctx);
	free(p);
}

static int zstd_init(struct zf_codec_ctx *ctx)
{
	struct zstd_priv *p = calloc(1, sizeof(*p));
	size_t err = 0;

	RETURN_IF(!p, -ENOMEM);
	ctx->priv = p;
	p->cctx = ZSTD_createCCtx();
	p->dctx = ZSTD_createDCtx();
	if (!p->cctx || !p->dctx) {
		zstd_fini(ctx);
		return -ENOMEM;
	}
	err |= ZSTD_isError(ZSTD_CCtx_setParameter(p->cctx, ZSTD_c_compressionLevel, ctx->level));
	err |= ZSTD_isError(ZSTD_CCtx_setParameter(p->cctx, ZSTD_c_contentSizeFlag, 0));
	err |= ZSTD_isError(ZSTD_CCtx_setParameter(p->cctx, ZSTD_c_checksumFlag, 0));
	err |= ZSTD_isError(ZSTD_CCtx_setParameter(p->cctx, ZSTD_c_dictIDFlag, 0));
	if (err) {
		zstd_fini(ctx);
		return -EINVAL;
	}
	return 0;
}

static int zstd_compress(struct zf_codec_ctx *ctx, const void *src, int src_len, void *dst,
			 int dst_cap)
{
	struct zstd_priv *p = ctx->priv;
	const size_t n = ZSTD_compress2(p->cctx, dst, (size_t)dst_cap, src, (size_t)src_len);

	if (!ZSTD_isError(n))
		return (int)n;
	if (ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation)
		return -ENOMEM;
	/* dstSize_tooSmall, and nothing else is possible with valid arguments. */
	return -E2BIG;
}

static uint32_t read_le32(const void *p)
{
	const uint8_t *b = p;

	return b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static int zstd_decompress(struct zf_codec_ctx *ctx, const void *src, int src_len, void *dst,
			   int dst_len)
{
	struct zstd_priv *p = ctx->priv;
	size_t n;

	/*
	 * Exactly one frame, of the kind we write: no skippable frames and none of the legacy
	 * formats Debian's libzstd still decodes, so untrusted input meets only the main
	 * decoder, and trailing bytes are refused.
	 */
	RETURN_IF(src_len < 4 || read_le32(src) != ZSTD_MAGICNUMBER, -EBADMSG);
	RETURN_IF(ZSTD_findFrameCompressedSize(src, (size_t)src_len) != (size_t)src_len, -EBADMSG);
	n = ZSTD_decompressDCtx(p->dctx, dst, (size_t)dst_len, src, (size_t)src_len);
	if (ZSTD_isError(n) && ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation)
		return -ENOMEM;
	return !ZSTD_isError(n) && n == (size_t)dst_len ? dst_len : -EBADMSG;
}

const struct codec_ops codec_zstd_ops = {
	.algorithm = "zstd",
	.has_level = 1,
	.level_min = -131072, /* ZSTD_minCLevel() of libzstd >= 1.4 */
	.level_max = 22,
	.level_default = ZSTD_CLEVEL_DEFAULT,
	.init = zstd_init,
	.fini = zstd_fini,
	.compress = zstd_compress,
	.decompress = zstd_decompress,
};
