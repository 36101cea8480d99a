! Fortran 2008 with "use mpi_f08" over amlapi: typed handles, a ring of messages (one-packet,
! eager and rendezvous sizes), probe, a communicator split and RMA (fence, put, get). MPICH's
! MTest convention: rank 0 prints " No Errors" (" Found N errors" and a non-zero exit on any
! error); "fmpif08: N errors" only with MPITEST_VERBOSE set (not "0").
program fmpif08
    use mpi_f08
    implicit none
    integer, parameter :: maxn = 200000
    integer :: rank, nproc, errs, total, next, prev, k, i, cnt, half
    integer :: sizes(3) = [3, 3000, maxn]
    integer, allocatable :: buf(:)
    integer, target :: winbuf(8)
    type(MPI_Status) :: st
    type(MPI_Comm) :: sub
    type(MPI_Win) :: win
    integer(kind=MPI_ADDRESS_KIND) :: wsize, disp
    integer :: got(8), me(1)
    character(len=8) :: vval
    integer :: vlen
    logical :: verbose

    errs = 0
    call MPI_Init()
    call MPI_Comm_rank(MPI_COMM_WORLD, rank)
    call MPI_Comm_size(MPI_COMM_WORLD, nproc)
    ! informational lines only with MPITEST_VERBOSE set, not "0" (MPICH's MTest): runtests
    ! passes a test whose whole output is " No Errors"
    call get_environment_variable('MPITEST_VERBOSE', vval, vlen)
    verbose = vlen > 0 .and. vval /= '0'
    next = mod(rank + 1, nproc)
    prev = mod(rank + nproc - 1, nproc)
    allocate(buf(maxn))
    do k = 1, 3
        buf(1:sizes(k)) = [(rank * 7 + i + k, i = 1, sizes(k))]
        if (mod(rank, 2) == 0) then
            call MPI_Send(buf, sizes(k), MPI_INTEGER, next, k, MPI_COMM_WORLD)
            call MPI_Probe(prev, k, MPI_COMM_WORLD, st)
            call MPI_Get_count(st, MPI_INTEGER, cnt)
            if (cnt /= sizes(k)) errs = errs + 1
            call MPI_Recv(buf, sizes(k), MPI_INTEGER, prev, k, MPI_COMM_WORLD, st)
        else
            call MPI_Probe(prev, k, MPI_COMM_WORLD, st)
            call MPI_Get_count(st, MPI_INTEGER, cnt)
            if (cnt /= sizes(k)) errs = errs + 1
            block
                integer, allocatable :: tmp(:)
                allocate(tmp(sizes(k)))
                call MPI_Recv(tmp, sizes(k), MPI_INTEGER, prev, k, MPI_COMM_WORLD, st)
                call MPI_Send(buf, sizes(k), MPI_INTEGER, next, k, MPI_COMM_WORLD)
                buf(1:sizes(k)) = tmp
            end block
        end if
        if (st%MPI_SOURCE /= prev) errs = errs + 1
        do i = 1, sizes(k)
            if (buf(i) /= prev * 7 + i + k) errs = errs + 1
        end do
    end do
    ! halves of the world
    call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), rank, sub)
    call MPI_Allreduce(1, half, 1, MPI_INTEGER, MPI_SUM, sub)
    if (half /= (nproc + 1 - mod(rank, 2)) / 2) errs = errs + 1
    call MPI_Comm_free(sub)
    ! RMA: each rank puts its rank into slot 1 of the next rank's window, then reads it back
    winbuf = -1
    wsize = 8 * 4
    call MPI_Win_create(winbuf, wsize, 4, MPI_INFO_NULL, MPI_COMM_WORLD, win)
    call MPI_Win_fence(0, win)
    disp = 0
    me(1) = rank     ! a variable: the origin buffer must live until the fence
    call MPI_Put(me, 1, MPI_INTEGER, next, disp, 1, MPI_INTEGER, win)
    call MPI_Win_fence(0, win)
    if (winbuf(1) /= prev) errs = errs + 1
    got = 0
    call MPI_Get(got, 1, MPI_INTEGER, next, disp, 1, MPI_INTEGER, win)
    call MPI_Win_fence(0, win)
    if (got(1) /= rank) errs = errs + 1
    call MPI_Win_free(win)
    call MPI_Allreduce(errs, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
    if (rank == 0 .and. verbose) print '(a,i0,a)', 'fmpif08: ', total, ' errors'
    if (rank == 0 .and. total /= 0) print '(a,i0,a)', ' Found ', total, ' errors'
    if (rank == 0 .and. total == 0) print '(a)', ' No Errors'
    call MPI_Finalize()
    if (total /= 0) stop 1
end program fmpif08
