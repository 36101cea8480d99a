/*
 * Under the default error handler (MPI_ERRORS_ARE_FATAL) the user errors that errret.c sees
 * returned end the job instead, with MPICH's usual message naming the call and the error, not
 * an amlapi internal abort. A peer's error stays fatal: an MPIDIG header shorter
 * than its handler reads (sent by aml directly, as a broken peer would) ends the job with
 * amlapi's message naming the peer and the handler, and so does a malformed native RMA
 * message: a window id no window has, a range outside the target's window (also one whose
 * end wraps, and a derived datatype's layout reaching outside it), an answer no operation
 * awaits.
 *
 * The testlist starts this program as one process that does not initialize MPI: it runs
 * `mpiexec -n 2 <itself> CASE` for each case (with the launcher's variables of its own
 * process removed, so the inner job is a job of its own), and checks that the job failed and
 * what it printed. MPICH's MTest convention: prints " No Errors" (" Found N errors" and a
 * non-zero exit on any error); each inner job's output, and "errfatal: N errors", only with
 * MPITEST_VERBOSE set, or for a case that failed.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "../../src/ch4/netmod/amlapi/aml/aml.h"
#include "mtest.h"

extern char **environ;

/* ---- a misbehaving peer ----------------------------------------------------------------- */

/* The address of a symbol of the MPI library that it does not export (aml and the glue's
 * globals are internal): from the library file's symbol table and where it is loaded. */
static uintptr_t lib_base;
static char lib_path[4096];

static int find_libmpi(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void) size;
    (void) arg;
    if (strstr(info->dlpi_name, "libmpi.so")) {
        lib_base = info->dlpi_addr;
        snprintf(lib_path, sizeof(lib_path), "%s", info->dlpi_name);
        return 1;
    }
    return 0;
}

