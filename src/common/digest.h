/* SHA-256 digests for host code (OpenSSL): not in the core the guest agent links. */
#ifndef AIRLOCK_DIGEST_H
#define AIRLOCK_DIGEST_H

#include <stddef.h>

/* Hex SHA-256 of a buffer into out[65]. */
void sha256_hex(const void *data, size_t len, char out[65]);
/* Hex SHA-256 of a file's contents into out[65]; -1 with a cause. */
int sha256_file_hex(const char *path, char out[65], char **cause);

/* Incremental SHA-256; _end writes the hex digest (out may be NULL) and frees. */
struct sha256_stream;
struct sha256_stream *sha256_stream_new(void);
void sha256_stream_update(struct sha256_stream *s, const void *data, size_t len);
void sha256_stream_end(struct sha256_stream *s, char out[65]);

#endif
