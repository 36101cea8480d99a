/* libFuzzer target: MPS's topology-file parser (mpsrun and libmps read it). The input is the
 * file, handed over as a memfd so the parser reads it as it reads any file. */
#define _GNU_SOURCE
#include "topo.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    char path[64], err[512];
    if (fd < 0 && (fd = memfd_create("fuzz-topo", 0)) < 0)
        abort();
    if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t) size)
        abort();
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    mps_topo t;
    memset(&t, 0, sizeof(t));
    if (mps_topo_load(path, &t, err, sizeof(err)) == 0) {
        for (int i = 0; i < t.nlinks; i++)
            if (t.links[i].end[0] < 0 || t.links[i].end[0] >= t.nprocs ||
                t.links[i].end[1] < 0 || t.links[i].end[1] >= t.nprocs)
                abort();
        for (int i = 0; i < t.nprocs; i++)
            if (mps_topo_find_process(&t, t.procs[i].name) < 0)
                abort();
        mps_topo_free(&t);
    } else if (!memchr(err, 0, sizeof(err)) || !err[0]) {
        abort();        /* an error always says what */
    }
    return 0;
}