static void *lib_symbol(const char *name)
{
    struct stat sb;
    int fd;
    const char *m;
    void *addr = NULL;
    if (!lib_path[0] && !dl_iterate_phdr(find_libmpi, NULL))
        return NULL;
    if ((fd = open(lib_path, O_RDONLY)) < 0 || fstat(fd, &sb) < 0)
        return NULL;
    m = mmap(NULL, sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return NULL;
    const Elf64_Ehdr *eh = (const void *) m;
    const Elf64_Shdr *sh = (const void *) (m + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum && !addr; i++) {
        if (sh[i].sh_type != SHT_SYMTAB)
            continue;
        const Elf64_Sym *sym = (const void *) (m + sh[i].sh_offset);
        const char *str = m + sh[sh[i].sh_link].sh_offset;
        for (size_t k = 0; k < sh[i].sh_size / sizeof(*sym); k++)
            if (sym[k].st_value && !strcmp(str + sym[k].st_name, name)) {
                addr = (void *) (lib_base + sym[k].st_value);
                break;
            }
    }
    munmap((void *) m, sb.st_size);
    return addr;
}

/* Rank 1 sends rank 0 an MPIDIG header shorter than its handler reads, by aml directly, as
 * a broken or hostile peer would. MPIDIG_PUT_REQ is handler 7 of MPICH 4.0.2's MPIDIG enum;
 * its header (MPIDIG_put_msg_t) is 72 bytes, followed by flattened_sz bytes (an int at offset
 * 56). "short": 4 bytes of it; "flat": all 72, but saying 100 bytes follow. */
/* Sends x from this rank by aml directly, past the MPI layer. */
static void send_raw(aml_xfer_t * x)
{
    int (*xfer) (aml_t *, const aml_xfer_t *) = (int (*)(aml_t *, const aml_xfer_t *))
        lib_symbol("aml_xfer");
    aml_t **aml = lib_symbol("MPIDI_AMLAPI_global");     /* its first member */
    if (!xfer || !aml)
        fprintf(stderr, "errfatal child: aml_xfer or MPIDI_AMLAPI_global not found in %s\n",
                lib_path);
    else if (xfer(*aml, x) != 0)
        fprintf(stderr, "errfatal child: aml_xfer failed\n");
}

static void send_bad_mpidig(const char *what)
{
    uint64_t hdr[16];
    aml_xfer_t x;
    memset(hdr, 0, sizeof(hdr));
    uint16_t id = 7;            /* MPIDI_AMLAPI_am_hdr_t: handler id, vcis, reserved */
    int flat = 100;
    memcpy(hdr, &id, sizeof(id));
    memset(&x, 0, sizeof(x));
    x.peer = 0;
    x.handler = 0;              /* MPIDI_AMLAPI_H_MPIDIG */
    x.uhdr = hdr;
    if (!strcmp(what, "short")) {
        x.uhdr_len = 8 + 4;
    } else {
        memcpy((char *) hdr + 8 + 56, &flat, sizeof(flat));
        x.uhdr_len = 8 + 72;
    }
    send_raw(&x);
}

/* Rank 1 sends rank 0 a native RMA message (amlapi_rma_am.c's MPIDI_AMLAPI_H_RMA, handler 4)
 * that a broken peer could send. Its wire layout, rma_hdr_t (56 bytes): kind, datatype mode,
 * slot, lock request (1 byte each), datatype, op, flattened length (4 bytes each), window id,
 * byte offset, element count, operation id (8 bytes each), origin rank, pad (4 bytes each).
 * "rmawin": a PUT to a window id no window has; "rmarange": a PUT of 8 ints at 1 MiB into
 * the 64-byte window both ranks created (MPICH 4.0.2 numbers a communicator's windows
 * 1 + (context id | instance << 32): MPI_COMM_WORLD's first is 1); "rmawrap": the same at an
 * offset whose end wraps past 2^63 (once taken as inside the window, and written); "rmarank":
 * a good PUT that names rank 0 of the window as its origin (once unchecked without a lock
 * request, so a rank outside a window's group could write into it); "rmalayout":
 * 8 elements of a derived target datatype whose layout (amlapi_rma_layout.h: extent, block
 * count, pad, then (displacement, length) blocks, after the header) puts its one 4-byte block
 * 1 MiB into the element; "rmaanswer": an answer (kind ACK, 16 bytes: kind, pad, operation
 * id) that no operation of rank 0 awaits. */
static void send_bad_rma(const char *what)
{
    unsigned char hdr[56 + 32];
    int data[8] = { 0 };
    uint64_t win_id = !strcmp(what, "rmawin") ? 0x7eadbeef00000001ULL : 1, off = 1 << 20;
    uint64_t count = 8, op_id = 12345;
    int32_t dt = (int32_t) MPI_INT, op = 0, origin = !strcmp(what, "rmarank") ? 0 : 1;
    aml_xfer_t x;
    memset(hdr, 0, sizeof(hdr));
    memset(&x, 0, sizeof(x));
    x.peer = 0;
    x.handler = 4;
    x.uhdr = hdr;
    if (!strcmp(what, "rmaanswer")) {
        hdr[0] = 6;             /* RMA_ACK */
        memcpy(hdr + 8, &op_id, 8);
        x.uhdr_len = 16;
    } else {
        hdr[0] = 1;             /* RMA_PUT, contiguous target, no lock request */
        x.uhdr_len = 56;
        if (!strcmp(what, "rmawrap"))
            off = 0x7ffffffffffffff0ULL;
        if (!strcmp(what, "rmarank"))
            off = 0;            /* within the window: only the origin's rank is wrong */
        if (!strcmp(what, "rmalayout")) {
            int64_t extent = 4, disp = 1 << 20;
            uint64_t blen = 4;
            uint32_t n = 1, flat_len = 32;
            hdr[1] = 1;         /* TDT_FULL, slot 0 */
            memcpy(hdr + 12, &flat_len, 4);
            memcpy(hdr + 56, &extent, 8);
            memcpy(hdr + 64, &n, 4);
            memcpy(hdr + 72, &disp, 8);
            memcpy(hdr + 80, &blen, 8);
            off = 0;
            x.uhdr_len = 56 + 32;
        }
        memcpy(hdr + 4, &dt, 4);
        memcpy(hdr + 8, &op, 4);
        memcpy(hdr + 16, &win_id, 8);
        memcpy(hdr + 24, &off, 8);
        memcpy(hdr + 32, &count, 8);
        memcpy(hdr + 40, &op_id, 8);
        memcpy(hdr + 48, &origin, 4);   /* the origin's rank in the window */
        x.data = data;
        x.len = sizeof(data);
    }
    send_raw(&x);
}

/* ---- the inner job --------------------------------------------------------------------- */

static int child(const char *what)
{
    int rank, buf[16];
    const char *dir = getenv("ERRFATAL_DIR");
    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (dir) {
        /* the abort message straight into a file: what a rank writes to the launcher just
         * before the launcher kills the job is sometimes lost */
        char path[4200];
        int fd;
        snprintf(path, sizeof(path), "%s/%s.%d", dir, what, rank);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 2);
            close(fd);
        }
    }
    if (!strncmp(what, "rma", 3)) {
        /* the target's window memory stays zero: a malformed message must not write */
        static int mem[16];
        MPI_Win win;
        MPI_Win_create(mem, sizeof(mem), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        if (rank == 1)
            send_bad_rma(what);
        MPI_Recv(buf, 1, MPI_INT, MPI_ANY_SOURCE, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        printf("errfatal child: %s: rank %d was not stopped\n", what, rank);
    } else if (!strcmp(what, "short") || !strcmp(what, "flat")) {
        if (rank == 1)
            send_bad_mpidig(what);
        /* rank 0 ends the job when the packet arrives; nobody leaves this */
        MPI_Recv(buf, 1, MPI_INT, MPI_ANY_SOURCE, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        printf("errfatal child: %s: rank %d was not stopped\n", what, rank);
    } else if (rank == 1) {
        char c[64] = "abcdefghijklmnopqrstuvwxyz";
        MPI_Send(c, !strcmp(what, "recv") ? 3 : 64, MPI_CHAR, 0, 7, MPI_COMM_WORLD);
        /* waits for a message that never comes: the job ends by rank 0's abort */
        MPI_Recv(c, 1, MPI_CHAR, 0, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 0) {
        if (!strcmp(what, "recv")) {
            /* 3 chars into indexed ints: MPI_ERR_TYPE */
            MPI_Datatype t;
            int bl[2] = { 1, 1 }, dp[2] = { 0, 2 };
            MPI_Type_indexed(2, bl, dp, MPI_INT, &t);
            MPI_Type_commit(&t);
            MPI_Recv(buf, 1, t, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            /* 64 bytes into 8: MPI_ERR_TRUNCATE */
            MPI_Request r;
            MPI_Irecv(buf, 8, MPI_CHAR, 1, 7, MPI_COMM_WORLD, &r);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        }
        printf("errfatal child: %s returned under MPI_ERRORS_ARE_FATAL\n", what);
    }
    MPI_Finalize();
    return 0;
}

/* ---- the driver ------------------------------------------------------------------------ */

static int errs;

static int verbose;             /* mtest_verbose() */

/* Runs the inner job for case `what`; its output (and what its ranks wrote to their files in
 * ERRFATAL_DIR) must name every string of want, and the job must end by MPICH's error handler
 * (a user error) or by amlapi (a peer's error). */
static void run(const char *exe, const char *what, const char *const *want, int mpich_handler)
{
    char cmd[4200], out[65536];
    size_t n = 0, r;
    FILE *p;
    int status, errs0 = errs;
    snprintf(cmd, sizeof(cmd), "mpiexec -n 2 %s %s 2>&1", exe, what);
    p = popen(cmd, "r");
    if (!p) {
        errs++;
        fprintf(stderr, "errfatal: cannot run %s\n", cmd);
        return;
    }
    while (n < sizeof(out) - 1 && (r = fread(out + n, 1, sizeof(out) - 1 - n, p)) > 0)
        n += r;
    out[n] = 0;
    while (fread(cmd, 1, sizeof(cmd), p) > 0);
    status = pclose(p);
    for (int rank = 0; rank < 2; rank++) {
        FILE *f;
        snprintf(cmd, sizeof(cmd), "%s/%s.%d", getenv("ERRFATAL_DIR"), what, rank);
        if ((f = fopen(cmd, "r"))) {
            while (n < sizeof(out) - 1 && (r = fread(out + n, 1, sizeof(out) - 1 - n, f)) > 0)
                n += r;
            out[n] = 0;
            fclose(f);
            unlink(cmd);
        }
    }
    if (status == 0) {
        errs++;
        fprintf(stderr, "errfatal: case %s: the job did not fail\n", what);
    }
    for (; *want; want++) {
        if (!strstr(out, *want)) {
            errs++;
            fprintf(stderr, "errfatal: case %s: the output does not say \"%s\"\n", what, *want);
        }
    }
    /* a user error at rank 0 ends it by MPICH's handler: amlapi must not speak for rank 0. Rank
     * 1 may still report rank 0's death, if it notices before hydra ends it (as it should) */
    if (mpich_handler ? strstr(out, "amlapi (rank 0)") != NULL :
        strstr(out, "amlapi (rank") == NULL) {
        errs++;
        fprintf(stderr, "errfatal: case %s: %s\n", what, mpich_handler ?
                "amlapi aborted instead of MPICH's error handler" : "amlapi did not say why");
    }
    /* what the inner job printed: a failed case needs it to be understood */
    if (verbose || errs != errs0)
        printf("---- mpiexec -n 2 errfatal %s: exit status %d, output:\n%s----\n", what,
               WIFEXITED(status) ? WEXITSTATUS(status) : -1, out);
}

int main(int argc, char **argv)
{
    static const char *const want_recv[] = { "MPI_Recv", "signature does not match", NULL };
    static const char *const want_wait[] = { "MPI_Wait", "truncated", NULL };
    static const char *const want_short[] = { "malformed MPIDIG message from rank 1",
        "4-byte MPIDIG_PUT_REQ header, its handler reads 72", NULL
    };
    static const char *const want_flat[] = { "malformed MPIDIG message from rank 1",
        "72-byte MPIDIG_PUT_REQ header, its handler reads 172", NULL
    };
    static const char *const want_rmawin[] = { "malformed RMA PUT message from rank 1",
        "no window 0x7eadbeef00000001 here", NULL
    };
    static const char *const want_rmarange[] = { "malformed RMA PUT message from rank 1",
        "contiguous datatype, span 0..32) at offset 0x100000 of the window: outside the window",
        NULL
    };
    static const char *const want_rmawrap[] = { "malformed RMA PUT message from rank 1",
        "at offset 0x7ffffffffffffff0 of the window: span out of range", NULL
    };
    static const char *const want_rmarank[] = { "malformed RMA PUT message from rank 1",
        "it says it is rank 0 of window 0x1, which it is not", NULL
    };
    static const char *const want_rmalayout[] = { "malformed RMA PUT message from rank 1",
        "derived datatype, span 1048576..1048608) at offset 0 of the window: outside the window",
        NULL
    };
    static const char *const want_rmaanswer[] = { "malformed RMA answer from rank 1",
        "ACK for operation 12345 (none awaits it)", NULL
    };
    char exe[4096];
    ssize_t len;

    if (argc > 1)
        return child(argv[1]);
    verbose = mtest_verbose();     /* the driver does not initialize MPI */

    len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len <= 0) {
        fprintf(stderr, "errfatal: cannot find my own executable\n");
        return 1;
    }
    exe[len] = 0;
    /* the outer launcher's variables would make the inner ranks join the outer job */
    for (int again = 1; again;) {
        again = 0;
        for (char **e = environ; *e; e++) {
            if (!strncmp(*e, "PMI_", 4) || !strncmp(*e, "PMIX_", 5) ||
                !strncmp(*e, "HYDRA_", 6) || !strncmp(*e, "HYDI_", 5) ||
                !strncmp(*e, "MPI_LOCALRANKID=", 16) || !strncmp(*e, "MPI_LOCALNRANKS=", 16)) {
                char name[256];
                size_t k = strcspn(*e, "=");
                if (k >= sizeof(name))
                    continue;
                memcpy(name, *e, k);
                name[k] = 0;
                unsetenv(name);
                again = 1;
                break;
            }
        }
    }
    char dir[] = "/tmp/errfatal.XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "errfatal: cannot make a directory in /tmp\n");
        return 1;
    }
    setenv("ERRFATAL_DIR", dir, 1);
    run(exe, "recv", want_recv, 1);
    run(exe, "wait", want_wait, 1);
    run(exe, "short", want_short, 0);
    run(exe, "flat", want_flat, 0);
    run(exe, "rmawin", want_rmawin, 0);
    run(exe, "rmarange", want_rmarange, 0);
    run(exe, "rmawrap", want_rmawrap, 0);
    run(exe, "rmalayout", want_rmalayout, 0);
    run(exe, "rmarank", want_rmarank, 0);
    run(exe, "rmaanswer", want_rmaanswer, 0);
    rmdir(dir);
    if (verbose)
        printf("errfatal: %d errors\n", errs);
    printf(errs ? " Found %d errors\n" : " No Errors\n", errs);
    return errs != 0;
}
