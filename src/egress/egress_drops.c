/* Island drop counters read on a worker thread (see egress_drops.h). */
#include <sys/queue.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "common/log.h"
#include "common/util.h"
#include "egress/egress_drops.h"
#include "net/net_drops.h"
#include "net/net_island.h"

struct drops_job {
	TAILQ_ENTRY(drops_job)	 entry;
	char			*id;
	int			 nsfd;
	int			 final;		/* the island goes: forget its last read after */
	int			 ok;
	struct net_drops	 d;
	char			*cause;
};
TAILQ_HEAD(drops_jobs, drops_job);

struct egress_drops {
	struct event_base	*base;
	egress_drops_fn		 fn;
	void			*arg;
	pthread_t		 thread;
	pthread_mutex_t		 mtx;
	pthread_cond_t		 cond;
	struct drops_jobs	 todo, done;	/* under mtx */
	int			 stop;		/* under mtx */
	int			 queued;	/* loop only: jobs not yet delivered */
	int			 pipe[2];	/* the worker writes a byte per finished job */
	struct event		*ev;
	json_t			*last;		/* loop only: id → ms of its previous read */
};

static void
drops_job_free(struct drops_job *j)
{
	if (j->nsfd != -1)
		close(j->nsfd);
	free(j->id);
	free(j->cause);
	free(j);
}

static void *
drops_worker(void *arg)
{
	struct egress_drops *x = arg;
	struct drops_job *j;
	char b = 0;

	pthread_mutex_lock(&x->mtx);
	for (;;) {
		while (!x->stop && TAILQ_EMPTY(&x->todo))
			pthread_cond_wait(&x->cond, &x->mtx);
		if (x->stop)
			break;
		j = TAILQ_FIRST(&x->todo);
		TAILQ_REMOVE(&x->todo, j, entry);
		pthread_mutex_unlock(&x->mtx);
		j->ok = net_island_drops(j->nsfd, &j->d, &j->cause) == 0;
		close(j->nsfd);
		j->nsfd = -1;
		pthread_mutex_lock(&x->mtx);
		TAILQ_INSERT_TAIL(&x->done, j, entry);
		/* The pipe never fills: one byte per job, drained by the loop. */
		if (write(x->pipe[1], &b, 1) == -1 && errno != EAGAIN)
			log_warn("island drops: wake the loop");
	}
	pthread_mutex_unlock(&x->mtx);
	return NULL;
}

static void
drops_ready(evutil_socket_t fd, short what, void *arg)
{
	struct egress_drops *x = arg;
	struct drops_jobs got = TAILQ_HEAD_INITIALIZER(got);
	struct drops_job *j;
	char buf[256];
	uint64_t now = monotonic_ms();

	while (read(fd, buf, sizeof buf) > 0)
		;
	pthread_mutex_lock(&x->mtx);
	TAILQ_CONCAT(&got, &x->done, entry);
	pthread_mutex_unlock(&x->mtx);
	while ((j = TAILQ_FIRST(&got)) != NULL) {
		json_t *prev = json_object_get(x->last, j->id);
		uint64_t since = prev != NULL ? (uint64_t)json_integer_value(prev) : now;

		TAILQ_REMOVE(&got, j, entry);
		x->queued--;
		if (!j->ok)
			log_debug("island %s: drop counters: %s", j->id, j->cause);
		else {
			json_object_set_new(x->last, j->id, json_integer((json_int_t)now));
			if (net_drops_total(&j->d) > 0)
				x->fn(x->arg, j->id, &j->d, now - since);
		}
		if (j->final)
			json_object_del(x->last, j->id);
		drops_job_free(j);
	}
}

struct egress_drops *
egress_drops_new(struct event_base *base, egress_drops_fn fn, void *arg)
{
	struct egress_drops *x = xcalloc(1, sizeof *x);

	x->base = base;
	x->fn = fn;
	x->arg = arg;
	x->last = json_object();
	TAILQ_INIT(&x->todo);
	TAILQ_INIT(&x->done);
	pthread_mutex_init(&x->mtx, NULL);
	pthread_cond_init(&x->cond, NULL);
	if (pipe2(x->pipe, O_CLOEXEC | O_NONBLOCK) == -1 ||
	    pthread_create(&x->thread, NULL, drops_worker, x) != 0) {
		/* Not fatal: the audit then lacks the island's drops, and says so once. */
		log_warnx("island drops: no reader thread: %s", strerror(errno));
		if (x->pipe[0] > 0) {
			close(x->pipe[0]);
			close(x->pipe[1]);
		}
		x->pipe[0] = x->pipe[1] = -1;
		return x;
	}
	x->ev = event_new(base, x->pipe[0], EV_READ | EV_PERSIST, drops_ready, x);
	event_add(x->ev, NULL);
	return x;
}

void
egress_drops_read(struct egress_drops *x, const char *id, int final)
{
	struct drops_job *j;
	char *path;
	int fd;

	if (x->ev == NULL)
		return;
	path = net_island_path(id);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	free(path);
	if (fd == -1) {
		json_object_del(x->last, id);	/* gone: the next island of that name starts over */
		return;
	}
	if (json_object_get(x->last, id) == NULL)
		json_object_set_new(x->last, id, json_integer((json_int_t)monotonic_ms()));
	j = xcalloc(1, sizeof *j);
	j->id = xstrdup(id);
	j->nsfd = fd;
	j->final = final;
	x->queued++;
	pthread_mutex_lock(&x->mtx);
	TAILQ_INSERT_TAIL(&x->todo, j, entry);
	pthread_cond_signal(&x->cond);
	pthread_mutex_unlock(&x->mtx);
}

int
egress_drops_busy(struct egress_drops *x)
{
	return x->queued > 0;
}

void
egress_drops_free(struct egress_drops *x)
{
	struct drops_job *j;

	if (x == NULL)
		return;
	if (x->ev != NULL) {
		pthread_mutex_lock(&x->mtx);
		x->stop = 1;
		pthread_cond_signal(&x->cond);
		pthread_mutex_unlock(&x->mtx);
		pthread_join(x->thread, NULL);
		event_free(x->ev);
		close(x->pipe[0]);
		close(x->pipe[1]);
	}
	while ((j = TAILQ_FIRST(&x->todo)) != NULL) {
		TAILQ_REMOVE(&x->todo, j, entry);
		drops_job_free(j);
	}
	while ((j = TAILQ_FIRST(&x->done)) != NULL) {
		TAILQ_REMOVE(&x->done, j, entry);
		drops_job_free(j);
	}
	pthread_cond_destroy(&x->cond);
	pthread_mutex_destroy(&x->mtx);
	json_decref(x->last);
	free(x);
}
