##
## amlapi netmod: MPI glue (this directory) over the aml message layer (aml/).
##

if BUILD_CH4_NETMOD_AMLAPI

AM_CPPFLAGS += -I$(top_srcdir)/src/mpid/ch4/netmod/amlapi/aml \
               -I$(top_srcdir)/src/mpid/ch4/netmod/amlapi/coll_torus \
               -I$(top_srcdir)/src/mpid/ch4/shm/vnode

noinst_HEADERS += src/mpid/ch4/netmod/amlapi/amlapi_pre.h \
                  src/mpid/ch4/netmod/amlapi/amlapi_impl.h \
                  src/mpid/ch4/netmod/amlapi/amlapi_am.h \
                  src/mpid/ch4/netmod/amlapi/amlapi_progress.h \
                  src/mpid/ch4/netmod/amlapi/amlapi_proc.h \
                  src/mpid/ch4/netmod/amlapi/amlapi_request.h \
                  src/mpid/ch4/netmod/amlapi/amlapi_rma.h \
                  src/mpid/ch4/netmod/amlapi/amlapi_win.h \
                  src/mpid/ch4/netmod/amlapi/amlapi_rma_lock.h \
                  src/mpid/ch4/netmod/amlapi/amlapi_p2p.h \
                  src/mpid/ch4/netmod/amlapi/amlapi_p2p_impl.h \
                  src/mpid/ch4/netmod/amlapi/amlapi_am_hdr.h \
                  src/mpid/ch4/netmod/amlapi/amlapi_rma_layout.h \
                  src/mpid/ch4/netmod/amlapi/amlapi_rma_op.h \
                  src/mpid/ch4/netmod/amlapi/amlapi_cvar_range.h \
                  src/mpid/ch4/netmod/amlapi/amlapi_coll.h \
                  src/mpid/ch4/netmod/amlapi/coll_torus/coll_torus.h \
                  src/mpid/ch4/netmod/amlapi/coll_torus/ct_sched_int.h \
                  src/mpid/ch4/netmod/amlapi/coll_torus/ct_algo_int.h \
                  src/mpid/ch4/netmod/amlapi/netmod_inline.h \
                  src/mpid/ch4/netmod/amlapi/aml/aml.h \
                  src/mpid/ch4/netmod/amlapi/aml/aml_htab.h \
                  src/mpid/ch4/netmod/amlapi/aml/aml_impl.h \
                  src/mpid/ch4/netmod/amlapi/aml/aml_peer_ready.h \
                  src/mpid/ch4/netmod/amlapi/aml/aml_poll.h \
                  src/mpid/ch4/netmod/amlapi/aml/aml_rx_fast.h \
                  src/mpid/ch4/netmod/amlapi/aml/aml_tport.h \
                  src/mpid/ch4/netmod/amlapi/aml/aml_tports.h \
                  src/mpid/ch4/netmod/amlapi/aml/aml_ucx_keepalive.h \
                  src/mpid/ch4/netmod/amlapi/aml/aml_wire.h \
                  src/mpid/ch4/shm/vnode/vnode.h \
                  src/mpid/ch4/shm/vnode/vnode_bits.h \
                  src/mpid/ch4/shm/vnode/vnode_impl.h

# the glue's core: exit report, state and fatal error, CVAR checks, control channel, ops,
# progress
mpi_core_sources += src/mpid/ch4/netmod/amlapi/amlapi_fault.c \
                    src/mpid/ch4/netmod/amlapi/amlapi_global.c \
                    src/mpid/ch4/netmod/amlapi/amlapi_cvar.c \
                    src/mpid/ch4/netmod/amlapi/amlapi_ctl.c \
                    src/mpid/ch4/netmod/amlapi/amlapi_op.c \
                    src/mpid/ch4/netmod/amlapi/amlapi_progress.c
# native point-to-point (lowest first)
mpi_core_sources += src/mpid/ch4/netmod/amlapi/amlapi_p2p_ctrl.c \
                    src/mpid/ch4/netmod/amlapi/amlapi_p2p_recv.c \
                    src/mpid/ch4/netmod/amlapi/amlapi_p2p_match.c \
                    src/mpid/ch4/netmod/amlapi/amlapi_p2p_send.c \
                    src/mpid/ch4/netmod/amlapi/amlapi_p2p_probe.c \
                    src/mpid/ch4/netmod/amlapi/amlapi_p2p_init.c
