/*
 * Token buckets per API key id, in a chained hash table. A bucket that has
 * refilled to full carries no information, so it is dropped when a lookup
 * walks past it: the table holds only keys that were busy recently, and a
 * caller minting keys cannot grow it beyond what its own requests refill.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_ratelimit.h"
#include "common/tbucket.h"
#include "common/util.h"

#define RL_BUCKETS	256
#define RL_ID_MAX	64

struct rl_entry {
	struct rl_entry	*next;
	char		 id[RL_ID_MAX];
	struct tbucket	 b;
};

struct api_ratelimit {
	int		 rate, burst;
	size_t		 n;
	struct rl_entry	*tab[RL_BUCKETS];
};

struct api_ratelimit *
api_ratelimit_new(int rate, int burst)
{
	struct api_ratelimit *rl = xcalloc(1, sizeof(*rl));

	rl->rate = rate;
	rl->burst = burst < 1 ? 1 : burst;
	return rl;
}

void
api_ratelimit_free(struct api_ratelimit *rl)
{
	struct rl_entry *e, *next;
	size_t i;

	if (rl == NULL)
		return;
	for (i = 0; i < RL_BUCKETS; i++)
		for (e = rl->tab[i]; e != NULL; e = next) {
			next = e->next;
			free(e);
		}
	free(rl);
}

static unsigned
rl_hash(const char *s)
{
	unsigned h = 2166136261u;	/* FNV-1a */

	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h % RL_BUCKETS;
}

int
api_ratelimit_take(struct api_ratelimit *rl, const char *key_id, uint64_t now_ms,
    uint64_t *retry_ms)
{
	struct rl_entry **pp, *e, *found = NULL;

	*retry_ms = 0;
	if (rl == NULL || rl->rate <= 0)
		return 0;
	for (pp = &rl->tab[rl_hash(key_id)]; (e = *pp) != NULL;) {
		if (found == NULL && strncmp(e->id, key_id, sizeof(e->id)) == 0) {
			found = e;
			pp = &e->next;
		} else if (tbucket_full(&e->b, now_ms)) {
			*pp = e->next;		/* full: as if never seen */
			free(e);
			rl->n--;
		} else
			pp = &e->next;
	}
	if (found == NULL) {
		found = xcalloc(1, sizeof(*found));
		snprintf(found->id, sizeof(found->id), "%s", key_id);
		tbucket_init(&found->b, rl->rate, rl->burst, now_ms);
		found->next = rl->tab[rl_hash(key_id)];
		rl->tab[rl_hash(key_id)] = found;
		rl->n++;
	}
	if (tbucket_take(&found->b, 1, now_ms))
		return 0;
	*retry_ms = tbucket_wait_ms(&found->b, 1, now_ms);
	return -1;
}

size_t
api_ratelimit_size(const struct api_ratelimit *rl)
{
	return rl != NULL ? rl->n : 0;
}
