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
program read_tas
  implicit none
  integer, parameter :: nlon = 144, nlat = 73, ntime = 12
  real(4) :: field(nlon, nlat)
  real(8) :: lat(nlat), w(nlat), mean
  integer :: reclen, t, ios
  character(len=4096) :: dir

  if (command_argument_count() >= 1) then
    call get_command_argument(1, dir)
  else
    dir = '/tmp/slabfs-demo/climate.zarr'
  end if

  inquire(iolength=reclen) lat
  open(unit=11, file=trim(dir)//'/lat', access='direct', recl=reclen, &
       form='unformatted', status='old', action='read', iostat=ios)
  if (ios /= 0) stop 'cannot open lat (is the demo mounted?)'
  read(11, rec=1) lat
  close(11)
  w = cos(lat * acos(-1d0) / 180d0)

  inquire(iolength=reclen) field
  open(unit=10, file=trim(dir)//'/tas', access='direct', recl=reclen, &
       form='unformatted', status='old', action='read', iostat=ios)
  if (ios /= 0) stop 'cannot open tas (is the demo mounted?)'

  print '(a)', 'month  tas(lon=0,lat=0)  tas(lon=0,lat=-90)  global mean'
  do t = 1, ntime
    read(10, rec=t) field
    mean = sum(spread(w, 1, nlon) * real(field, 8)) / (nlon * sum(w))
    print '(i5, 2es19.8e2, f13.6)', t, field(1, 37), field(1, 1), mean
  end do
  close(10)
end program read_tas
