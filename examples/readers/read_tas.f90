! Read the demo's monthly temperature field through a slabfs mount with
! Fortran unformatted direct access: no library, no conversion.
!
! slabfs serves climate.zarr/tas, float32 of shape (time=12, lat=73,
! lon=144), as a flat row-major file (shape and dtype are in tas.json).
! Row-major [time][lat][lon] is, to Fortran's column-major eyes, twelve
! consecutive records of field(lon, lat): record t is month t. The same goes
! for lat, one record of 73 float64.
!
! Build and run (gfortran; Debian package `gfortran`):
!
!   gfortran -O2 -o read_tas examples/readers/read_tas.f90
!   ./read_tas /tmp/slabfs-demo/climate.zarr
!
! It prints, per month: the temperature at lon 0, lat 0 (the first
! longitude on the equator), at the South Pole, and the area-weighted
! (cos latitude) global mean, all in K.
!
! Record length: RECL counts bytes with gfortran but 4-byte words with
! Intel Fortran unless -assume byterecl; `inquire(iolength=...)` asks the
! compiler for the right number either way. Byte order: slabfs serves the
! machine's order by default, which is what the runtime reads; with
! `slabfs mount --byte-order big`, add convert='big_endian' (gfortran) to
! the open statements.
!
! A record that touches a chunk slabfs cannot decode fails with EIO: the
! read's iostat is then non-zero and iomsg says why (gfortran: iostat 5,
! "Input/output error"; without iostat= the program stops with a runtime
! error). After a failed read gfortran's unit may report later, healthy
! records as failed too: close it and open it again to read on.
program read_tas
  use, intrinsic :: iso_fortran_env, only: error_unit
  implicit none
  integer, parameter :: nlon = 144, nlat = 73, ntime = 12
  real(4) :: field(nlon, nlat)
  real(8) :: lat(nlat), w(nlat), mean
  integer :: reclen, t, ios
  character(len=4096) :: dir
  character(len=256) :: msg
  character(len=32) :: what

  if (command_argument_count() >= 1) then
    call get_command_argument(1, dir)
  else
    dir = '/tmp/slabfs-demo/climate.zarr'
  end if

  inquire(iolength=reclen) lat
  open(unit=11, file=trim(dir)//'/lat', access='direct', recl=reclen, &
       form='unformatted', status='old', action='read', iostat=ios)
  if (ios /= 0) call fail(trim(dir)//'/lat', 'cannot open (is the demo mounted?)')
  read(11, rec=1, iostat=ios, iomsg=msg) lat
  if (ios /= 0) call fail('lat', msg)
  close(11)
  w = cos(lat * acos(-1d0) / 180d0)

  inquire(iolength=reclen) field
  open(unit=10, file=trim(dir)//'/tas', access='direct', recl=reclen, &
       form='unformatted', status='old', action='read', iostat=ios)
  if (ios /= 0) call fail(trim(dir)//'/tas', 'cannot open (is the demo mounted?)')

  print '(a)', 'month  tas(lon=0,lat=0)  tas(lon=0,lat=-90)  global mean'
  do t = 1, ntime
    read(10, rec=t, iostat=ios, iomsg=msg) field
    if (ios /= 0) then
      write(what, '(a, i0)') 'tas, month ', t
      call fail(trim(what), msg)
    end if
    mean = sum(spread(w, 1, nlon) * real(field, 8)) / (nlon * sum(w))
    print '(i5, 2es19.8e2, f13.6)', t, field(1, 37), field(1, 1), mean
  end do
  close(10)

contains

  ! Say what failed and why on stderr, and exit with status 1 (a plain
  ! `stop 'text'` exits 0).
  subroutine fail(what, msg)
    character(len=*), intent(in) :: what, msg
    write(error_unit, '(3a)') what, ': ', trim(msg)
    stop 1
  end subroutine fail
end program read_tas
