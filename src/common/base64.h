/*
 * Base64 (RFC 4648 §4), the one encoder and decoder of the tree: the core
 * library, so the static guest agent, the CLI and airlockd share it.
 */
#ifndef AIRLOCK_BASE64_H
#define AIRLOCK_BASE64_H

#include <stddef.h>
#include <stdint.h>

/* Encoded length of n bytes, padding included, without the NUL. */
#define BASE64_LEN(n)		(((n) + 2) / 3 * 4)
/* At most this many bytes decode from len characters. */
#define BASE64_DECODED_MAX(len)	((len) / 4 * 3 + 3)

/* out holds BASE64_LEN(n) + 1 bytes; padded, NUL-terminated. */
void base64_encode(const void *in, size_t n, char *out);
/* The same into a new string (malloc'd: NULL when out of memory). */
char *base64_encode_alloc(const void *in, size_t n);
/*
 * Decode len characters into out (BASE64_DECODED_MAX(len) bytes). The
 * standard and the URL-safe alphabets are accepted, padding is optional,
 * but a '=' is only allowed where it completes the last group, and a group
 * of one character is refused: -1 on anything else.
 */
int base64_decode(const char *in, size_t len, uint8_t *out, size_t *outlen);
/* The same into a new buffer (*out malloc'd); -1 on bad input or no memory. */
int base64_decode_alloc(const char *in, size_t len, uint8_t **out, size_t *outlen);

#endif
