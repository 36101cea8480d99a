/*
 * aml base utilities: names, fatal errors, record free lists, counters and registered
 * memory (the hash table is aml_htab.h). Calls nothing else of aml.
 */
#include "aml_impl.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *aml_strerror(int status)
{
    switch (status) {
        case AML_OK:
            return "success";
        case AML_ERR_INVAL:
            return "invalid argument";
        case AML_ERR_NOMEM:
            return "out of memory";
        case AML_ERR_TRANSPORT:
            return "transport (UCX) error";
        case AML_ERR_NOT_SUPPORTED:
            return "not supported";
        case AML_ERR_RANGE:
            return "address range not registered";
        case AML_ERR_STATE:
            return "called in the wrong state";
        case AML_ERR_CONFIG:
            return "ranks disagree on a setting";
        case AML_ERR_SETUP:
            return "setup failed";
        case AML_ERR_TIMEOUT:
            return "timed out";
        default:
            return "unknown aml status";
    }
}

const char *aml_proto_name(int proto)
{
    static const char *const n[AML_PROTO_COUNT] = { "auto", "onepacket", "eager", "rndv", "adaptive" };
    return (proto >= 0 && proto < AML_PROTO_COUNT) ? n[proto] : "unknown";
}

/* ---- fatal errors ------------------------------------------------------------------ */

static void vfatal(aml_t * aml, const char *fmt, va_list ap) __attribute__ ((noreturn));
static void vfatal(aml_t * aml, const char *fmt, va_list ap)
{
    char msg[512];
    int n = snprintf(msg, sizeof(msg), "aml: fatal error on rank %d: ", aml ? aml->rank : -1);
    vsnprintf(msg + n, sizeof(msg) - n, fmt, ap);
    if (aml && aml->fatal_hook)
        aml->fatal_hook(aml);
    if (aml && aml->cfg.fatal)
        aml->cfg.fatal(aml->cfg.fatal_arg, msg);
    fprintf(stderr, "%s\n", msg);
    fflush(stderr);
    abort();
}

void aml_fatal(aml_t * aml, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfatal(aml, fmt, ap);
}

/* ---- record free lists ---------------------------------------------------------------- */

void aml_rec_drain(void **head)
{
    for (void *p = *head, *n; p; p = n) {
        n = *(void **) p;
        free(p);
    }
    *head = NULL;
}

/* ---- counters ------------------------------------------------------------------------- */

int aml_cntr_init(aml_t * aml, aml_cntr_t * c, int64_t value)
{
    if (!aml || !c)
        return AML_ERR_INVAL;
    c->value = value;
    if (!aml_htab_get(&aml->cntrs, (uintptr_t) c)) {
        aml_hent_t *e = malloc(sizeof(*e));
        if (!e)
            return AML_ERR_NOMEM;
        aml_htab_put(&aml->cntrs, e, (uintptr_t) c);
    }
    return AML_OK;
}

int aml_cntr_destroy(aml_t * aml, aml_cntr_t * c)
{
    if (!aml || !c)
        return AML_ERR_INVAL;
    free(aml_htab_del(&aml->cntrs, (uintptr_t) c));
    return AML_OK;
}

int64_t aml_cntr_get(const aml_cntr_t * c)
{
    return c->value;
}

void aml_cntr_set(aml_cntr_t * c, int64_t value)
{
    c->value = value;
}

/* ---- registered memory ---------------------------------------------------------------- */

int aml_mem_register(aml_t * aml, void *addr, size_t len)
{
    if (!aml || (!addr && len))
        return AML_ERR_INVAL;
    if (aml->nregions == aml->cap_regions) {
        int cap = aml->cap_regions ? 2 * aml->cap_regions : 8;
        aml_region_t *r = realloc(aml->regions, cap * sizeof(*r));
        if (!r)
            return AML_ERR_NOMEM;
        aml->regions = r;
        aml->cap_regions = cap;
    }
    aml->regions[aml->nregions].base = (uintptr_t) addr;
    aml->regions[aml->nregions].len = len;
    aml->nregions++;
    return AML_OK;
}

int aml_mem_deregister(aml_t * aml, void *addr)
{
    if (!aml)
        return AML_ERR_INVAL;
    for (int i = 0; i < aml->nregions; i++) {
        if (aml->regions[i].base == (uintptr_t) addr) {
            aml->regions[i] = aml->regions[--aml->nregions];
            return AML_OK;
        }
    }
    return AML_ERR_RANGE;
}

bool aml_range_registered(aml_t * aml, uintptr_t addr, size_t len)
{
    if (addr + len < addr)
        return false;
    for (int i = 0; i < aml->nregions; i++) {
        const aml_region_t *r = &aml->regions[i];
        if (addr >= r->base && addr + len <= r->base + r->len)
            return true;
    }
    return false;
}
