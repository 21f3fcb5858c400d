//! Where each variable's bytes are in the file: I/O-free arithmetic over a
//! parsed [`Header`] and the file's length.
//!
//! A fixed variable is one contiguous row-major block at `begin`. A record
//! variable has one slice per record: record `r` of it is at
//! `begin + r * recsize`, where `recsize` is the sum over record variables
//! of their slice size rounded up to 4 bytes — except when the file has a
//! single record variable, whose slices are packed without padding (netcdf-c
//! applies this when the rounded sum equals the first record variable's
//! rounded size, and so do we). So every variable is a strided layout: C
//! strides in bytes, with the first stride replaced by `recsize` for record
//! variables.
//!
//! [`VarLayout::runs`] turns a box of a variable into the contiguous byte
//! runs of the file that hold it, in C order over the box: trailing
//! dimensions the box covers whole merge into longer runs, and so do whole
//! records of a single, unpadded record variable. [`coalesce`] then groups
//! runs separated by small gaps into windows read with one call, trading a
//! few unneeded bytes for far fewer system calls when record variables are
//! small and interleaved. Worked example: a fixed `short v(4, 3)` at
//! `begin = 100` has strides `[6, 2]`; the box rows 1..3, columns 0..2 is
//! the runs `(106, 4)` and `(112, 4)` (the gap of 2 bytes makes them one
//! window `(106, 10)`); rows 1..3, all columns is the single run `(106, 12)`.
//!
//! The checks netcdf-c makes when it opens a file are made here too, with
//! messages saying what is wrong: at most one record dimension, only as a
//! variable's first dimension; valid dimension ids; data that starts after
//! the header and does not overlap (fixed variables in header order, then
//! the record section); no offset past the end of the file or beyond 2^64.
//! The header's `vsize` is not trusted: it is recomputed from the shape.

use super::header::{Header, NumRecs};
use crate::engine::index::Region;

/// How a variable's elements map to file offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VarLayout {
    /// Offset of element 0 (of record 0 for record variables).
    pub begin: u64,
    /// Shape, with the record dimension's length = the number of records.
    pub shape: Vec<u64>,
    /// Byte distance between consecutive indices of each dimension.
    pub strides: Vec<u64>,
    /// Bytes per element.
    pub item: u64,
    pub is_record: bool,
    /// Size of the variable (of one record's slice for record variables)
    /// rounded up to 4 bytes, as netcdf-c computes `vsize`.
    pub vsize: u64,
}

/// The layout of every variable of a file, in header order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Index of the record (unlimited) dimension, if any.
    pub record_dim: Option<usize>,
    /// Number of records: the header's, or for a streaming header as many
    /// whole records as the file holds.
    pub numrecs: u64,
    /// Bytes from one record to the next.
    pub recsize: u64,
    pub vars: Vec<VarLayout>,
}

