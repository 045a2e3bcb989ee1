/*
 * The one lifetime idiom for event-loop objects that callbacks can outlive
 * (the kernel's kref: get, put with a release function).
 *
 * An object starts with one reference, its owner's (ref_init). The owner
 * ends it with its free function, which is idempotent: ref_kill marks it
 * dead (1 if it already was: return), the function tears down what others
 * can reach (sockets, timers, queued work: no callback can start after
 * this), and drops the owner's reference with ref_put.
 *
 * Every frame entered from the event loop that calls out to code which may
 * end the object (a user callback) holds a reference across it: ref_get on
 * entry, ref_put on the way out. While a frame holds one, calls further
 * down check ref_dead after each callback and stop touching the object's
 * peers. ref_put runs release(obj) at the last reference and returns 1
 * when the object is dead, freed or not: the frame must not touch it then.
 *
 * Frees are synchronous (when the last frame unwinds), never "next loop
 * turn": nothing is left for an event base that is freed first, and ASan
 * sees a use after the end as a use after free.
 */
#ifndef AIRLOCK_REF_H
#define AIRLOCK_REF_H

struct ref {
	int	r_count;
	int	r_dead;
};

static inline void
ref_init(struct ref *r)
{
	r->r_count = 1;
	r->r_dead = 0;
}

static inline void
ref_get(struct ref *r)
{
	r->r_count++;
}

static inline int
ref_dead(const struct ref *r)
{
	return r->r_dead;
}

/* Mark dead; 1 when it already was (the caller returns: it was ended). */
static inline int
ref_kill(struct ref *r)
{
	if (r->r_dead)
		return 1;
	r->r_dead = 1;
	return 0;
}

/* Drop one reference; release(obj) at the last. 1: dead, touch it no more. */
static inline int
ref_put(struct ref *r, void (*release)(void *), void *obj)
{
	int dead = r->r_dead;

	if (--r->r_count == 0) {
		release(obj);
		return 1;
	}
	return dead;
}

#endif
