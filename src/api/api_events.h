/* Live event fan-out to SSE subscribers (GET /v1/events, /v1/sandboxes/{id}/events). */
#ifndef AIRLOCK_API_EVENTS_H
#define AIRLOCK_API_EVENTS_H

#include <stdint.h>

#include <jansson.h>

struct api_sub_list;

struct api_sub_list *api_subs_new(void);
/* Ends every subscriber's stream. */
void api_subs_free(struct api_sub_list *l);

#endif
