/*
 * amlapi netmod: the accumulate family's op applied to n elements of one predefined type, one
 * loop per (type, op) that the compiler vectorises, without MPIR_Typerep_op's generic
 * dispatch (which costs more than the rest of a one-word operation, and runs element at a
 * time: far slower than Open MPI on a large byte-sized sum;
 * docs/benchmarks/2026-11-28-figures-from-the-code.md). Used by shared-memory
 * windows and by the target of native RMA messages (MPIDI_AMLAPI_rma_apply).
 *
 * Integer sums and products wrap as the unsigned type: MPI leaves overflow undefined, C would
 * make it undefined behaviour. The logical ops give 0 or 1, as MPI's do. Max and min are
 * written as selections (t = t > o ? t : o, MPICH's order), the form the vectoriser takes.
 *
 * Only <mpi.h>: a test compares every (type, op) here with MPI_Reduce_local
 * (test/mpi/accops.c).
 */
#ifndef AMLAPI_RMA_OP_H_INCLUDED
#define AMLAPI_RMA_OP_H_INCLUDED

#include <mpi.h>
#include <stdint.h>
#include <string.h>

/* the loops below are built with the vectoriser whatever the library's -O level (GCC 12's -O2
 * vectorises only loops whose trip count it knows); on x86-64 twice, for the baseline (16
 * bytes a step) and for AVX2 (32), the loader choosing by the CPU (an ifunc) */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define MPIDI_AMLAPI_VECTORISE __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic"), \
                                              target_clones("avx2", "default")))
#elif defined(__GNUC__) && !defined(__clang__)
#define MPIDI_AMLAPI_VECTORISE __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic")))
#else
#define MPIDI_AMLAPI_VECTORISE
#endif

#define MPIDI_AMLAPI_ACC_LOOP(expr) \
    { for (MPI_Aint k = 0; k < n; k++) t[k] = (expr); } return 1

/* integer type T, U its unsigned twin */
#define MPIDI_AMLAPI_ACC_INT(name, T, U)                                                    \
    static MPIDI_AMLAPI_VECTORISE int name(MPI_Op op, T * restrict t, const T * restrict o, \
                                           MPI_Aint n)                                      \
    {                                                                                       \
        switch (op) {                                                                       \
            case MPI_SUM: MPIDI_AMLAPI_ACC_LOOP((T) ((U) o[k] + (U) t[k]));                 \
            case MPI_PROD: MPIDI_AMLAPI_ACC_LOOP((T) ((U) o[k] * (U) t[k]));                \
            case MPI_MAX: MPIDI_AMLAPI_ACC_LOOP(t[k] > o[k] ? t[k] : o[k]);                 \
            case MPI_MIN: MPIDI_AMLAPI_ACC_LOOP(t[k] < o[k] ? t[k] : o[k]);                 \
            case MPI_BAND: MPIDI_AMLAPI_ACC_LOOP(o[k] & t[k]);                              \
            case MPI_BOR: MPIDI_AMLAPI_ACC_LOOP(o[k] | t[k]);                               \
            case MPI_BXOR: MPIDI_AMLAPI_ACC_LOOP(o[k] ^ t[k]);                              \
            case MPI_LAND: MPIDI_AMLAPI_ACC_LOOP((T) ((o[k] != 0) & (t[k] != 0)));          \
            case MPI_LOR: MPIDI_AMLAPI_ACC_LOOP((T) ((o[k] != 0) | (t[k] != 0)));           \
            case MPI_LXOR: MPIDI_AMLAPI_ACC_LOOP((T) ((o[k] != 0) ^ (t[k] != 0)));          \
            case MPI_REPLACE: memcpy(t, o, (size_t) n * sizeof(T)); return 1;               \
            default: return 0;                                                              \
        }                                                                                   \
    }

#define MPIDI_AMLAPI_ACC_FLOAT(name, T)                                                     \
    static MPIDI_AMLAPI_VECTORISE int name(MPI_Op op, T * restrict t, const T * restrict o, \
                                           MPI_Aint n)                                      \
    {                                                                                       \
        switch (op) {                                                                       \
            case MPI_SUM: MPIDI_AMLAPI_ACC_LOOP(o[k] + t[k]);                               \
            case MPI_PROD: MPIDI_AMLAPI_ACC_LOOP(o[k] * t[k]);                              \
            case MPI_MAX: MPIDI_AMLAPI_ACC_LOOP(t[k] > o[k] ? t[k] : o[k]);                 \
            case MPI_MIN: MPIDI_AMLAPI_ACC_LOOP(t[k] < o[k] ? t[k] : o[k]);                 \
            case MPI_REPLACE: memcpy(t, o, (size_t) n * sizeof(T)); return 1;               \
            default: return 0;                                                              \
        }                                                                                   \
    }

