/* Base64 encoding and decoding (see base64.h). */
#include <stdlib.h>

#include "common/base64.h"

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void
base64_encode(const void *in, size_t n, char *out)
{
	const uint8_t *p = in;
	size_t i;
	uint32_t v;

	for (i = 0; i + 2 < n; i += 3) {
		v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		*out++ = b64_alphabet[v >> 18];
		*out++ = b64_alphabet[(v >> 12) & 63];
		*out++ = b64_alphabet[(v >> 6) & 63];
		*out++ = b64_alphabet[v & 63];
	}
	if (i < n) {
		v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
		*out++ = b64_alphabet[v >> 18];
		*out++ = b64_alphabet[(v >> 12) & 63];
		*out++ = i + 1 < n ? b64_alphabet[(v >> 6) & 63] : '=';
		*out++ = '=';
	}
	*out = '\0';
}

char *
base64_encode_alloc(const void *in, size_t n)
{
	char *out;

	if (n > (SIZE_MAX - 1) / 4 * 3 - 2 || (out = malloc(BASE64_LEN(n) + 1)) == NULL)
		return NULL;
	base64_encode(in, n, out);
	return out;
}

/* The 6-bit value of c in either alphabet, or -1. */
static int
b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

int
base64_decode(const char *in, size_t len, uint8_t *out, size_t *outlen)
{
	size_t i, o = 0, ngroup = 0, pad = 0;
	uint32_t acc = 0;
	int v;

	*outlen = 0;
	/* Padding: one or two '=' at the very end, completing a group of 4. */
	while (pad < len && pad < 2 && in[len - 1 - pad] == '=')
		pad++;
	if (pad > 0 && len % 4 != 0)
		return -1;
	len -= pad;
	for (i = 0; i < len; i++) {
		if ((v = b64_value((unsigned char)in[i])) < 0)
			return -1;
		acc = acc << 6 | (uint32_t)v;
		if (++ngroup == 4) {
			out[o++] = (uint8_t)(acc >> 16);
			out[o++] = (uint8_t)(acc >> 8);
			out[o++] = (uint8_t)acc;
			acc = 0;
			ngroup = 0;
		}
	}
	/* A last group of 2 or 3 characters holds 1 or 2 bytes; 1 holds none. */
	if (ngroup == 1 || (pad > 0 && ngroup + pad != 4))
		return -1;
	if (ngroup == 2)
		out[o++] = (uint8_t)(acc >> 4);
	else if (ngroup == 3) {
		out[o++] = (uint8_t)(acc >> 10);
		out[o++] = (uint8_t)(acc >> 2);
	}
	*outlen = o;
	return 0;
}

int
base64_decode_alloc(const char *in, size_t len, uint8_t **out, size_t *outlen)
{
	uint8_t *buf;

	if ((buf = malloc(BASE64_DECODED_MAX(len))) == NULL)
		return -1;
	if (base64_decode(in, len, buf, outlen) == -1) {
		free(buf);
		return -1;
	}
	*out = buf;
	return 0;
}
