/* Prometheus metrics: counters and latency histograms, rendered as text. */
#ifndef AIRLOCK_METRICS_H
#define AIRLOCK_METRICS_H

#include <stddef.h>

struct metrics;
struct evbuffer;

struct metrics *metrics_new(void);
void metrics_free(struct metrics *m);

void metrics_observe_request(struct metrics *m, const char *route, const char *method,
    double seconds);
void metrics_count_error(struct metrics *m, int status);
/* Named histograms: "sandbox_create", "sandbox_exec", "sandbox_resume", ... */
void metrics_observe(struct metrics *m, const char *name, double seconds);
/* Named counters: "sandbox_failures", "sandbox_creates", ... */
void metrics_inc(struct metrics *m, const char *name);

/* Render everything; gauges (per-state counts) are appended by the caller. */
void metrics_render(struct metrics *m, struct evbuffer *out);

#endif
