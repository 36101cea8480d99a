! Fortran 90 with "use mpi" over amlapi: nonblocking exchange with every peer (one-packet,
! eager and rendezvous sizes), a derived datatype, and a reduction of doubles. MPICH's MTest
! convention: rank 0 prints " No Errors" (" Found N errors" and a non-zero exit on any error);
! "fusempi: N errors" only with MPITEST_VERBOSE set (not "0").
program fusempi
    use mpi
    implicit none
    integer, parameter :: maxn = 300000
    integer :: ierr, rank, nproc, errs, total, peer, k, i, nreq, vec
    integer :: sizes(3) = [2, 4000, maxn]
    double precision, allocatable :: sbuf(:, :), rbuf(:, :)
    double precision :: x, sx
    integer, allocatable :: reqs(:)
    integer :: col(10)
    character(len=8) :: vval
    integer :: vlen
    logical :: verbose

    errs = 0
    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, nproc, ierr)
    ! informational lines only with MPITEST_VERBOSE set, not "0" (MPICH's MTest): runtests
    ! passes a test whose whole output is " No Errors"
    call get_environment_variable('MPITEST_VERBOSE', vval, vlen)
    verbose = vlen > 0 .and. vval /= '0'
    allocate(sbuf(maxn, 0:nproc - 1), rbuf(maxn, 0:nproc - 1), reqs(2 * nproc))
    do k = 1, 3
        nreq = 0
        do peer = 0, nproc - 1
            sbuf(1:sizes(k), peer) = [(dble(rank * 1000 + peer + i), i = 1, sizes(k))]
            rbuf(1:sizes(k), peer) = -1
            nreq = nreq + 1
            call MPI_Irecv(rbuf(1, peer), sizes(k), MPI_DOUBLE_PRECISION, peer, k, &
                           MPI_COMM_WORLD, reqs(nreq), ierr)
            nreq = nreq + 1
            call MPI_Isend(sbuf(1, peer), sizes(k), MPI_DOUBLE_PRECISION, peer, k, &
                           MPI_COMM_WORLD, reqs(nreq), ierr)
        end do
        call MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE, ierr)
        do peer = 0, nproc - 1
            do i = 1, sizes(k)
                if (rbuf(i, peer) /= dble(peer * 1000 + rank + i)) errs = errs + 1
            end do
        end do
    end do
    ! every other integer of 20, as one vector type
    call MPI_Type_vector(10, 1, 2, MPI_INTEGER, vec, ierr)
    call MPI_Type_commit(vec, ierr)
    if (rank == 0) then
        col = [(i * i, i = 1, 10)]
        do peer = 1, nproc - 1
            call MPI_Send(col, 10, MPI_INTEGER, peer, 9, MPI_COMM_WORLD, ierr)
        end do
    else
        block
            integer :: wide(20)
            wide = 0
            call MPI_Recv(wide, 1, vec, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
            do i = 1, 10
                if (wide(2 * i - 1) /= i * i .or. wide(2 * i) /= 0) errs = errs + 1
            end do
        end block
    end if
    call MPI_Type_free(vec, ierr)
    x = dble(rank) + 0.5d0
    call MPI_Allreduce(x, sx, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    if (abs(sx - (dble(nproc * (nproc - 1)) / 2 + 0.5d0 * nproc)) > 1d-9) errs = errs + 1
    call MPI_Allreduce(errs, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    if (rank == 0 .and. verbose) print '(a,i0,a)', 'fusempi: ', total, ' errors'
    if (rank == 0 .and. total /= 0) print '(a,i0,a)', ' Found ', total, ' errors'
    if (rank == 0 .and. total == 0) print '(a)', ' No Errors'
    call MPI_Finalize(ierr)
    if (total /= 0) stop 1
end program fusempi
