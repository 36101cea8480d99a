/* MPS — MPI Services for dataflow/embedded applications (the HPEC 2004 MPS poster, C5).
 *
 * Beside MPI, not instead of it: named processes and links described in a topology file kept
 * outside the code (MPS_TOPOLOGY, set by mpsrun), a dedicated communicator per link, buffer
 * pools whose ownership passes between application and I/O, request timeouts and select over
 * channels. Every function returns MPS_SUCCESS or an MPS_ERR_* code; MPS_Error_detail() says
 * what was wrong (names the link, buffer or file:line). Misuse never changes a pool's state.
 *
 * Back ends (one API, MPS_Backend_name() says which one runs): native where the MPI library
 * is amlapi — channels between processes of one node share an arena (an MPI-3 shared-memory
 * window) and MPS_Buf_send lends the buffer itself: the receiver reads the sender's bytes in
 * place and its MPS_Buf_release gives the buffer back (no copy, no message); EMPS everywhere
 * else, portable over any MPI (standard calls only). MPS_BACKEND=emps|native forces one.
 */
#ifndef MPS_H_INCLUDED
#define MPS_H_INCLUDED

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif
/* the library is built with hidden visibility: only this API is exported */
#if defined(MPS_EXPORT) && defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* names of processes and links, terminating NUL included */
#define MPS_MAX_NAME 64

/* pool direction (MPS_Buf_pool_init) */
#define MPS_SND 1
#define MPS_RCV 2

/* error codes */
#define MPS_SUCCESS            0
#define MPS_EEMPTY             1   /* MPS_Buf_tryget: no buffer available now */
#define MPS_ERR_TIMEOUT        2   /* deadline passed; the request/pool is unchanged */
#define MPS_ERR_ARG            3   /* NULL pointer, bad direction, bad size/count, bad timeout */
#define MPS_ERR_TOPOLOGY       4   /* no topology, parse error (file:line), size mismatch */
#define MPS_ERR_NAME           5   /* unknown process or link name, or not an end of the link */
#define MPS_ERR_MEDIUM         6   /* the link's medium is not provided by this back end */
#define MPS_ERR_POOL           7   /* not a live pool handle (never made, or finalized) */
#define MPS_ERR_BUF_FOREIGN    8   /* the buffer belongs to another pool */
#define MPS_ERR_BUF_UNKNOWN    9   /* the pointer is no pool buffer (or not its start) */
#define MPS_ERR_BUF_NOT_OWNED 10   /* released while the I/O system owns it (twice released) */
#define MPS_ERR_BUSY          11   /* finalize: buffers held by the application or data pending;
                                      get: the application holds every buffer */
#define MPS_ERR_COMM          12   /* not a channel communicator made by MPS_Channel_create */
#define MPS_ERR_MPI           13   /* an MPI call failed (detail names it) */
#define MPS_ERR_NOMEM         14
#define MPS_ERR_TRUNCATE      15   /* a message larger than the receive pool's buffers */
#define MPS_ERR_LAST          15

/* the poster's spelling: MPS_Buf_get "may block, or return EEMPTY" */
#ifndef EEMPTY
#define EEMPTY MPS_EEMPTY
#endif

typedef struct MPS_pool *MPS_pool_t;

/* ---- processes and links (names from the topology file) ---- */

/* Creates the dedicated communicator of link chan_name between this process and its other
 * end rendpoint. Collective over the link's two processes only (other processes need not
 * call). In *comm the link's first end (as listed in the file) has rank 0. */
int MPS_Channel_create(const char *chan_name, const char *rendpoint, MPI_Comm *comm,
                       int *lrank, int *rrank);
/* name (MPS_MAX_NAME bytes) of MPI_COMM_WORLD rank `rank` */
int MPS_Process_get_name(int rank, char *name);
/* MPI_COMM_WORLD rank of the process called `name` */
int MPS_Process_get_rank(const char *name, int *rank);

