/* Copy-on-write copies (FICLONE) and the check that a directory supports them. */
#ifndef AIRLOCK_REFLINK_H
#define AIRLOCK_REFLINK_H

/* Reflink src to dst (created 0600, must not exist). No fallback to a full copy. */
int reflink_copy(const char *src, const char *dst, char **cause);
/*
 * The same from an open, already checked file in (named src in causes),
 * which stays open. On failure dst is gone and errno says why (ENOSPC).
 */
int reflink_fd(int in, const char *src, const char *dst, char **cause);
/*
 * The one FICLONE call: out's contents become in's (both open, both stay
 * open; src and dst name them in causes). errno says why on failure.
 */
int reflink_fds(int in, int out, const char *src, const char *dst, char **cause);
/* 0 when files in dir can be reflinked; -1 with a cause otherwise. */
int reflink_supported(const char *dir, char **cause);

#endif
