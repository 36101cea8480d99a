[#] start of __file__
dnl MPICH_SUBCFG_AFTER=src/mpid/ch4

dnl amlapi: LAPI / Blue Gene/L style message layer over UCX UCP active messages.
dnl The AM_CONDITIONAL is evaluated unconditionally so ch3 builds still see it defined.
AC_DEFUN([PAC_SUBCFG_PREREQ_]PAC_SUBCFG_AUTO_SUFFIX,[
    AM_COND_IF([BUILD_CH4],[
        for net in $ch4_netmods ; do
            if test "$net" = "amlapi" ; then
                build_ch4_netmod_amlapi=yes
                AC_DEFINE(HAVE_CH4_NETMOD_AMLAPI,1,[amlapi netmod is built])
                if test "$build_ch4_locality_info" != "yes" ; then
                    AC_DEFINE(MPIDI_BUILD_CH4_LOCALITY_INFO, 1, [CH4 should build locality info])
                    build_ch4_locality_info="yes"
                fi
            fi
        done
    ])
    AM_CONDITIONAL([BUILD_CH4_NETMOD_AMLAPI],[test "X$build_ch4_netmod_amlapi" = "Xyes"])
])dnl

AC_DEFUN([PAC_SUBCFG_BODY_]PAC_SUBCFG_AUTO_SUFFIX,[
AM_COND_IF([BUILD_CH4_NETMOD_AMLAPI],[
    AC_MSG_NOTICE([RUNNING CONFIGURE FOR ch4:amlapi])
    dnl aml needs an installed UCX with the nbx active-message API (ucp_am_send_nbx,
    dnl ucp_worker_set_am_recv_handler); the embedded-UCX fallback belongs to ch4:ucx.
    if test "$pac_have_ucx" != "yes" ; then
        AC_MSG_ERROR([ch4:amlapi needs UCX (>= 1.11): install libucx-dev or pass --with-ucx=DIR])
    fi
    AC_MSG_CHECKING([if UCX is recent enough for amlapi (>= 1.11)])
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([#include <ucp/api/ucp.h>], [
                       #if UCP_VERSION(UCP_API_MAJOR, UCP_API_MINOR) < UCP_VERSION(1, 11)
                       #error
                       #endif
                       return 0;])],[amlapi_ucx_ok=yes],[amlapi_ucx_ok=no])
    AC_MSG_RESULT([$amlapi_ucx_ok])
    if test "$amlapi_ucx_ok" = "no" ; then
        AC_MSG_ERROR([UCX is too old for ch4:amlapi (need >= 1.11)])
    fi
    PAC_LIBS_ADD([-lucp -lucs])
    dnl The glue and aml take no VCI or per-object lock: with MPI_THREAD_MULTIPLE they rely on
    dnl the global critical section (MPICH 4.0.2's default) to let one thread at a time into the
    dnl netmod. A finer mode would let threads into aml concurrently, so refuse it here.
    dnl thread_granularity is set by the top-level configure before the subsystem bodies run.
    case "$thread_granularity" in
        MPICH_THREAD_GRANULARITY__SINGLE|MPICH_THREAD_GRANULARITY__GLOBAL)
            ;;
        *)
            AC_MSG_ERROR([ch4:amlapi supports only --enable-thread-cs=global (the default): --enable-thread-cs=$enable_thread_cs needs per-VCI locks that amlapi does not take])
            ;;
    esac
])dnl
])dnl

[#] end of __file__