MPIDI_AMLAPI_ACC_INT(MPIDI_AMLAPI_acc_i8, int8_t, uint8_t)
MPIDI_AMLAPI_ACC_INT(MPIDI_AMLAPI_acc_u8, uint8_t, uint8_t)
MPIDI_AMLAPI_ACC_INT(MPIDI_AMLAPI_acc_i16, int16_t, uint16_t)
MPIDI_AMLAPI_ACC_INT(MPIDI_AMLAPI_acc_u16, uint16_t, uint16_t)
MPIDI_AMLAPI_ACC_INT(MPIDI_AMLAPI_acc_i32, int32_t, uint32_t)
MPIDI_AMLAPI_ACC_INT(MPIDI_AMLAPI_acc_u32, uint32_t, uint32_t)
MPIDI_AMLAPI_ACC_INT(MPIDI_AMLAPI_acc_i64, int64_t, uint64_t)
MPIDI_AMLAPI_ACC_INT(MPIDI_AMLAPI_acc_u64, uint64_t, uint64_t)
MPIDI_AMLAPI_ACC_FLOAT(MPIDI_AMLAPI_acc_f32, float)
MPIDI_AMLAPI_ACC_FLOAT(MPIDI_AMLAPI_acc_f64, double)

/* The predefined integer and floating types by their width; MPI_BYTE for the bitwise ops and
 * replace only (MPI allows no other op on it). Returns 0 for any other type or op: the caller
 * then takes MPIR_Typerep_op. */
static inline int MPIDI_AMLAPI_acc_fast(MPI_Datatype dt, MPI_Op op, const void *origin,
                                        void *addr, MPI_Aint n)
{
    switch (dt) {
        case MPI_SIGNED_CHAR:
        case MPI_CHAR:
        case MPI_INT8_T:
            return MPIDI_AMLAPI_acc_i8(op, addr, origin, n);
        case MPI_UNSIGNED_CHAR:
        case MPI_UINT8_T:
            return MPIDI_AMLAPI_acc_u8(op, addr, origin, n);
        case MPI_BYTE:
            return (op == MPI_BAND || op == MPI_BOR || op == MPI_BXOR || op == MPI_REPLACE) &&
                MPIDI_AMLAPI_acc_u8(op, addr, origin, n);
        case MPI_SHORT:
        case MPI_INT16_T:
            return MPIDI_AMLAPI_acc_i16(op, addr, origin, n);
        case MPI_UNSIGNED_SHORT:
        case MPI_UINT16_T:
            return MPIDI_AMLAPI_acc_u16(op, addr, origin, n);
        case MPI_INT:
        case MPI_INT32_T:
            return MPIDI_AMLAPI_acc_i32(op, addr, origin, n);
        case MPI_UNSIGNED:
        case MPI_UINT32_T:
            return MPIDI_AMLAPI_acc_u32(op, addr, origin, n);
        case MPI_LONG:
            return sizeof(long) == 8 && MPIDI_AMLAPI_acc_i64(op, addr, origin, n);
        case MPI_LONG_LONG:
        case MPI_INT64_T:
            return MPIDI_AMLAPI_acc_i64(op, addr, origin, n);
        case MPI_UNSIGNED_LONG:
            return sizeof(unsigned long) == 8 && MPIDI_AMLAPI_acc_u64(op, addr, origin, n);
        case MPI_UNSIGNED_LONG_LONG:
        case MPI_UINT64_T:
            return MPIDI_AMLAPI_acc_u64(op, addr, origin, n);
        case MPI_FLOAT:
            return MPIDI_AMLAPI_acc_f32(op, addr, origin, n);
        case MPI_DOUBLE:
            return MPIDI_AMLAPI_acc_f64(op, addr, origin, n);
        default:
            return 0;
    }
}

#endif /* AMLAPI_RMA_OP_H_INCLUDED */
