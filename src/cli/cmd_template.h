/* Shared by the template commands: progress lines, remote build streams. */
#ifndef AIRLOCK_CMD_TEMPLATE_H
#define AIRLOCK_CMD_TEMPLATE_H

#include <stddef.h>
#include <stdio.h>

/* Progress lines, the same for local and remote builds. */
struct build_progress {
	FILE	*out;		/* stdout, or stderr when stdout carries --json */
	double	 start, step_start;
	int	 step;
};

void build_progress_init(struct build_progress *p, int json_out);
void build_progress(void *arg, int step, int nsteps, const char *msg);
void build_progress_end(struct build_progress *p, const char *name, const char *where);
int template_local_done(struct build_progress *p, const char *name, int json_out);
int build_failed(const char *name, const char *why);
/* Local unless root talking to a daemon on this host (see cmd_template.c). */
int template_build_goes_remote(void);
/*
 * Send a build request (body text/len, or upload_fd streamed when >= 0) and
 * render the daemon's SSE progress; CLI_EXIT_*.
 */
/* refusal_hint: a line printed under a refusal, or NULL. */
int template_remote_stream(const char *name, const char *from, const char *method,
    const char *path, const char *ctype, const char *text, size_t len, int upload_fd,
    int json_out, const char *refusal_hint);

/* Where a build or import runs, and how it reports: the options both take. */
struct template_where {
	int	local;		/* --local */
	int	remote;		/* --remote */
	int	json;		/* --json */
};
#define TEMPLATE_WHERE_LONGOPTS \
	{ "local", no_argument, NULL, 'L' }, \
	{ "remote", no_argument, NULL, 'R' }, \
	{ "json", no_argument, NULL, 'j' }
/* Record getopt's ch in w: 1 when it was one of TEMPLATE_WHERE_LONGOPTS, else 0. */
int template_where_opt(int ch, struct template_where *w);

extern const char template_import_usage[];
int template_import_cmd(int argc, char **argv);

#endif
