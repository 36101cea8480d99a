! Coarray Fortran over MPI (OpenCoarrays' libcaf_mpi): collectives, puts and gets of small,
! large and strided data, sync images, events, locks, critical and atomics. Image 1 prints
! one line per check; maint/test-apps compares them with coarray_check.ref (4 images).
! Every value is a function of the image numbers, so any lost, doubled or misplaced
! transfer changes a line.
program coarray_check
  use, intrinsic :: iso_fortran_env, only: int64, event_type, lock_type, atomic_int_kind
  implicit none
  integer, parameter :: nbig = 100000
  integer :: me, n, i, k, s, x_min, x_max, p, left, right
  integer :: bc(2)
  double precision :: a(3)
  integer :: ring(3)[*]
  integer :: tok[*]
  integer(int64), allocatable :: big(:)[:]
  integer(int64) :: total, strided
  integer :: counter[*], crit_count[*]
  integer(atomic_int_kind) :: acnt[*], aval
  type(event_type) :: ev[*]
  type(lock_type) :: lk[*]
  integer :: cnt

  me = this_image()
  n = num_images()
  left = merge(n, me - 1, me == 1)
  right = merge(1, me + 1, me == n)

  ! collectives
  s = me
  call co_sum(s)
  a = [dble(me), 2d0 * me, dble(me)**2]
  call co_sum(a)
  bc = [7 * me, 11 * me]
  call co_broadcast(bc, source_image=n)
  x_min = 100 - 3 * me
  x_max = x_min
  call co_min(x_min)
  call co_max(x_max)
  p = me
  call co_reduce(p, mult)
  if (me == 1) then
    write(*, '(a,i0)') 'co_sum int: ', s
    write(*, '(a,3(1x,f0.1))') 'co_sum real:', a
    write(*, '(a,2(1x,i0))') 'co_broadcast from last image:', bc
    write(*, '(a,i0,1x,i0)') 'co_min co_max: ', x_min, x_max
    write(*, '(a,i0)') 'co_reduce product: ', p
  end if

  ! put: each image writes into its right neighbour
  ring(:)[right] = me * 100 + [1, 2, 3]
  sync all
  s = sum(ring)
  call co_sum(s)
  if (me == 1) then
    write(*, '(a,3(1x,i0))') 'put from left neighbour:', ring
    write(*, '(a,i0)') 'put sum over images: ', s
  end if

  ! get: 800 KB from every image, whole and strided
  allocate(big(nbig)[*])
  big = [(int(me, int64) * nbig + i, i = 1, nbig)]
  sync all
  if (me == 1) then
    total = 0
    strided = 0
    do k = 1, n
      total = total + sum(big(:)[k])
      strided = strided + sum(big(1:nbig:1000)[k])
    end do
    write(*, '(a,i0)') 'get whole sum: ', total
    write(*, '(a,i0)') 'get strided sum: ', strided
  end if
  sync all
  deallocate(big)

  ! sync images: a token passed along the images in order, each appending its number
  if (me == 1) then
    tok[2] = 1
    sync images (2)
    sync images (n)
    write(*, '(a,i0)') 'sync images chain: ', tok
  else
    sync images (me - 1)
    if (me < n) then
      tok[me + 1] = tok * 10 + me
      sync images (me + 1)
    else
      tok[1] = tok * 10 + me
      sync images (1)
    end if
  end if

  ! events: every other image posts to image 1
  if (me /= 1) event post (ev[1])
  if (me == 1) then
    event wait (ev, until_count=n - 1)
    call event_query(ev, cnt)
    write(*, '(a,i0,a,i0)') 'events received: ', n - 1, ' left: ', cnt
  end if
  sync all

  ! lock on image 1 around a read-modify-write of image 1's counter
  if (me == 1) counter = 0
  sync all
  do i = 1, 100
    lock (lk[1])
    counter[1] = counter[1] + 1
    unlock (lk[1])
  end do
  ! critical section around the same on another counter
  if (me == 1) crit_count = 0
  sync all
  do i = 1, 50
    critical
      crit_count[1] = crit_count[1] + me
    end critical
  end do
  ! atomics
  if (me == 1) call atomic_define(acnt, 0)
  sync all
  call atomic_add(acnt[1], me)
  sync all
  if (me == 1) then
    call atomic_ref(aval, acnt)
    write(*, '(a,i0)') 'lock counter: ', counter
    write(*, '(a,i0)') 'critical counter: ', crit_count
    write(*, '(a,i0)') 'atomic_add sum: ', aval
  end if
  sync all
  if (me == 1) write(*, '(a)') 'coarray_check done'

contains
  pure function mult(x, y) result(z)
    integer, intent(in) :: x, y
    integer :: z
    z = x * y
  end function mult
end program coarray_check
