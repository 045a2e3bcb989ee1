/*
 * Allocation, cause strings and small filesystem helpers: the core library,
 * linked by host binaries and the static guest agent alike, so nothing here
 * may need more than libc (digests are in digest.h, on OpenSSL).
 */
#ifndef AIRLOCK_UTIL_H
#define AIRLOCK_UTIL_H

#include <stdarg.h>
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
int xvasprintf(char **ret, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/*
 * The same policy for a library constructor that fails only when memory is
 * out (event_new, event_base_new, evbuffer_new, json_object): p, or fatal
 * naming what.
 */
void *xnonnull(void *p, const char *what);

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
/* len random lowercase alphanumerics (out holds len+1), uniform, from getrandom(). */
void random_id(char *out, size_t len);
/* 1 when a and b hold the same n bytes; the time does not depend on where they differ. */
int timingsafe_eq(const void *a, const void *b, size_t n);
/* Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlongs,
 * surrogates or code points past U+10FFFF), 1 for any ASCII byte, or 0. */
size_t utf8_seq(const unsigned char *s, size_t len);
/*
 * Bytes from an untrusted source (a guest's console, an agent's error text)
 * as valid UTF-8 fit for JSON and logs: well-formed UTF-8 is kept; every
 * other byte, controls other than \n and \t, and DEL become \xNN; a
 * backslash becomes \\, so the result reads back unambiguously. At most
 * max output bytes (0: no limit), never cutting an escape or a character.
 */
char *utf8_escape(const char *s, size_t len, size_t max);
/* For a terminal (the console): C1 controls are escaped too, ... */
#define UTF8_ESC_C1	0x1
/* ... and CR LF is folded to LF (a serial line's newline). */
#define UTF8_ESC_CRLF	0x2
/* utf8_escape with UTF8_ESC_* flags; *outlen (if not NULL) = strlen of the result. */
char *utf8_escape_ext(const char *s, size_t len, size_t max, int flags, size_t *outlen);
/* 1 when s[0..len) is well-formed UTF-8 (what jansson accepts), else 0. */
int utf8_valid(const char *s, size_t len);
/* 1 when word is one of the comma-separated items of list ("running,paused"). */
int csv_has(const char *list, const char *word);
/* CLOCK_MONOTONIC, the one clock for deadlines, token buckets, expiries, durations. */
uint64_t monotonic_ns(void);
uint64_t monotonic_ms(void);
double monotonic_secs(void);	/* for durations people read ("ready in 1.2s") */
/*
 * Phase timings (boot, restore, snapshot, claim) are a few ms, so they are
 * kept in fractions of a ms: t0 = monotonic_msf(), later monotonic_ms_since(t0).
 */
double monotonic_msf(void);
double monotonic_ms_since(double t0);
/*
 * 1 when the NUL-terminated strings are equal. For secrets (tokens, keys,
 * signatures): timingsafe_eq over the bytes, so the time never depends on
 * where given first differs (only on whether its length is the secret's).
 */
int ct_streq(const char *given, const char *secret);

#endif
