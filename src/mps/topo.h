/* MPS topology files: named processes (where they run) and links (two ends, medium, buffers).
 * The parser uses no MPI, so mpsrun and libmps share it. Format: docs/mps.md. */
#ifndef MPS_TOPO_H_INCLUDED
#define MPS_TOPO_H_INCLUDED

#include <stddef.h>

/* as in mps.h (the parser needs no MPI, so mpsrun does not include it) */
#ifndef MPS_MAX_NAME
#define MPS_MAX_NAME 64
#endif

#define MPS_TOPO_MAX_PARAMS 256

typedef struct {
    char name[MPS_MAX_NAME];
    char host[256];
    int cpu;            /* -1: not bound */
    int line;
} mps_topo_process;

typedef struct {
    char name[MPS_MAX_NAME];
    int end[2];         /* process indices, in the order the file lists them */
    char medium[MPS_MAX_NAME];
    char params[MPS_TOPO_MAX_PARAMS];   /* "k=v,k=v" after "medium=TYPE:", or "" */
    long bufsize;
    int bufcount;
    int line;
} mps_topo_link;

typedef struct {
    char file[4096];
    int nprocs, nlinks;
    mps_topo_process *procs;
    mps_topo_link *links;
} mps_topo;

/* 0 on success; otherwise -1 with "FILE:LINE: what" (or "FILE: what") in err */
int mps_topo_load(const char *path, mps_topo *t, char *err, size_t errlen);
void mps_topo_free(mps_topo *t);
int mps_topo_find_process(const mps_topo *t, const char *name);
int mps_topo_find_link(const mps_topo *t, const char *name);

#endif
