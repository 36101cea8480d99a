/* The tests of vnode_tests, by file. */
#ifndef VT_TESTS_H_INCLUDED
#define VT_TESTS_H_INCLUDED

#include "vnode_impl.h"

/* idle polls that must demote every direct peer */
#define VNODE_IDLE_POLLS (VNODE_IDLE_DEMOTE + 100)

/* vt_setup_tests.c */
int t_malformed_src(void);
int t_malformed_len0(void);
int t_malformed_len_big(void);
int t_malformed_hlen0(void);
int t_malformed_hlen_gt_len(void);
int t_malformed_overrun(void);
int t_malformed_pad(void);
int t_malformed_seq(void);
int t_malformed_long_small(void);
int t_stale_cells(void);
int t_cleanup_kill9(void);
int t_watch(void);
int t_two_jobs(void);
int t_noshm(void);
int t_auto_ring(void);
int t_attach_timeout(void);
int t_mismatch(void);
int t_no_names(void);
int t_alone(void);
int t_hand_foreign(void);
int t_shared_forged(void);
int t_watch_finalize(void);
int t_bell_nlocal(void);
int t_ptracer(void);
int t_basic(void);

/* vt_copy_tests.c */
int t_single_copy(void);
int t_single_copy_refused(void);
int t_shared_copy(void);

/* vt_bench.c */
int vt_bench(void);

#endif
