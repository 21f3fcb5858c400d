//! The classic netCDF header (`netcdf3::header::parse`), the layout
//! computed from it (`netcdf3::layout`), and a whole file opened and read
//! as a dataset (`netcdf3::File`, the NCA / CF / CFA-0.4 detection that
//! every netCDF file goes through).
//!
//! Input: a netCDF-3 file (CDF-1, CDF-2 or CDF-5). Checked:
//!
//! - the prefix contract of `parse`: starting from 4 bytes and growing the
//!   prefix to what [`HeaderError::Short`] asks for (always more than
//!   given, never more than the file; after 16 such steps, doubling), a
//!   reader reaches exactly the result of parsing the whole file;
//! - for a header that parses and lays out: every variable's strides are
//!   C order over its shape (the first replaced by the record size for
//!   record variables), and the runs `VarLayout::runs` gives for a few
//!   boxes are, element by element, the offsets `begin + Σ idx·stride`
//!   (computed here in 128 bits, so an overflow is a mismatch);
//! - opening and reading the file through `dataset::open` does not panic.
//!
//! Seeds: `tests/fixtures/netcdf3/data` (written by netCDF4-python and
//! `ncgen`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use slabfs::engine::index::Region;
use slabfs::formats::netcdf3::header::{HeaderError, parse};
use slabfs::formats::netcdf3::layout::{Layout, VarLayout};

/// Boxes with more elements than this are not checked element by element.
const MAX_CHECKED: u64 = 4096;

fuzz_target!(|data: &[u8]| {
    let len = data.len() as u64;
    let whole = parse(data, len);

    // The caller's loop (netcdf3::read_header): growing as little as
    // allowed for the first steps (the strictest test of `needed`), then
    // doubling as the reader does (parsing is linear, so growing by
    // `needed` alone through a header of many attributes is quadratic).
    let mut have = data.len().min(4);
    let mut steps = 0;
    loop {
        match parse(&data[..have], len) {
            Err(HeaderError::Short { needed, .. }) => {
                assert!(
                    needed > have as u64 && needed <= len,
                    "Short asks for {needed} bytes with {have} given, file {len}"
                );
                steps += 1;
                have = if steps < 16 {
                    needed as usize
                } else {
                    (needed as usize).max(2 * have).min(data.len())
                };
            }
            prefix => {
                assert_eq!(prefix, whole, "a {have}-byte prefix parses differently");
                break;
            }
        }
    }

    if let Ok(h) = &whole
        && let Ok(layout) = Layout::new(h, len)
    {
        for v in layout.vars.iter().take(16) {
            check_strides(v, layout.recsize);
            for region in boxes(&v.shape) {
                check_runs(v, &region);
            }
        }
    }

    slabfs_fuzz::open_and_probe("netcdf3/data", "fuzz.nc", data);
});

fn check_strides(v: &VarLayout, recsize: u64) {
    let rank = v.shape.len();
    assert_eq!(v.strides.len(), rank);
    let mut expected = v.item as u128;
    for d in (0..rank).rev() {
        if d == 0 && v.is_record {
            assert_eq!(v.strides[0], recsize, "record stride");
        } else {
            assert_eq!(v.strides[d] as u128, expected, "stride of dimension {d}");
        }
        expected *= v.shape[d] as u128;
    }
}

/// The whole variable when small, and boxes around its middle and its end.
fn boxes(shape: &[u64]) -> Vec<Region> {
    let mut out = vec![Region::whole(shape)];
    out.push(Region {
        start: shape.iter().map(|&n| n / 2).collect(),
        count: shape.iter().map(|&n| (n - n / 2).min(2)).collect(),
    });
    out.push(Region {
        start: shape.iter().map(|&n| n.saturating_sub(2)).collect(),
        count: shape.iter().map(|&n| n.min(2)).collect(),
    });
    out.retain(|r| {
        r.count
            .iter()
            .try_fold(1u64, |a, &c| a.checked_mul(c))
            .is_some_and(|n| n <= MAX_CHECKED)
    });
    out
}

fn check_runs(v: &VarLayout, region: &Region) {
    // Reference: every element's offset, in C order over the box.
    let n = region.num_elements();
    let mut expected = Vec::with_capacity(n as usize);
    for k in 0..n {
        let mut rem = k;
        let mut off = v.begin as u128;
        for d in (0..region.rank()).rev() {
            let i = region.start[d] + rem % region.count[d];
            rem /= region.count[d];
            off += i as u128 * v.strides[d] as u128;
        }
        expected.push(off);
    }
    let mut got = Vec::with_capacity(n as usize);
    for run in v.runs(region) {
        assert!(run.len > 0 && run.len % v.item == 0, "run {run:?}");
        for j in 0..run.len / v.item {
            got.push(run.offset as u128 + (j * v.item) as u128);
        }
        assert!(got.len() as u64 <= n, "more run bytes than the box holds");
    }
    assert_eq!(got, expected, "runs of {region:?} in {v:?}");
}
