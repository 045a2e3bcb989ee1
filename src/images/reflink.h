/* Copy-on-write copies (FICLONE) and the check that a directory supports them. */
#ifndef AIRLOCK_REFLINK_H
#define AIRLOCK_REFLINK_H

/* Reflink src to dst (created 0600, must not exist). No fallback to a full copy. */
int reflink_copy(const char *src, const char *dst, char **cause);
/* 0 when files in dir can be reflinked; -1 with a cause otherwise. */
int reflink_supported(const char *dir, char **cause);

#endif
