/*
 * Per-sandbox pin table (gw_resolve.h): name → addresses the gateway itself
 * resolved for that sandbox, each with its own expiry, so an address a guest
 * cached from an earlier answer stays pinned after the name rotates to
 * others.
 *
 * Bounded: at most GW_PINS_MAX names per sandbox and GW_RESOLVE_MAX_ADDRS *
 * 2 addresses per name. The names sit on a list in least recently used
 * order; expired names are dropped from its head as new ones arrive, and
 * when the table is full the least recently used name goes, so a guest
 * resolving a million names costs a fixed amount of memory (and only loses
 * pins of its own).
 */
#include <sys/queue.h>
#include <sys/socket.h>

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "gateway/gw.h"
#include "gateway/gw_resolve.h"

#define GW_PINS_BUCKETS		128
#define GW_PIN_ADDRS_MAX	(2 * GW_RESOLVE_MAX_ADDRS)

struct gw_pin_addr {
	uint8_t		 family;	/* AF_INET or AF_INET6 */
	uint8_t		 addr[16];
	uint64_t	 expires_ms;
};

struct gw_pin {
	char			*name;
	uint32_t		 hash;
	struct gw_pin_addr	*addrs;		/* grown on demand up to GW_PIN_ADDRS_MAX */
	size_t			 naddrs;
	size_t			 cap;
	uint64_t		 expires_ms;	/* the latest of its addresses */
	struct gw_pin		*hnext;
	TAILQ_ENTRY(gw_pin)	 lru;
};

struct gw_pins {
	struct gw_pin		*buckets[GW_PINS_BUCKETS];
	TAILQ_HEAD(gw_pins_lru, gw_pin) lru;	/* least recently used first */
	size_t			 n;
};

static uint32_t
gw_pins_hash(const char *s)
{
	uint32_t h = 2166136261u;

	while (*s != '\0') {
		h ^= (uint8_t)*s++;
		h *= 16777619u;
	}
	return h;
}

