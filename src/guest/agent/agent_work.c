/*
 * Blocking guest filesystem work off the event loop. The agent is one
 * thread serving every stream of the sandbox: a remove of a large tree,
 * a listing of 100000 entries, an fsync of a 100 MB upload or any call on
 * a filesystem that stops answering would otherwise freeze exec, health
 * and every other call until it returned.
 *
 * Each job runs in a thread of its own (at most AGENT_WORK_MAX at once:
 * one stuck path cannot queue the others behind it). The thread runs only
 * plain syscalls on memory the job owns; it never touches libevent, an
 * http_conn or agent globals. When it returns it writes the job's pointer
 * to a pipe that the loop reads. The deadline is a loop timer: if it fires
 * first, done(arg, 1) answers the caller at once and the thread's result is
 * dropped when it eventually comes; arg is released only after both.
 *
 * The loop thread still forks commands (agent_proc.c) while jobs run: glibc
 * resets malloc's and stdio's locks in the child, and the child only
 * execs.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "guest/agent/agent.h"

struct work {
	work_fn			*w_fn;
	work_done_fn		*w_done;
	work_release_fn		*w_release;
	void			*w_arg;
	struct event		*w_deadline;
	int			 w_reported;	/* done() was called */
};

static int work_pipe[2] = { -1, -1 };
static struct event *work_ev;
static unsigned work_running;		/* threads not yet reaped by the loop */

/* The job's thread finished (or the deadline answered first) and is reported once. */
static void
work_report(struct work *w, int late)
{
	if (w->w_reported)
		return;
	w->w_reported = 1;
	if (w->w_deadline != NULL)
		evtimer_del(w->w_deadline);
	w->w_done(w->w_arg, late);
}

static void
work_finished(evutil_socket_t fd, short what, void *arg)
{
	struct work *w;
	ssize_t n;

	for (;;) {
		n = read(fd, &w, sizeof(w));
		if (n != (ssize_t)sizeof(w))
			return;	/* EAGAIN: drained (pointer writes are atomic, < PIPE_BUF) */
		work_running--;
		work_report(w, 0);
		if (w->w_deadline != NULL)
			event_free(w->w_deadline);
		if (w->w_release != NULL)
			w->w_release(w->w_arg);
		free(w);
	}
}

static void
work_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct work *w = arg;

	/* The thread is still in its syscall; the caller gets its answer now. */
	work_report(w, 1);
}

static void *
work_thread(void *arg)
{
	struct work *w = arg;
	ssize_t n;

	w->w_fn(w->w_arg);
	/* Blocking write: the loop drains the pipe, so it cannot stay full. */
	do
		n = write(work_pipe[1], &w, sizeof(w));
	while (n == -1 && errno == EINTR);
	return NULL;
}

static int
work_init(void)
{
	if (work_ev != NULL)
		return 0;
	if (pipe2(work_pipe, O_CLOEXEC) == -1)
		return -1;
	if (fcntl(work_pipe[0], F_SETFL, O_NONBLOCK) == -1)
		return -1;
	/* Jansson seeds its hash on first use; do it here, never in two threads at once. */
	json_object_seed(0);
	work_ev = event_new(ag.ag_base, work_pipe[0], EV_READ | EV_PERSIST, work_finished, NULL);
	if (work_ev == NULL || event_add(work_ev, NULL) == -1)
		return -1;
	return 0;
}

int
work_run(work_fn *fn, work_done_fn *done, work_release_fn *release, void *arg, int deadline_ms,
    const char **why)
{
	struct timeval tv = { deadline_ms / 1000, (deadline_ms % 1000) * 1000 };
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t t;
	struct work *w;
	int rc;

	if (work_init() == -1) {
		*why = "cannot set up the worker pipe";
		return -1;
	}
	if (work_running >= AGENT_WORK_MAX) {
		*why = "too many file operations in progress";
		return -1;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL) {
		*why = "out of memory";
		return -1;
	}
	w->w_fn = fn;
	w->w_done = done;
	w->w_release = release;
	w->w_arg = arg;
	if (deadline_ms > 0) {
		if ((w->w_deadline = evtimer_new(ag.ag_base, work_timeout, w)) == NULL) {
			free(w);
			*why = "out of memory";
			return -1;
		}
		evtimer_add(w->w_deadline, &tv);
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, AGENT_WORK_STACK);
	/* Signals stay with the loop's thread (libevent's signal pipe, EINTR there). */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&t, &attr, work_thread, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		if (w->w_deadline != NULL)
			event_free(w->w_deadline);
		free(w);
		*why = "cannot start a worker thread";
		return -1;
	}
	work_running++;
	return 0;
}
