/* Running helper programs (debootstrap, mkfs.ext4, ...) from an argv, never a shell. */
#ifndef AIRLOCK_SUBPROC_H
#define AIRLOCK_SUBPROC_H

#include <stddef.h>

#define SUBPROC_TAIL_MAX	8192	/* bytes of output kept for error messages */

enum subproc_output {
	SUBPROC_OUTPUT_TAIL,	/* capture stdout+stderr; only its tail is shown on failure */
	SUBPROC_OUTPUT_INHERIT,	/* the child writes to our stdout/stderr */
};

/*
 * Run argv[0] (searched in PATH) and wait for it. Returns 0 when it exits 0;
 * otherwise -1 with a cause naming the program, its status and, in TAIL
 * mode, the last lines it printed. envp NULL keeps the current environment.
 */
int subproc_run(const char *const argv[], char *const envp[], enum subproc_output mode,
    char **cause);

/* Like subproc_run in TAIL mode but returns the whole stdout (capped at max). */
int subproc_capture(const char *const argv[], size_t max, char **out, char **cause);

#endif