impl Layout {
    /// Compute and check the layout of `h`'s variables in a file of
    /// `file_len` bytes. Errors are messages for [`crate::Error::Metadata`].
    pub fn new(h: &Header, file_len: u64) -> Result<Layout, String> {
        let zero_len: Vec<usize> = (0..h.dims.len()).filter(|&i| h.dims[i].len == 0).collect();
        if zero_len.len() > 1 {
            return Err(format!(
                "dimensions {:?} and {:?} both have length 0 (the record dimension): \
                 a file has at most one",
                h.dims[zero_len[0]].name, h.dims[zero_len[1]].name
            ));
        }
        let record_dim = zero_len.first().copied();

        // Per variable: (is_record, inner shape, unpadded slice bytes, vsize).
        struct Shape {
            is_record: bool,
            dims: Vec<u64>,
            bytes: u64,
            vsize: u64,
        }
        let mut shapes = Vec::with_capacity(h.vars.len());
        for v in &h.vars {
            let mut dims = Vec::with_capacity(v.dimids.len());
            let mut is_record = false;
            for (pos, &id) in v.dimids.iter().enumerate() {
                let dim = usize::try_from(id)
                    .ok()
                    .and_then(|i| h.dims.get(i))
                    .ok_or_else(|| {
                        format!(
                            "variable {:?}: dimension id {id} does not exist ({} dimensions)",
                            v.name,
                            h.dims.len()
                        )
                    })?;
                if dim.len == 0 {
                    if pos > 0 {
                        return Err(format!(
                            "variable {:?}: the record dimension {:?} is not its first",
                            v.name, dim.name
                        ));
                    }
                    is_record = true;
                } else {
                    dims.push(dim.len);
                }
            }
            let item = v.nc_type.size() as u64;
            let bytes = dims
                .iter()
                .try_fold(item, |acc, &d| acc.checked_mul(d))
                .filter(|&b| b <= u64::MAX - 3)
                .ok_or_else(|| format!("variable {:?}: size overflows 2^64 bytes", v.name))?;
            shapes.push(Shape {
                is_record,
                dims,
                bytes,
                vsize: bytes.div_ceil(4) * 4,
            });
        }

        // The record size, with netcdf-c's packing of a lone record variable.
        let mut recsize = 0u64;
        let mut first_rec = None;
        for (i, s) in shapes.iter().enumerate().filter(|(_, s)| s.is_record) {
            first_rec.get_or_insert(i);
            recsize = recsize
                .checked_add(s.vsize)
                .ok_or("record size overflows 2^64 bytes")?;
        }
        if let Some(f) = first_rec
            && recsize == shapes[f].vsize
        {
            recsize = shapes[f].bytes;
        }

        let begin_rec = first_rec.map(|f| h.vars[f].begin);
        let numrecs = match h.numrecs {
            NumRecs::Known(n) => n,
            NumRecs::Streaming => match begin_rec {
                Some(b) if recsize > 0 => file_len.saturating_sub(b) / recsize,
                _ => 0,
            },
        };

        // Data offsets: after the header, in order, not overlapping, and
        // not past the end of the file (netcdf-c places the record section
        // of a file with no records past its end, so that is allowed).
        let mut prev_end = h.len;
        let mut prev_name = "the header".to_string();
        for (v, s) in h.vars.iter().zip(&shapes) {
            if v.begin > file_len && (!s.is_record || numrecs > 0) {
                return Err(format!(
                    "variable {:?} begins at byte {}, past the end of the file ({file_len} bytes)",
                    v.name, v.begin
                ));
            }
            if s.is_record {
                continue;
            }
            if v.begin < prev_end {
                return Err(format!(
                    "variable {:?} begins at byte {}, inside {prev_name} (which ends at byte {prev_end})",
                    v.name, v.begin
                ));
            }
            prev_end = v.begin.saturating_add(s.vsize);
            prev_name = format!("variable {:?}", v.name);
        }
        if let Some(begin_rec) = begin_rec {
            for (v, s) in h.vars.iter().zip(&shapes).filter(|(_, s)| s.is_record) {
                if v.begin < prev_end {
                    return Err(format!(
                        "record variable {:?} begins at byte {}, inside {prev_name} (which ends at byte {prev_end})",
                        v.name, v.begin
                    ));
                }
                // Its slice must lie inside the first record.
                let slice_end = v.begin.saturating_add(s.bytes);
                if slice_end > begin_rec.saturating_add(recsize) {
                    return Err(format!(
                        "record variable {:?}: bytes {}..{slice_end} overrun the record \
                         {begin_rec}..{} ({recsize} bytes per record)",
                        v.name,
                        v.begin,
                        begin_rec.saturating_add(recsize)
                    ));
                }
                prev_end = v.begin.saturating_add(s.vsize);
                prev_name = format!("variable {:?}", v.name);
            }
        }

        let mut vars = Vec::with_capacity(h.vars.len());
        for (v, s) in h.vars.iter().zip(shapes) {
            let item = v.nc_type.size() as u64;
            let mut strides = vec![item; s.dims.len()];
            for d in (0..s.dims.len().saturating_sub(1)).rev() {
                // Cannot overflow: the product of all dims * item was checked.
                strides[d] = strides[d + 1] * s.dims[d + 1];
            }
            let mut shape = s.dims;
            // One past the last byte, checked so no run offset can overflow.
            let end = if s.is_record {
                shape.insert(0, numrecs);
                strides.insert(0, recsize);
                match numrecs.checked_sub(1) {
                    None => Some(v.begin),
                    Some(last) => last
                        .checked_mul(recsize)
                        .and_then(|o| o.checked_add(s.bytes))
                        .and_then(|o| o.checked_add(v.begin)),
                }
            } else {
                v.begin.checked_add(s.bytes)
            };
            if end.is_none() {
                return Err(format!(
                    "variable {:?}: {numrecs} records of {recsize} bytes from byte {} \
                     overflow 2^64 bytes",
                    v.name, v.begin
                ));
            }
            vars.push(VarLayout {
                begin: v.begin,
                shape,
                strides,
                item,
                is_record: s.is_record,
                vsize: s.vsize,
            });
        }
        Ok(Layout {
            record_dim,
            numrecs,
            recsize,
            vars,
        })
    }
}

