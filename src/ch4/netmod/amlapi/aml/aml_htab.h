/*
 * aml's intrusive hash table, keyed by a 64-bit value (ids, addresses) and an owner: the peer
 * that chose the id (message ids are each sender's own, so a receiver's table holds one per
 * source), or AML_NO_OWNER. A lookup matches both, so a peer names only its own entries.
 * All inline: lookups are on every message's path, and the table calls nothing of aml.
 */
#ifndef AML_HTAB_H_INCLUDED
#define AML_HTAB_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define AML_NO_OWNER (-1)
typedef struct aml_hent {
    struct aml_hent *next;
    uint64_t key;
    int owner;
} aml_hent_t;

typedef struct aml_htab {
    aml_hent_t **b;
    size_t nb;                  /* power of two */
    size_t count;
} aml_htab_t;

/* key and owner mixed (splitmix64's finaliser), so that sequential ids spread */
static inline size_t aml_hslot(const aml_htab_t * t, uint64_t key, int owner)
{
    key ^= (uint64_t) (uint32_t) owner * 0x9e3779b97f4a7c15ULL;
    key ^= key >> 29;
    key *= 0xbf58476d1ce4e5b9ULL;
    key ^= key >> 32;
    return key & (t->nb - 1);
}

/* nb buckets, a power of two; 0 (AML_OK) or -1 when out of memory */
static inline int aml_htab_init(aml_htab_t * t, size_t nb)
{
    t->b = calloc(nb, sizeof(*t->b));
    t->nb = nb;
    t->count = 0;
    return t->b ? 0 : -1;
}

static inline void aml_htab_free(aml_htab_t * t)
{
    free(t->b);
    t->b = NULL;
}

static inline void aml_htab_put_owned(aml_htab_t * t, aml_hent_t * e, uint64_t key, int owner)
{
    size_t s = aml_hslot(t, key, owner);
    e->key = key;
    e->owner = owner;
    e->next = t->b[s];
    t->b[s] = e;
    t->count++;
}

static inline aml_hent_t *aml_htab_get_owned(aml_htab_t * t, uint64_t key, int owner)
{
    for (aml_hent_t * e = t->b[aml_hslot(t, key, owner)]; e; e = e->next)
        if (e->key == key && e->owner == owner)
            return e;
    return NULL;
}

static inline aml_hent_t *aml_htab_del_owned(aml_htab_t * t, uint64_t key, int owner)
{
    for (aml_hent_t ** p = &t->b[aml_hslot(t, key, owner)]; *p; p = &(*p)->next) {
        if ((*p)->key == key && (*p)->owner == owner) {
            aml_hent_t *e = *p;
            *p = e->next;
            t->count--;
            return e;
        }
    }
    return NULL;
}

static inline void aml_htab_put(aml_htab_t * t, aml_hent_t * e, uint64_t key)
{
    aml_htab_put_owned(t, e, key, AML_NO_OWNER);
}

static inline aml_hent_t *aml_htab_get(aml_htab_t * t, uint64_t key)
{
    return aml_htab_get_owned(t, key, AML_NO_OWNER);
}

static inline aml_hent_t *aml_htab_del(aml_htab_t * t, uint64_t key)
{
    return aml_htab_del_owned(t, key, AML_NO_OWNER);
}

/* Removes and returns some entry, or NULL when the table is empty (draining at finalize). */
static inline aml_hent_t *aml_htab_pop(aml_htab_t * t)
{
    for (size_t i = 0; t->b && t->count && i < t->nb; i++) {
        aml_hent_t *e = t->b[i];
        if (e) {
            t->b[i] = e->next;
            t->count--;
            return e;
        }
    }
    return NULL;
}

#endif /* AML_HTAB_H_INCLUDED */
