/* Allocation, cause strings and small filesystem helpers shared by host code. */
#ifndef AIRLOCK_UTIL_H
#define AIRLOCK_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Allocation failure is fatal in host tools: there is no sane partial state. */
void *xmalloc(size_t size);
void *xcalloc(size_t nmemb, size_t size);
void *xreallocarray(void *ptr, size_t nmemb, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
int xasprintf(char **ret, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Cause strings (tmux style): a failing call stores a malloc'd message in
 * *cause saying what failed; the caller adds context and frees it.
 * cause may be NULL when the caller does not care.
 */
void cause_set(char **cause, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefix an existing cause: "ctx: old cause". */
void cause_wrap(char **cause, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int mkdir_p(const char *path, mode_t mode, char **cause);
/* Read a whole file (NUL-terminated); caps at maxlen bytes. */
int read_file(const char *path, size_t maxlen, char **out, size_t *outlen, char **cause);
/* Write via a temporary file + fsync + rename so readers never see half a file. */
int write_file_atomic(const char *path, const void *data, size_t len, mode_t mode, char **cause);
int path_exists(const char *path);
/* Remove a tree (no symlink following); a missing path is not an error. */
int remove_tree(const char *path, char **cause);
/* Hex SHA-256 of a buffer into out[65]. */
void sha256_hex(const void *data, size_t len, char out[65]);
/* len random lowercase alphanumerics (out holds len+1), uniform, from getrandom(). */
void random_id(char *out, size_t len);
int sha256_file_hex(const char *path, char out[65], char **cause);
/*
 * Bytes from an untrusted source (a guest's console, an agent's error text)
 * as valid UTF-8 fit for JSON and logs: well-formed UTF-8 is kept; every
 * other byte, controls other than \n and \t, and DEL become \xNN; a
 * backslash becomes \\, so the result reads back unambiguously. At most
 * max output bytes (0: no limit), never cutting an escape or a character.
 */
char *utf8_escape(const char *s, size_t len, size_t max);
/* 1 when s[0..len) is well-formed UTF-8 (what jansson accepts), else 0. */
int utf8_valid(const char *s, size_t len);
/* A copy of s with every byte that is not part of valid UTF-8 replaced by '?'. */
char *utf8_sanitize(const char *s);
/* Milliseconds on CLOCK_MONOTONIC: deadlines, token buckets, expiries. */
uint64_t monotonic_ms(void);

#endif