/// A contiguous range of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub offset: u64,
    pub len: u64,
}

impl VarLayout {
    /// The runs of the file holding `region` (inside the shape), in C order
    /// over the region: concatenated, they are the region's elements.
    pub fn runs(&self, region: &Region) -> Runs {
        let rank = self.shape.len();
        // Dimensions k.. lie inside one run: each is laid out contiguously
        // after the ones inside it, and all but the outermost of them are
        // covered whole by the region. `inner` is the bytes of one index
        // of dimension k-1's inside (whole dimensions k..).
        let mut k = rank;
        let mut inner = self.item;
        let mut len = self.item;
        while k > 0 {
            let d = k - 1;
            if self.strides[d] != inner {
                break;
            }
            k = d;
            len = region.count[d] * inner;
            if region.count[d] != self.shape[d] {
                break;
            }
            inner = len;
        }
        let base = (k..rank).map(|d| region.start[d] * self.strides[d]).sum();
        Runs {
            begin: self.begin,
            strides: self.strides[..k].to_vec(),
            start: region.start[..k].to_vec(),
            count: region.count[..k].to_vec(),
            idx: region.start[..k].to_vec(),
            base,
            len,
            done: region.count.contains(&0),
        }
    }
}

/// Iterator over the runs of a region (see [`VarLayout::runs`]): an
/// odometer over the dimensions outside the run.
#[derive(Debug, Clone)]
pub struct Runs {
    begin: u64,
    strides: Vec<u64>,
    start: Vec<u64>,
    count: Vec<u64>,
    idx: Vec<u64>,
    /// Offset of the run's first element within its outer position.
    base: u64,
    len: u64,
    done: bool,
}

impl Iterator for Runs {
    type Item = Run;

    fn next(&mut self) -> Option<Run> {
        if self.done {
            return None;
        }
        let offset = self.begin
            + self.base
            + self
                .idx
                .iter()
                .zip(&self.strides)
                .map(|(i, s)| i * s)
                .sum::<u64>();
        // Advance the odometer, innermost outer dimension first.
        self.done = true;
        for d in (0..self.idx.len()).rev() {
            self.idx[d] += 1;
            if self.idx[d] < self.start[d] + self.count[d] {
                self.done = false;
                break;
            }
            self.idx[d] = self.start[d];
        }
        Some(Run {
            offset,
            len: self.len,
        })
    }
}

/// Runs read together with one system call: `[offset, offset + len)`
/// holds `runs` (more than one only when the gaps between them are small).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub offset: u64,
    pub len: u64,
    pub runs: Vec<Run>,
}

