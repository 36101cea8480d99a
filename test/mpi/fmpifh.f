C     Fortran 77 with mpif.h over amlapi: a ring of messages
C     (one-packet, eager and rendezvous sizes), an allreduce and a
C     bcast. MPICH's MTest convention: rank 0 prints " No Errors"
C     (" Found N errors" and a non-zero exit on any error);
C     "fmpifh: N errors" only with MPITEST_VERBOSE set (not "0").
      program fmpifh
      implicit none
      include 'mpif.h'
      integer n, maxn
      parameter (maxn = 262144)
      integer buf(maxn), sizes(4)
      integer ierr, rank, nproc, next, prev, errs, total, i, k, s
      integer status(MPI_STATUS_SIZE), cnt
      character*8 vval
      integer vlen
      logical verbose
      data sizes /1, 1000, 5000, 262144/
      errs = 0
      call MPI_INIT(ierr)
      call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
      call MPI_COMM_SIZE(MPI_COMM_WORLD, nproc, ierr)
C     informational lines only with MPITEST_VERBOSE set, not "0"
C     (MPICH's MTest): runtests passes a test whose whole output is
C     " No Errors"
      call GET_ENVIRONMENT_VARIABLE('MPITEST_VERBOSE', vval, vlen)
      verbose = vlen .gt. 0 .and. vval .ne. '0'
      next = mod(rank + 1, nproc)
      prev = mod(rank + nproc - 1, nproc)
      do k = 1, 4
         n = sizes(k)
         do i = 1, n
            buf(i) = rank * 100000 + i + k
         enddo
         call MPI_SENDRECV_REPLACE(buf, n, MPI_INTEGER, next, k,
     &        prev, k, MPI_COMM_WORLD, status, ierr)
         call MPI_GET_COUNT(status, MPI_INTEGER, cnt, ierr)
         if (cnt .ne. n) errs = errs + 1
         if (status(MPI_SOURCE) .ne. prev) errs = errs + 1
         do i = 1, n
            if (buf(i) .ne. prev * 100000 + i + k) errs = errs + 1
         enddo
      enddo
      call MPI_ALLREDUCE(rank, s, 1, MPI_INTEGER, MPI_SUM,
     &     MPI_COMM_WORLD, ierr)
      if (s .ne. nproc * (nproc - 1) / 2) errs = errs + 1
      if (rank .eq. 0) then
         do i = 1, maxn
            buf(i) = i
         enddo
      endif
      call MPI_BCAST(buf, maxn, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
      do i = 1, maxn
         if (buf(i) .ne. i) errs = errs + 1
      enddo
      call MPI_REDUCE(errs, total, 1, MPI_INTEGER, MPI_SUM, 0,
     &     MPI_COMM_WORLD, ierr)
      if (rank .eq. 0 .and. verbose)
     &     print '(a,i0,a)', 'fmpifh: ', total, ' errors'
      if (rank .eq. 0 .and. total .ne. 0)
     &     print '(a,i0,a)', ' Found ', total, ' errors'
      if (rank .eq. 0 .and. total .eq. 0) print '(a)', ' No Errors'
      call MPI_BCAST(total, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
      call MPI_FINALIZE(ierr)
      if (total .ne. 0) stop 1
      end