/* Address bytes and family of sa; -1 if neither v4 nor v6. */
static int
gw_pins_key(const struct sockaddr *sa, uint8_t *family, uint8_t addr[16])
{
	memset(addr, 0, 16);
	if (sa->sa_family == AF_INET) {
		*family = AF_INET;
		memcpy(addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		*family = AF_INET6;
		memcpy(addr, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
		return 0;
	}
	return -1;
}

struct gw_pins *
gw_pins_new(void)
{
	struct gw_pins *p;

	p = xcalloc(1, sizeof *p);
	TAILQ_INIT(&p->lru);
	return p;
}

static void
gw_pins_remove(struct gw_pins *p, struct gw_pin *pin)
{
	struct gw_pin **pp;

	for (pp = &p->buckets[pin->hash % GW_PINS_BUCKETS]; *pp != NULL; pp = &(*pp)->hnext) {
		if (*pp == pin) {
			*pp = pin->hnext;
			break;
		}
	}
	TAILQ_REMOVE(&p->lru, pin, lru);
	p->n--;
	free(pin->addrs);
	free(pin->name);
	free(pin);
}

void
gw_pins_free(struct gw_pins *p)
{
	if (p == NULL)
		return;
	while (!TAILQ_EMPTY(&p->lru))
		gw_pins_remove(p, TAILQ_FIRST(&p->lru));
	free(p);
}

static struct gw_pin *
gw_pins_find(struct gw_pins *p, const char *name)
{
	struct gw_pin	*pin;
	uint32_t	 h = gw_pins_hash(name);

	for (pin = p->buckets[h % GW_PINS_BUCKETS]; pin != NULL; pin = pin->hnext)
		if (pin->hash == h && strcmp(pin->name, name) == 0)
			return pin;
	return NULL;
}

/* Drop expired addresses of a pin; the pin itself stays. */
static void
gw_pin_prune(struct gw_pin *pin, uint64_t now)
{
	size_t i, j;

	for (i = j = 0; i < pin->naddrs; i++)
		if (pin->addrs[i].expires_ms > now)
			pin->addrs[j++] = pin->addrs[i];
	pin->naddrs = j;
}

void
gw_pins_add(struct gw_pins *p, const char *name, const struct gw_addrs *a)
{
	struct gw_pin		*pin, *old;
	struct gw_pin_addr	 pa;
	uint64_t		 now = monotonic_ms(), expires;
	size_t			 i, k, victim;

	if (a->n == 0)
		return;
	expires = now + ((uint64_t)a->ttl + GW_PIN_GRACE_S) * 1000;
	/* Names whose every address has run out go first. */
	while ((old = TAILQ_FIRST(&p->lru)) != NULL && old->expires_ms <= now)
		gw_pins_remove(p, old);
	if ((pin = gw_pins_find(p, name)) == NULL) {
		if (p->n >= GW_PINS_MAX)
			gw_pins_remove(p, TAILQ_FIRST(&p->lru));
		pin = xcalloc(1, sizeof *pin);
		pin->name = xstrdup(name);
		pin->hash = gw_pins_hash(name);
		pin->hnext = p->buckets[pin->hash % GW_PINS_BUCKETS];
		p->buckets[pin->hash % GW_PINS_BUCKETS] = pin;
		p->n++;
	} else
		TAILQ_REMOVE(&p->lru, pin, lru);
	TAILQ_INSERT_TAIL(&p->lru, pin, lru);

	gw_pin_prune(pin, now);
	for (i = 0; i < a->n; i++) {
		if (gw_pins_key((const struct sockaddr *)&a->addrs[i], &pa.family, pa.addr) != 0)
			continue;
		pa.expires_ms = expires;
		for (k = 0; k < pin->naddrs; k++)
			if (pin->addrs[k].family == pa.family &&
			    memcmp(pin->addrs[k].addr, pa.addr, 16) == 0)
				break;
		if (k == pin->naddrs && pin->naddrs == GW_PIN_ADDRS_MAX) {
			/* Full: replace the address that runs out first. */
			for (victim = 0, k = 1; k < pin->naddrs; k++)
				if (pin->addrs[k].expires_ms < pin->addrs[victim].expires_ms)
					victim = k;
			k = victim;
		} else if (k == pin->naddrs) {
			if (pin->naddrs == pin->cap) {
				pin->cap = pin->cap == 0 ? 4 : 2 * pin->cap;
				if (pin->cap > GW_PIN_ADDRS_MAX)
					pin->cap = GW_PIN_ADDRS_MAX;
				pin->addrs = xreallocarray(pin->addrs, pin->cap,
				    sizeof *pin->addrs);
			}
			pin->naddrs++;
		}
		pin->addrs[k] = pa;
	}
	pin->expires_ms = 0;
	for (k = 0; k < pin->naddrs; k++)
		if (pin->addrs[k].expires_ms > pin->expires_ms)
			pin->expires_ms = pin->addrs[k].expires_ms;
}

static int
gw_pin_has_addr(const struct gw_pin *pin, uint8_t family, const uint8_t addr[16], uint64_t now)
{
	size_t k;

	for (k = 0; k < pin->naddrs; k++)
		if (pin->addrs[k].expires_ms > now && pin->addrs[k].family == family &&
		    memcmp(pin->addrs[k].addr, addr, 16) == 0)
			return 1;
	return 0;
}

int
gw_pins_has(struct gw_pins *p, const char *name, const struct sockaddr *sa)
{
	struct gw_pin	*pin;
	uint8_t		 family, addr[16];

	if (gw_pins_key(sa, &family, addr) != 0 || (pin = gw_pins_find(p, name)) == NULL)
		return 0;
	if (!gw_pin_has_addr(pin, family, addr, monotonic_ms()))
		return 0;
	/* In use: it is the last name to evict. */
	TAILQ_REMOVE(&p->lru, pin, lru);
	TAILQ_INSERT_TAIL(&p->lru, pin, lru);
	return 1;
}

size_t
gw_pins_names_for(struct gw_pins *p, const struct sockaddr *sa, const char **names, size_t max)
{
	struct gw_pin	*pin;
	uint8_t		 family, addr[16];
	uint64_t	 now = monotonic_ms();
	size_t		 n = 0;

	if (gw_pins_key(sa, &family, addr) != 0)
		return 0;
	/* Most recently used first: the name the guest just resolved wins a tie. */
	TAILQ_FOREACH_REVERSE(pin, &p->lru, gw_pins_lru, lru) {
		if (n == max)
			break;
		if (gw_pin_has_addr(pin, family, addr, now))
			names[n++] = pin->name;
	}
	return n;
}