/// Group consecutive increasing runs into windows: a run joins the current
/// window when the gap before it is at most `max_gap` bytes and the window
/// stays within `max_window` bytes. A single run is never split, however
/// long.
pub fn coalesce(
    runs: impl Iterator<Item = Run>,
    max_gap: u64,
    max_window: u64,
) -> impl Iterator<Item = Window> {
    let mut runs = runs.peekable();
    std::iter::from_fn(move || {
        let first = runs.next()?;
        let mut w = Window {
            offset: first.offset,
            len: first.len,
            runs: vec![first],
        };
        while let Some(next) = runs.peek() {
            let end = w.offset + w.len;
            let fits = next.offset >= end
                && next.offset - end <= max_gap
                && next.offset + next.len - w.offset <= max_window;
            if !fits {
                break;
            }
            w.len = next.offset + next.len - w.offset;
            w.runs.push(*next);
            runs.next();
        }
        Some(w)
    })
}

/// Fill `out` with the bytes of `runs`, in order, merged into windows
/// across gaps up to `max_gap` ([`coalesce`]): a window of one run read by
/// `pread` straight into its place in `out`, a window of several read
/// whole into a scratch buffer and its runs copied out. Returns the number
/// of reads.
pub fn read_runs<E>(
    runs: impl Iterator<Item = Run>,
    max_gap: u64,
    max_window: u64,
    out: &mut [u8],
    mut pread: impl FnMut(&mut [u8], u64) -> Result<(), E>,
) -> Result<usize, E> {
    let mut pos = 0usize;
    let mut reads = 0usize;
    let mut scratch = Vec::new();
    for w in coalesce(runs, max_gap, max_window) {
        reads += 1;
        if let [run] = w.runs[..] {
            let len = run.len as usize;
            pread(&mut out[pos..pos + len], run.offset)?;
            pos += len;
            continue;
        }
        scratch.resize(w.len as usize, 0);
        pread(&mut scratch, w.offset)?;
        pos = copy_runs(&w, &scratch, out, pos);
    }
    debug_assert_eq!(pos, out.len(), "runs cover the output");
    Ok(reads)
}

