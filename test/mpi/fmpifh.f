C     Fortran 77 with mpif.h over amlapi: a ring of messages
C     (one-packet, eager and rendezvous sizes), an allreduce and a
C     bcast. Prints "fmpifh: N errors" on rank 0 and exits non-zero
C     on any error.
      program fmpifh
      implicit none
      include 'mpif.h'
      integer n, maxn
      parameter (maxn = 262144)
      integer buf(maxn), sizes(4)
      integer ierr, rank, nproc, next, prev, errs, total, i, k, s
      integer status(MPI_STATUS_SIZE), cnt
      data sizes /1, 1000, 5000, 262144/
      errs = 0
      call MPI_INIT(ierr)
      call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
      call MPI_COMM_SIZE(MPI_COMM_WORLD, nproc, ierr)
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
      if (rank .eq. 0) print '(a,i0,a)', 'fmpifh: ', total, ' errors'
      call MPI_BCAST(total, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
      call MPI_FINALIZE(ierr)
      if (total .ne. 0) stop 1
      end
