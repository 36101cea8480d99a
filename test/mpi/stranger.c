/*
 * A process of another job that holds a port name can connect only while an accept waits
 * (maint/test runs the three roles as three jobs of one process each):
 *   stranger victim FILE     opens a port and writes its name to FILE; until FILE.go exists
 *                            it accepts nothing, then checks that it refused packets
 *                            (amlapi_refused_packets), waits a second and accepts one
 *                            connection, which must send it 42
 *   stranger attacker FILE   connects to the port while nobody accepts: must fail with
 *                            MPI_ERR_PORT (run it with MPIR_CVAR_CH4_COMM_CONNECT_TIMEOUT=3)
 *   stranger connector FILE  connects (before the victim accepts, which MPI allows: the request
 *                            is repeated until the accept) and sends 42
 * Each prints "stranger ROLE: N errors" and exits non-zero on any error.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int errs, rank;
#define ERR(...) do { errs++; fprintf(stderr, "stranger: " __VA_ARGS__); \
                      fprintf(stderr, "\n"); } while (0)
#include "mpit.h"

static int read_port(const char *file, char *port)
{
    FILE *f = fopen(file, "r");
    int ok = f && fgets(port, MPI_MAX_PORT_NAME, f) != NULL;
    if (f)
        fclose(f);
    port[strcspn(port, "\n")] = '\0';
    return ok;
}

static void victim(const char *file)
{
    char port[MPI_MAX_PORT_NAME], tmp[4096], go[4096];
    MPI_Comm inter;
    unsigned long long refused;
    MPI_Request req;
    int v = 0;
    FILE *f;

    MPI_Open_port(MPI_INFO_NULL, port);
    snprintf(tmp, sizeof(tmp), "%s.tmp", file);
    snprintf(go, sizeof(go), "%s.go", file);
    f = fopen(tmp, "w");
    if (!f || fprintf(f, "%s\n", port) < 0 || fclose(f) != 0 || rename(tmp, file) != 0) {
        ERR("cannot write %s", file);
        return;
    }
    /* progress while the attacker tries: a receive nobody sends to, tested */
    MPI_Irecv(&v, 1, MPI_INT, 0, 99, MPI_COMM_SELF, &req);
    while (access(go, F_OK) != 0) {
        int flag;
        MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        usleep(1000);
    }
    MPI_Cancel(&req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    refused = pvar_read("amlapi_refused_packets");
    printf("stranger victim: %llu packets refused while nobody accepted\n", refused);
    if (refused == 0)
        ERR("the attacker's CONNECT requests were not refused");
    sleep(1);   /* the connector asks first */
    if (MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter) != MPI_SUCCESS) {
        ERR("MPI_Comm_accept failed");
        return;
    }
    MPI_Recv(&v, 1, MPI_INT, 0, 0, inter, MPI_STATUS_IGNORE);
    if (v != 42)
        ERR("the connector sent %d, not 42", v);
    MPI_Comm_disconnect(&inter);
    MPI_Close_port(port);
}

static void attacker(const char *file)
{
    char port[MPI_MAX_PORT_NAME];
    MPI_Comm inter;
    int rc, cls;

    if (!read_port(file, port)) {
        ERR("no port name in %s", file);
        return;
    }
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    rc = MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter);
    MPI_Error_class(rc, &cls);
    printf("stranger attacker: MPI_Comm_connect returned error class %d\n", cls);
    if (rc == MPI_SUCCESS)
        ERR("connected to a port whose process accepts nothing");
    else if (cls != MPI_ERR_PORT)
        ERR("MPI_Comm_connect failed with class %d, not MPI_ERR_PORT", cls);
}

static void connector(const char *file)
{
    char port[MPI_MAX_PORT_NAME];
    MPI_Comm inter;
    int v = 42;

    if (!read_port(file, port)) {
        ERR("no port name in %s", file);
        return;
    }
    if (MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter) != MPI_SUCCESS) {
        ERR("MPI_Comm_connect failed");
        return;
    }
    MPI_Send(&v, 1, MPI_INT, 0, 0, inter);
    MPI_Comm_disconnect(&inter);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    mpit_init();
    if (argc != 3)
        ERR("usage: stranger victim|attacker|connector FILE");
    else if (!strcmp(argv[1], "victim"))
        victim(argv[2]);
    else if (!strcmp(argv[1], "attacker"))
        attacker(argv[2]);
    else if (!strcmp(argv[1], "connector"))
        connector(argv[2]);
    else
        ERR("unknown role %s", argv[1]);
    printf("stranger %s: %d errors\n", argc > 1 ? argv[1] : "?", errs);
    mpit_finalize();
    MPI_Finalize();
    return errs != 0;
}