/// Copy the runs of window `w`, read into `buf`, to `out` from `pos` on;
/// returns where the next run goes.
pub fn copy_runs(w: &Window, buf: &[u8], out: &mut [u8], mut pos: usize) -> usize {
    for run in &w.runs {
        let at = (run.offset - w.offset) as usize;
        let len = run.len as usize;
        out[pos..pos + len].copy_from_slice(&buf[at..at + len]);
        pos += len;
    }
    pos
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::index::c_strides;
    use crate::formats::netcdf3::header::{parse, tests::Writer};
    use crate::formats::netcdf3::types::Format;
    use proptest::prelude::*;

    fn layout_of(w: &Writer, file_len: u64) -> Result<Layout, String> {
        Layout::new(&parse(&w.buf, file_len).unwrap(), file_len)
    }

    #[test]
    fn worked_example() {
        let v = VarLayout {
            begin: 100,
            shape: vec![4, 3],
            strides: vec![6, 2],
            item: 2,
            is_record: false,
            vsize: 24,
        };
        let r = |start: [u64; 2], count: [u64; 2]| {
            v.runs(&Region {
                start: start.to_vec(),
                count: count.to_vec(),
            })
            .collect::<Vec<_>>()
        };
        let two = r([1, 0], [2, 2]);
        assert_eq!(
            two,
            [
                Run {
                    offset: 106,
                    len: 4
                },
                Run {
                    offset: 112,
                    len: 4
                }
            ]
        );
        let w: Vec<_> = coalesce(two.into_iter(), 2, 1 << 20).collect();
        assert_eq!((w.len(), w[0].offset, w[0].len), (1, 106, 10));
        assert_eq!(
            r([1, 0], [2, 3]),
            [Run {
                offset: 106,
                len: 12
            }]
        );
    }

    #[test]
    fn record_size_and_lone_record_variable() {
        // Two record variables: short(t, 3) is 6 bytes padded to 8, byte(t) 1 -> 4.
        let mut w = Writer::new(Format::Classic, 2);
        w.dims(&[("t", 0), ("x", 3)])
            .absent()
            .vars(&[("s", &[0, 1], 3, 200), ("b", &[0], 1, 208)]);
        let l = layout_of(&w, 1000).unwrap();
        assert_eq!((l.recsize, l.numrecs, l.record_dim), (12, 2, Some(0)));
        assert_eq!(l.vars[0].strides, vec![12, 2]);
        assert_eq!(l.vars[1].shape, vec![2]);

        // A lone record variable is packed: 6 bytes per record.
        let mut w = Writer::new(Format::Classic, 5);
        w.dims(&[("t", 0), ("x", 3)])
            .absent()
            .vars(&[("f", &[1], 6, 200), ("s", &[0, 1], 3, 224)]);
        let l = layout_of(&w, 1000).unwrap();
        assert_eq!(l.recsize, 6);
        assert_eq!(l.vars[1].strides, vec![6, 2]);
        // ...so a region of whole records is one run.
        let runs: Vec<_> = l.vars[1].runs(&Region::whole(&[5, 3])).collect();
        assert_eq!(
            runs,
            [Run {
                offset: 224,
                len: 30
            }]
        );
    }

    #[test]
    fn streaming_numrecs_counts_whole_records() {
        let mut w = Writer::new(Format::Offset64, u32::MAX as u64);
        w.dims(&[("t", 0)])
            .absent()
            .vars(&[("a", &[0], 4, 200), ("b", &[0], 6, 204)]);
        // 12 bytes per record from byte 200: 3 whole records in 240 bytes.
        let l = layout_of(&w, 240).unwrap();
        assert_eq!((l.recsize, l.numrecs), (12, 3));
        assert_eq!(layout_of(&w, 247).unwrap().numrecs, 3);
        assert_eq!(layout_of(&w, 248).unwrap().numrecs, 4);
        // No records at all: the record section may begin past the end.
        assert_eq!(layout_of(&w, 150).unwrap().numrecs, 0);
    }

    /// Regression (found by `runs_match_element_offsets`): a 1-D record
    /// variable whose records are padded is one run per record, not one
    /// run of `count * recsize` bytes.
    #[test]
    fn padded_one_dimensional_record_variable_is_one_run_per_record() {
        let v = VarLayout {
            begin: 64,
            shape: vec![3],
            strides: vec![4],
            item: 1,
            is_record: true,
            vsize: 4,
        };
        let runs: Vec<_> = v.runs(&Region::whole(&[3])).collect();
        let offsets: Vec<_> = runs.iter().map(|r| (r.offset, r.len)).collect();
        assert_eq!(offsets, [(64, 1), (68, 1), (72, 1)]);
    }

    #[test]
    fn an_empty_record_section_may_begin_past_the_end() {
        // netcdf-c writes such files when no record was ever written.
        let mut w = Writer::new(Format::Classic, 0);
        w.dims(&[("t", 0)]).absent().vars(&[("a", &[0], 4, 200)]);
        assert_eq!(layout_of(&w, 150).unwrap().vars[0].shape, vec![0]);
        let mut w = Writer::new(Format::Classic, 1);
        w.dims(&[("t", 0)]).absent().vars(&[("a", &[0], 4, 200)]);
        let e = layout_of(&w, 150).unwrap_err();
        assert!(e.contains("past the end of the file (150 bytes)"), "{e}");
    }

    #[test]
    fn inconsistent_layouts_are_errors() {
        let err = |w: &Writer, len: u64, want: &str| {
            let e = layout_of(w, len).unwrap_err();
            assert!(e.contains(want), "{e} does not contain {want:?}");
        };
        let mut w = Writer::new(Format::Classic, 0);
        w.dims(&[("a", 0), ("b", 0)]).absent().absent();
        err(&w, 100, "both have length 0");

        let mut w = Writer::new(Format::Classic, 0);
        w.dims(&[("x", 2), ("t", 0)])
            .absent()
            .vars(&[("v", &[0, 1], 5, 200)]);
        err(&w, 300, "is not its first");

        let mut w = Writer::new(Format::Classic, 0);
        w.dims(&[("x", 2)]).absent().vars(&[("v", &[3], 5, 200)]);
        err(&w, 300, "dimension id 3 does not exist");

        let mut w = Writer::new(Format::Classic, 0);
        w.dims(&[("x", 2)]).absent().vars(&[("v", &[0], 5, 200)]);
        err(&w, 100, "past the end of the file (100 bytes)");

        let mut w = Writer::new(Format::Classic, 0);
        w.dims(&[("x", 2)]).absent().vars(&[("v", &[0], 5, 8)]);
        err(&w, 300, "inside the header");

        let mut w = Writer::new(Format::Classic, 0);
        w.dims(&[("x", 2)])
            .absent()
            .vars(&[("v", &[0], 5, 200), ("w", &[0], 5, 204)]);
        err(&w, 300, "inside variable \"v\"");

        let mut w = Writer::new(Format::Data64, 0);
        w.dims(&[("x", 1 << 40), ("y", 1 << 40)])
            .absent()
            .vars(&[("v", &[0, 1], 5, 200)]);
        err(&w, 300, "overflows 2^64");

        let mut w = Writer::new(Format::Data64, u64::MAX - 1);
        w.dims(&[("t", 0), ("x", 1 << 20)])
            .absent()
            .vars(&[("v", &[0, 1], 6, 200)]);
        err(&w, 300, "overflow 2^64 bytes");
    }

    /// Element-by-element reference: the byte offset of each element of
    /// `region` in C order.
    fn reference(v: &VarLayout, region: &Region) -> Vec<u64> {
        let n = region.num_elements();
        let cs = c_strides(&region.count);
        (0..n)
            .map(|k| {
                let per_dim = region.start.iter().zip(&region.count).zip(&cs);
                v.begin
                    + per_dim
                        .zip(&v.strides)
                        .map(|(((s, c), cs), stride)| (s + (k / cs) % c) * stride)
                        .sum::<u64>()
            })
            .collect()
    }

    fn expand(v: &VarLayout, runs: impl Iterator<Item = Run>) -> Vec<u64> {
        runs.flat_map(|r| (0..r.len / v.item).map(move |i| r.offset + i * v.item))
            .collect()
    }

    prop_compose! {
        fn layout_and_region()(
            shape in prop::collection::vec(1u64..5, 0..=4),
            item in prop::sample::select(vec![1u64, 2, 4, 8]),
            record in any::<bool>(),
            extra in 0u64..9,
        )(
            starts in shape.iter().map(|&d| 0..d).collect::<Vec<_>>(),
            fracs in prop::collection::vec(0.0f64..=1.0, shape.len()),
            shape in Just(shape), item in Just(item), record in Just(record), extra in Just(extra),
        ) -> (VarLayout, Region) {
            let mut strides = c_strides(&shape).iter().map(|s| s * item).collect::<Vec<_>>();
            let is_record = record && !shape.is_empty();
            if is_record {
                // Other record variables' bytes between records, or none.
                strides[0] += extra;
            }
            let count = shape.iter().zip(&starts).zip(&fracs)
                .map(|((&d, &s), &f)| 1 + ((d - s - 1) as f64 * f) as u64)
                .collect();
            let v = VarLayout { begin: 64, shape, strides, item, is_record, vsize: 0 };
            (v, Region { start: starts, count })
        }
    }

    proptest! {
        #[test]
        fn runs_match_element_offsets((v, region) in layout_and_region()) {
            let want = reference(&v, &region);
            prop_assert_eq!(expand(&v, v.runs(&region)), want.clone());
            // Coalesced windows hold the same runs, each window increasing
            // and within bounds unless it is a single run.
            let windows: Vec<_> = coalesce(v.runs(&region), 5, 32).collect();
            for w in &windows {
                prop_assert!(w.runs.len() == 1 || w.len <= 32);
                for r in &w.runs {
                    prop_assert!(r.offset >= w.offset && r.offset + r.len <= w.offset + w.len);
                }
            }
            let flat = windows.into_iter().flat_map(|w| w.runs);
            prop_assert_eq!(expand(&v, flat), want);
        }
    }
}
