/* A tiny metrics registry: fixed buckets, linear lookup (tens of series). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "api/metrics.h"
#include "common/util.h"

#define METRICS_SERIES_MAX	256

static const double buckets[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
	1, 2.5, 5, 10, 30, 60 };
#define NBUCKETS (sizeof(buckets) / sizeof(buckets[0]))

struct hist {
	char		 name[64];
	char		 labels[160];
	unsigned long	 counts[NBUCKETS];
	unsigned long	 count;
	double		 sum;
};

struct counter {
	char		 name[64];
	char		 labels[160];
	unsigned long	 value;
};

struct metrics {
	struct hist	 hists[METRICS_SERIES_MAX];
	size_t		 nhists;
	struct counter	 counters[METRICS_SERIES_MAX];
	size_t		 ncounters;
};

struct metrics *
metrics_new(void)
{
	return xcalloc(1, sizeof(struct metrics));
}

void
metrics_free(struct metrics *m)
{
	free(m);
}

static struct hist *
hist_get(struct metrics *m, const char *name, const char *labels)
{
	size_t i;

	for (i = 0; i < m->nhists; i++)
		if (strcmp(m->hists[i].name, name) == 0 && strcmp(m->hists[i].labels, labels) == 0)
			return &m->hists[i];
	if (m->nhists == METRICS_SERIES_MAX)
		return NULL;
	snprintf(m->hists[m->nhists].name, sizeof(m->hists[0].name), "%s", name);
	snprintf(m->hists[m->nhists].labels, sizeof(m->hists[0].labels), "%s", labels);
	return &m->hists[m->nhists++];
}

static struct counter *
counter_get(struct metrics *m, const char *name, const char *labels)
{
	size_t i;

	for (i = 0; i < m->ncounters; i++)
		if (strcmp(m->counters[i].name, name) == 0 &&
		    strcmp(m->counters[i].labels, labels) == 0)
			return &m->counters[i];
	if (m->ncounters == METRICS_SERIES_MAX)
		return NULL;
	snprintf(m->counters[m->ncounters].name, sizeof(m->counters[0].name), "%s", name);
	snprintf(m->counters[m->ncounters].labels, sizeof(m->counters[0].labels), "%s", labels);
	return &m->counters[m->ncounters++];
}

static void
hist_add(struct hist *h, double v)
{
	size_t i;

	if (h == NULL)
		return;
	for (i = 0; i < NBUCKETS; i++)
		if (v <= buckets[i])
			h->counts[i]++;
	h->count++;
	h->sum += v;
}

void
metrics_observe_request(struct metrics *m, const char *route, const char *method, double seconds)
{
	char labels[160];

	/* Routes are patterns (bounded set), never raw paths: no label explosion. */
	snprintf(labels, sizeof(labels), "route=\"%s\",method=\"%s\"", route, method);
	hist_add(hist_get(m, "airlock_http_request_duration_seconds", labels), seconds);
}

void
metrics_count_error(struct metrics *m, int status)
{
	char labels[32];
	struct counter *c;

	snprintf(labels, sizeof(labels), "status=\"%d\"", status);
	if ((c = counter_get(m, "airlock_http_errors_total", labels)) != NULL)
		c->value++;
}

void
metrics_observe(struct metrics *m, const char *name, double seconds)
{
	char full[64];

	snprintf(full, sizeof(full), "airlock_%s_seconds", name);
	hist_add(hist_get(m, full, ""), seconds);
}

void
metrics_inc(struct metrics *m, const char *name)
{
	char full[64];
	struct counter *c;

	snprintf(full, sizeof(full), "airlock_%s_total", name);
	if ((c = counter_get(m, full, "")) != NULL)
		c->value++;
}

/* Prometheus wants each family's series together under one TYPE line. */
void
metrics_render(struct metrics *m, struct evbuffer *out)
{
	size_t i, j, b;

	for (i = 0; i < m->ncounters; i++) {
		for (j = 0; j < i; j++)
			if (strcmp(m->counters[j].name, m->counters[i].name) == 0)
				break;
		if (j < i)
			continue;
		evbuffer_add_printf(out, "# TYPE %s counter\n", m->counters[i].name);
		for (j = i; j < m->ncounters; j++) {
			struct counter *c = &m->counters[j];
			if (strcmp(c->name, m->counters[i].name) != 0)
				continue;
			evbuffer_add_printf(out, "%s%s%s%s %lu\n", c->name, *c->labels ? "{" : "",
			    c->labels, *c->labels ? "}" : "", c->value);
		}
	}
	for (i = 0; i < m->nhists; i++) {
		for (j = 0; j < i; j++)
			if (strcmp(m->hists[j].name, m->hists[i].name) == 0)
				break;
		if (j < i)
			continue;
		evbuffer_add_printf(out, "# TYPE %s histogram\n", m->hists[i].name);
		for (j = i; j < m->nhists; j++) {
			struct hist *h = &m->hists[j];
			const char *sep = *h->labels ? "," : "";
			if (strcmp(h->name, m->hists[i].name) != 0)
				continue;
			for (b = 0; b < NBUCKETS; b++)
				evbuffer_add_printf(out, "%s_bucket{%s%sle=\"%g\"} %lu\n", h->name,
				    h->labels, sep, buckets[b], h->counts[b]);
			evbuffer_add_printf(out, "%s_bucket{%s%sle=\"+Inf\"} %lu\n", h->name,
			    h->labels, sep, h->count);
			evbuffer_add_printf(out, "%s_sum%s%s%s %g\n%s_count%s%s%s %lu\n", h->name,
			    *h->labels ? "{" : "", h->labels, *h->labels ? "}" : "", h->sum, h->name,
			    *h->labels ? "{" : "", h->labels, *h->labels ? "}" : "", h->count);
		}
	}
}
