/*
 * The retained serial console of one sandbox, on disk: two generations,
 * console.log (current) and console.log.1 (previous), together never more
 * than the cap (each at most half of it). The bytes are the guest's own,
 * NULs and escape sequences included; bytes that could not be kept (a write
 * failed: disk full, I/O error) are counted and replaced by one line
 * "[airlock: N bytes dropped]" as soon as writing works again.
 *
 * Written only by airlockd's console reader (vm_console.c), on its event
 * loop: every call does bounded work (one write per chunk, a rename and an
 * open per rotation), never waits for the guest or another process. Read
 * back by GET .../logs, which shows it through console_escape.
 */
#ifndef AIRLOCK_CONSOLE_FILE_H
#define AIRLOCK_CONSOLE_FILE_H

#include <stddef.h>
#include <stdint.h>

#define CONSOLE_FILE_MIN	8192	/* smallest cap: two generations of 4 KiB */

struct console_file {
	char		*cf_path;	/* console.log */
	char		*cf_old;	/* console.log.1 */
	int		 cf_fd;		/* -1: not open (reopened on the next write) */
	size_t		 cf_size;	/* bytes in the current generation */
	size_t		 cf_genmax;	/* cap / 2 */
	uint64_t	 cf_pending;	/* dropped since the last marker was written */
	uint64_t	 cf_dropped;	/* dropped in all */
};

/*
 * Open (append) the current generation of path; a cap below
 * CONSOLE_FILE_MIN is raised to it. When the file cannot be opened, writes
 * are counted as dropped and the open is retried on each write.
 */
void console_file_open(struct console_file *cf, const char *path, size_t cap);

/* Keep len bytes, rotating as needed; what cannot be written is counted. */
void console_file_write(struct console_file *cf, const char *buf, size_t len);

void console_file_close(struct console_file *cf);

/*
 * The last tail bytes of the retained console (previous generation, then
 * current), malloc'd, NUL-terminated for convenience, length in *len.
 * Missing files read as empty.
 */
char *console_file_read(const char *path, size_t tail, size_t *len);

/* Copy the retained console (at most cap bytes) to dst, atomically. */
int console_file_save(const char *path, const char *dst, size_t cap, char **cause);

/* Remove both generations. */
void console_file_remove(const char *path);

/*
 * Console bytes as text safe for a terminal and valid UTF-8: "\r\n" becomes
 * "\n"; "\n", "\t" and printable UTF-8 stay; a backslash becomes "\\";
 * every other byte (NUL, ESC and the other C0 controls, DEL, C1 controls,
 * bytes that are not valid UTF-8) becomes "\xNN". Malloc'd, NUL-terminated.
 */
char *console_escape(const char *buf, size_t len, size_t *outlen);

#endif
