/*
 * The agent's worker threads (agent_work.c) on a real event loop and real
 * threads: a job's result comes back on the loop; a job stuck past its
 * deadline is answered at the deadline while the loop keeps running, and
 * released only when its thread returns; the number of jobs is bounded.
 */
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "guest/agent/agent.h"
#include "t.h"

struct agent ag;
void alog(const char *fmt, ...) { (void)fmt; }

struct job {
	int	 sleep_ms;
	int	 gate;		/* read end to block on, or -1 */
	int	 result;	/* written by the thread */
	int	 done, late;
	double	 done_at, released_at;
	int	 released;
};

static int nreleased;
static double t0;

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

static void
job_run(void *arg)
{
	struct job *j = arg;
	char c;

	if (j->sleep_ms > 0)
		usleep((useconds_t)j->sleep_ms * 1000);
	if (j->gate != -1 && read(j->gate, &c, 1) != 1)
		j->result = -1;
	else
		j->result = 42;
}

static void
job_done(void *arg, int late)
{
	struct job *j = arg;

	j->done++;
	j->late = late;
	j->done_at = now_ms() - t0;
}

static void
job_release(void *arg)
{
	struct job *j = arg;

	j->released = 1;
	j->released_at = now_ms() - t0;
	nreleased++;
}

static int ticks;

static void
tick(evutil_socket_t fd, short what, void *arg)
{
	struct timeval tv = { 0, 20000 };

	ticks++;
	evtimer_add(arg, &tv);
}

/* Run the loop until n jobs were released (or 10 s passed). */
static void
loop_until(int n)
{
	struct timeval tv = { 0, 10000 };
	double end = now_ms() + 10000;

	while (nreleased < n && now_ms() < end) {
		event_base_loopexit(ag.ag_base, &tv);
		event_base_dispatch(ag.ag_base);
	}
}

static void
test_result(void)
{
	struct job j = { .gate = -1 };
	const char *why = NULL;

	nreleased = 0;
	t0 = now_ms();
	CHECK(work_run(job_run, job_done, job_release, &j, 5000, &why) == 0);
	loop_until(1);
	CHECK(j.done == 1 && j.late == 0 && j.released && j.result == 42);
}

static void
test_deadline(void)
{
	struct job j = { .sleep_ms = 1500, .gate = -1 };
	struct event *t = evtimer_new(ag.ag_base, tick, event_self_cbarg());
	struct timeval tv = { 0, 20000 };
	const char *why = NULL;

	evtimer_add(t, &tv);
	nreleased = 0;
	ticks = 0;
	t0 = now_ms();
	CHECK(work_run(job_run, job_done, job_release, &j, 100, &why) == 0);
	loop_until(1);
	/* Answered at the deadline, not when the thread came back. */
	CHECK(j.done == 1 && j.late == 1);
	CHECK(j.done_at >= 90 && j.done_at < 1000);
	CHECK(j.released && j.released_at >= 1400);
	/* The loop ran all along: a 20 ms timer kept firing while the job slept. */
	CHECK(ticks >= 30);
	fprintf(stderr, "   answered at %.0f ms, released at %.0f ms, %d ticks meanwhile\n",
	    j.done_at, j.released_at, ticks);
	event_free(t);
}

static void
test_bound(void)
{
	struct job jobs[AGENT_WORK_MAX + 1];
	const char *why = NULL;
	char go[AGENT_WORK_MAX];
	int gate[2], i, started = 0;

	CHECK(pipe(gate) == 0);
	nreleased = 0;
	t0 = now_ms();
	for (i = 0; i < AGENT_WORK_MAX; i++) {
		jobs[i] = (struct job){ .gate = gate[0] };
		started += work_run(job_run, job_done, job_release, &jobs[i], 0, &why) == 0;
	}
	CHECK(started == AGENT_WORK_MAX);
	jobs[i] = (struct job){ .gate = gate[0] };
	CHECK(work_run(job_run, job_done, job_release, &jobs[i], 0, &why) == -1);
	CHECK(why != NULL && strstr(why, "too many") != NULL);
	memset(go, 'g', sizeof(go));
	CHECK(write(gate[1], go, sizeof(go)) == (ssize_t)sizeof(go));
	loop_until(AGENT_WORK_MAX);
	CHECK(nreleased == AGENT_WORK_MAX);
	for (i = 0; i < AGENT_WORK_MAX; i++)
		CHECK(jobs[i].done == 1 && jobs[i].late == 0 && jobs[i].result == 42);
	close(gate[0]);
	close(gate[1]);
	/* Room again. */
	jobs[0] = (struct job){ .gate = -1 };
	CHECK(work_run(job_run, job_done, job_release, &jobs[0], 0, &why) == 0);
	nreleased = 0;
	loop_until(1);
	CHECK(jobs[0].released);
}

int
main(void)
{
	ag.ag_base = event_base_new();
	T_RUN(test_result);
	T_RUN(test_deadline);
	T_RUN(test_bound);
	/* The base stays: agent_work's own event lives as long as the agent. */
	return t_done();
}