/* ---- buffer pools ----
 * *p_bufsize, *p_bufcount: 0 takes the link's values from the topology file; on return they
 * hold the values used. A send pool's buffers start owned by the I/O system (free); a receive
 * pool pre-posts a receive into each of its buffers (any tag, from the other end), so data
 * lands directly in them: MPS_Buf_get hands the next filled buffer (in arrival order) to the
 * application, MPS_Buf_release gives it back to the I/O system (the receive is posted again).
 * While a receive pool lives, it takes every message the other end sends on that
 * communicator. Native back end: it also takes the other end's pool sends as hand-offs (one
 * node: MPS_Buf_get returns the sender's buffer itself), at most bufcount buffers held. */
int MPS_Buf_pool_init(MPI_Comm comm, int way, int *p_bufsize, int *p_bufcount, MPS_pool_t *pool);
/* blocking: waits for a free (send) or filled (receive) buffer; MPS_ERR_BUSY at once when the
 * application holds every buffer of the pool (nothing could ever free one) */
int MPS_Buf_get(MPS_pool_t pool, void **p_buffer);
/* non-blocking: MPS_EEMPTY (== EEMPTY) when none is available now */
int MPS_Buf_tryget(MPS_pool_t pool, void **p_buffer);
/* with a deadline: MPS_ERR_TIMEOUT after `seconds` (the pool is unchanged) */
int MPS_Buf_get_timeout(MPS_pool_t pool, void **p_buffer, double seconds);
/* gives the buffer back to the I/O system (compulsory after each use) */
int MPS_Buf_release(MPS_pool_t pool, void *buffer);
/* send pool: sends `bytes` of the buffer to the other end with `tag` and gives the buffer to
 * the I/O system at once (no wait): it returns to the pool when the send completes — EMPS:
 * when MPI completes it; native, one node: when the receiver releases it (it reads this very
 * buffer: the two ends share the sender's buffers); native, between nodes: when the receiver
 * has read it into its own buffer. The application must not touch it meanwhile
 * (MPS_GUARD=1 makes that fault on one node). */
int MPS_Buf_send(MPS_pool_t pool, void *buffer, int bytes, int tag);
/* receive pool, a buffer the application holds: bytes received and the message's tag */
int MPS_Buf_received(MPS_pool_t pool, const void *buffer, int *bytes, int *tag);
/* frees all buffers; MPS_ERR_BUSY (pool unchanged and still valid) while the application
 * holds any of them or (receive pool) received data was not taken. Sends in flight by
 * MPS_Buf_send are waited for. */
int MPS_Buf_pool_finalize(MPS_pool_t pool);
/* what the pool moved so far: buffers handed over without a copy (native back end: lent by a
 * send pool / borrowed by a receive pool), and bytes that went through the MPI library
 * (copied by it: every EMPS transfer; on the native back end, messages that were no hand-off) */
int MPS_Pool_counters(MPS_pool_t pool, long long *handoffs, long long *bytes_copied);
/* poster spelling used in its example */
#define MPS_buf_pool_init MPS_Buf_pool_init

/* ---- what MPI lacks: timeouts and select ---- */

/* MPI_Wait with a deadline (seconds >= 0). MPS_SUCCESS: completed, *req freed and set to
 * MPI_REQUEST_NULL as by MPI_Wait. MPS_ERR_TIMEOUT: *req is untouched and still active; it
 * may be waited for again (MPI_Wait, MPS_Wait_timeout) or cancelled (MPI_Cancel + MPI_Wait). */
int MPS_Wait_timeout(MPI_Request *req, MPI_Status *status, double seconds);
/* Which of `count` channels has data: *index is the first channel (round robin over calls)
 * with a message waiting — a filled buffer of its receive pool if it has one, else a message
 * any MPI_Recv on it would match (MPI_Iprobe). seconds < 0 waits forever; 0 polls once;
 * MPS_ERR_TIMEOUT when none has data by then. Nothing is received. */
int MPS_Select(int count, const MPI_Comm comms[], double seconds, int *index);

/* ---- errors ---- */
const char *MPS_Error_string(int code);
/* what the last failing call of this thread found wrong, with names */
const char *MPS_Error_detail(void);
/* "native" or "emps" */
const char *MPS_Backend_name(void);

#if defined(MPS_EXPORT) && defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif
