/*
 * testutil.h - page generators shared by the unit tests: zero, same-filled, text-like,
 * half text/half random, random, and a deterministic PRNG so that failures repeat.
 */
#ifndef ZF_TESTUTIL_H
#define ZF_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum pattern { PAT_ZERO, PAT_SAME, PAT_TEXT, PAT_HALF, PAT_RANDOM, PAT_COUNT };

static const char *const pattern_names[PAT_COUNT] = { "zero", "same-filled", "text", "half",
						      "random" };

static inline uint64_t test_rand(uint64_t *s)
{
	/* xorshift64* */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

static inline void fill_random(uint8_t *buf, size_t len, uint64_t seed)
{
	uint64_t s = seed | 1;

	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(test_rand(&s) >> 56);
}

/* Words with a skewed choice, numbers and punctuation: compresses like program data. */
static inline void fill_text(uint8_t *buf, size_t len, uint64_t seed)
{
	static const char *const words[] = { "the",   "page", "folio", "zswap", "zram",
					     "store", "unit", "key",   "value", "{\"id\":",
					     "null",  "true", "\n",    "    ",	"return" };
	uint64_t s = seed | 1;
	size_t i = 0;

	while (i < len) {
		const uint64_t r = test_rand(&s);
		const char *w = words[(r % 7) * (r % 3) % (sizeof(words) / sizeof(words[0]))];
		size_t n = strlen(w);

		if (r % 5 == 0) {
			char num[24];

			n = (size_t)snprintf(num, sizeof(num), "%llu ",
					     (unsigned long long)(r >> 40));
			if (n > len - i)
				n = len - i;
			memcpy(buf + i, num, n);
		} else {
			if (n > len - i)
				n = len - i;
			memcpy(buf + i, w, n);
		}
		i += n;
		if (i < len)
			buf[i++] = ' ';
	}
}

static inline void fill_pattern(uint8_t *buf, size_t len, enum pattern p, uint64_t seed)
{
	const uint64_t v = 0x0123456789abcdefULL;

	switch (p) {
	case PAT_ZERO:
		memset(buf, 0, len);
		break;
	case PAT_SAME:
		for (size_t i = 0; i + 8 <= len; i += 8)
			memcpy(buf + i, &v, 8);
		break;
	case PAT_TEXT:
		fill_text(buf, len, seed);
		break;
	case PAT_HALF:
		fill_text(buf, len / 2, seed);
		fill_random(buf + len / 2, len - len / 2, seed);
		break;
	default:
		fill_random(buf, len, seed);
		break;
	}
}

#endif /* ZF_TESTUTIL_H */