# MPICH's active messages (MPIDIG) over aml
mpi_core_sources += src/mpid/ch4/netmod/amlapi/amlapi_am.c
# RMA (lowest first)
mpi_core_sources += src/mpid/ch4/netmod/amlapi/amlapi_rma_lock.c \
                    src/mpid/ch4/netmod/amlapi/amlapi_rma_am.c \
                    src/mpid/ch4/netmod/amlapi/amlapi_rma_shm.c \
                    src/mpid/ch4/netmod/amlapi/amlapi_rma_active.c \
                    src/mpid/ch4/netmod/amlapi/amlapi_rma_win.c
# collectives
mpi_core_sources += src/mpid/ch4/netmod/amlapi/amlapi_coll_shm.c \
                    src/mpid/ch4/netmod/amlapi/amlapi_coll.c
# dynamic processes
mpi_core_sources += src/mpid/ch4/netmod/amlapi/amlapi_spawn.c
# init and finalize of every part above; MPICH's entry points
mpi_core_sources += src/mpid/ch4/netmod/amlapi/amlapi_init.c \
                    src/mpid/ch4/netmod/amlapi/amlapi_noinline.c \
                    src/mpid/ch4/netmod/amlapi/func_table.c
# coll_torus's core: schedule generators, walk, model (no MPI header)
mpi_core_sources += src/mpid/ch4/netmod/amlapi/coll_torus/ct_topo.c \
                    src/mpid/ch4/netmod/amlapi/coll_torus/ct_sched.c \
                    src/mpid/ch4/netmod/amlapi/coll_torus/ct_walk.c \
                    src/mpid/ch4/netmod/amlapi/coll_torus/ct_model.c \
                    src/mpid/ch4/netmod/amlapi/coll_torus/ct_bcast.c \
                    src/mpid/ch4/netmod/amlapi/coll_torus/ct_allreduce.c \
                    src/mpid/ch4/netmod/amlapi/coll_torus/ct_allgather.c \
                    src/mpid/ch4/netmod/amlapi/coll_torus/ct_alltoall.c \
                    src/mpid/ch4/netmod/amlapi/coll_torus/ct_alltoall_dims.c \
                    src/mpid/ch4/netmod/amlapi/coll_torus/ct_barrier.c \
                    src/mpid/ch4/netmod/amlapi/coll_torus/ct_select.c \
                    src/mpid/ch4/netmod/amlapi/aml/aml_adaptive.c \
                    src/mpid/ch4/netmod/amlapi/aml/aml_context.c \
                    src/mpid/ch4/netmod/amlapi/aml/aml_direct.c \
                    src/mpid/ch4/netmod/amlapi/aml/aml_dispatch.c \
                    src/mpid/ch4/netmod/amlapi/aml/aml_dynamic.c \
                    src/mpid/ch4/netmod/amlapi/aml/aml_eager.c \
                    src/mpid/ch4/netmod/amlapi/aml/aml_onepacket.c \
                    src/mpid/ch4/netmod/amlapi/aml/aml_progress.c \
                    src/mpid/ch4/netmod/amlapi/aml/aml_rma.c \
                    src/mpid/ch4/netmod/amlapi/aml/aml_rndv.c \
                    src/mpid/ch4/netmod/amlapi/aml/aml_rndv_put.c \
                    src/mpid/ch4/netmod/amlapi/aml/aml_rndv_tport.c \
                    src/mpid/ch4/netmod/amlapi/aml/aml_rx.c \
                    src/mpid/ch4/netmod/amlapi/aml/aml_sync.c \
                    src/mpid/ch4/netmod/amlapi/aml/aml_tx.c \
                    src/mpid/ch4/netmod/amlapi/aml/aml_ucx.c \
                    src/mpid/ch4/netmod/amlapi/aml/aml_ucx_keepalive.c \
                    src/mpid/ch4/netmod/amlapi/aml/aml_vnode.c \
                    src/mpid/ch4/netmod/amlapi/aml/aml_util.c \
                    src/mpid/ch4/netmod/amlapi/aml/aml_wire.c \
                    src/mpid/ch4/netmod/amlapi/aml/aml_xfer.c \
                    src/mpid/ch4/shm/vnode/vnode_fail.c \
                    src/mpid/ch4/shm/vnode/vnode_seg.c \
                    src/mpid/ch4/shm/vnode/vnode_hand.c \
                    src/mpid/ch4/shm/vnode/vnode_ring.c \
                    src/mpid/ch4/shm/vnode/vnode_bell.c \
                    src/mpid/ch4/shm/vnode/vnode_cma.c \
                    src/mpid/ch4/shm/vnode/vnode_share.c \
                    src/mpid/ch4/shm/vnode/vnode_watch.c

errnames_txt_files += src/mpid/ch4/netmod/amlapi/errnames.txt

endif
