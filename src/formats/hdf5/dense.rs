//! Dense storage: the links of a large new-style group and the attributes
//! of an object with many, kept in a fractal heap and indexed by name in
//! a version 2 B-tree (spec III.G "Fractal Heap", III.A.2 "Version 2
//! B-trees").
//!
//! netCDF-4 tracks creation order on every group and variable, so a group
//! of more than 8 members or a variable of more than 8 attributes is
//! stored this way: every realistic netCDF-4 file has some.
//!
//! Reading is a walk over every record of the name index (the order does
//! not matter: callers sort by name) and, for each record's heap ID, a
//! lookup of the object in the heap's doubling table of direct and
//! indirect blocks. Huge objects, larger than the heap's largest managed
//! object (an attribute of 64 KiB or more), are stored outside the
//! blocks, in a range of their own: their heap ID holds that range's
//! address and length when it is wide enough ("direct"), else a key into
//! the heap's v2 B-tree of huge objects, whose records give the range.
//! Heaps with I/O filters are refused; netCDF and h5py never write them
//! for links or attributes.

use std::cell::OnceCell;
use std::collections::{HashMap, HashSet};

use super::error::{H5Result, Hdf5Error};
use super::io::{Cursor, H5File, check_checksum};
use super::message::{MSG_ATTRIBUTE, MSG_FLAG_SHARED};

/// Deeper trees are corrupt (a v2 B-tree of 512-byte nodes holds billions
/// of records at depth 8).
const MAX_DEPTH: u16 = 16;
/// Rows of a doubling table beyond this are corrupt (2^64 bytes of heap).
const MAX_ROWS: u64 = 64;

/// The object of heap ID `id` in the fractal heap at `heap` (a message
/// in the shared object header message heap).
pub fn heap_object(f: &H5File, heap: u64, id: &[u8], what: &str) -> H5Result<Vec<u8>> {
    Heap::open(f, heap, what)?.object(f, id, what)
}

/// The objects a dense index holds, as raw messages (link or attribute
/// messages), in index order.
pub fn objects(f: &H5File, heap: u64, btree: u64, what: &str) -> H5Result<Vec<Vec<u8>>> {
    let h = Heap::open(f, heap, what)?;
    let mut records = Vec::new();
    btree_records(f, btree, what, &mut records)?;
    records
        .into_iter()
        .map(|(kind, rec)| {
            let id = match kind {
                // Link name index: hash (4), heap ID.
                5 => rec.get(4..),
                // Attribute name index: heap ID (8), message flags,
                // creation order, hash. A shared attribute (flag bit 1)
                // is in the shared object header message heap, its ID
                // one of that heap's (`H5A__dense_fnd_cb`).
                8 if rec.get(8).is_some_and(|&fl| fl & MSG_FLAG_SHARED != 0) => {
                    let id = rec
                        .get(..8)
                        .ok_or_else(|| Hdf5Error::corrupt(what, "short B-tree record"))?;
                    let shared = f.shared.heap_for(MSG_ATTRIBUTE).ok_or_else(|| {
                        Hdf5Error::corrupt(
                            what,
                            "a shared attribute and no shared message index for attributes",
                        )
                    })?;
                    return heap_object(f, shared, id, what);
                }
                8 => rec.get(..8),
                k => {
                    return Err(Hdf5Error::unsupported(
                        what,
                        format!("v2 B-tree of record type {k} as a name index"),
                    ));
                }
            };
            let id = id.ok_or_else(|| Hdf5Error::corrupt(what, "short B-tree record"))?;
            h.object(f, id, what)
        })
        .collect()
}

/// Every record of the v2 B-tree at `addr`, with the tree's record type.
pub fn btree_records(
    f: &H5File,
    addr: u64,
    what: &str,
    out: &mut Vec<(u8, Vec<u8>)>,
) -> H5Result<()> {
    let bwhat = format!("{what}: v2 B-tree at {addr:#x}");
    let o = f.sizeof_addr as u64;
    let l = f.sizeof_len as u64;
    let buf = f.read(addr, 4 + 1 + 1 + 4 + 2 + 2 + 1 + 1 + o + 2 + l + 4, &bwhat)?;
    check_checksum(&buf, &bwhat)?;
    let mut c = f.cursor(&buf, &bwhat);
    c.signature(b"BTHD")?;
    c.skip(1)?;
    let kind = c.u8()?;
    let node_size = c.u32()? as u64;
    let rec_size = c.u16()? as u64;
    let depth = c.u16()?;
    c.skip(2)?;
    let root = c.addr()?;
    let root_n = c.u16()? as u64;
    if rec_size == 0 || node_size < 10 + rec_size || depth > MAX_DEPTH {
        return Err(Hdf5Error::corrupt(
            &bwhat,
            format!("node size {node_size}, record size {rec_size}, depth {depth}"),
        ));
    }
    if f.undefined(root) || root_n == 0 {
        return Ok(());
    }
    // The sizes of the child pointers' record counts (H5B2__hdr_init).
    let enc = |n: u64| -> u64 { (63 - n.max(1).leading_zeros() as u64) / 8 + 1 };
    let leaf_max = (node_size - 10) / rec_size;
    let max_nrec_size = enc(leaf_max);
    let mut cum = vec![leaf_max];
    let mut cum_size = vec![0u64];
    for u in 1..=depth as usize {
        let ptr = o + max_nrec_size + if u > 1 { cum_size[u - 1] } else { 0 };
        let max = node_size.saturating_sub(10 + ptr) / (rec_size + ptr);
        let c = max
            .saturating_add(1)
            .saturating_mul(cum[u - 1])
            .saturating_add(max);
        cum.push(c);
        cum_size.push(enc(c));
    }
    let mut w = Tree {
        f,
        what: &bwhat,
        kind,
        rec_size,
        max_records: leaf_max,
        max_nrec_size,
        cum_size,
        seen: HashSet::new(),
        out,
    };
    w.node(root, root_n, depth)
}

struct Tree<'a> {
    f: &'a H5File,
    what: &'a str,
    kind: u8,
    rec_size: u64,
    /// No node holds more records than a leaf can.
    max_records: u64,
    max_nrec_size: u64,
    cum_size: Vec<u64>,
    seen: HashSet<u64>,
    out: &'a mut Vec<(u8, Vec<u8>)>,
}

impl Tree<'_> {
    fn node(&mut self, addr: u64, n: u64, depth: u16) -> H5Result<()> {
        let f = self.f;
        let nwhat = format!("{}: node at {addr:#x}", self.what);
        if !self.seen.insert(addr) {
            return Err(Hdf5Error::corrupt(&nwhat, "B-tree nodes form a cycle"));
        }
        if n > self.max_records {
            return Err(Hdf5Error::corrupt(
                &nwhat,
                format!("{n} records, more than a node holds"),
            ));
        }
        let o = f.sizeof_addr as u64;
        let ptr = o
            + self.max_nrec_size
            + if depth > 1 {
                self.cum_size[depth as usize - 1]
            } else {
                0
            };
        let children = if depth > 0 { (n + 1) * ptr } else { 0 };
        let size = 6 + n * self.rec_size + children + 4;
        let buf = f.read(addr, size, &nwhat)?;
        check_checksum(&buf, &nwhat)?;
        let mut c = f.cursor(&buf, &nwhat);
        c.signature(if depth > 0 { b"BTIN" } else { b"BTLF" })?;
        c.skip(1)?;
        if c.u8()? != self.kind {
            return Err(Hdf5Error::corrupt(
                &nwhat,
                "record type differs from the header's",
            ));
        }
        for _ in 0..n {
            let rec = c.bytes(self.rec_size as usize)?;
            self.out.push((self.kind, rec.to_vec()));
        }
        if depth > 0 {
            let mut kids = Vec::new();
            for _ in 0..=n {
                let a = c.addr()?;
                let k = c.uint(self.max_nrec_size as usize)?;
                if depth > 1 {
                    c.skip(self.cum_size[depth as usize - 1] as usize)?;
                }
                kids.push((a, k));
            }
            for (a, k) in kids {
                self.node(a, k, depth - 1)?;
            }
        }
        Ok(())
    }
}

/// A fractal heap's header: its doubling table and ID encoding.
struct Heap {
    addr: u64,
    /// Bytes of a heap ID.
    id_len: usize,
    /// The v2 B-tree of huge objects (undefined when there are none).
    huge_btree: u64,
    /// Its records, huge object ID → (address, length), read on first use.
    huge: OnceCell<HashMap<u64, (u64, u64)>>,
    /// Bytes of a heap offset and of an object length in a managed ID.
    off_size: usize,
    len_size: usize,
    width: u64,
    start: u64,
    max_direct_rows: u64,
    root: u64,
    root_rows: u64,
    checksummed: bool,
}

impl Heap {
    fn open(f: &H5File, addr: u64, what: &str) -> H5Result<Heap> {
        let hwhat = format!("{what}: fractal heap at {addr:#x}");
        let o = f.sizeof_addr as u64;
        let l = f.sizeof_len as u64;
        let fixed = 4 + 1 + 2 + 2 + 1 + 4 + l + o + l + o + 8 * l + 2 + l + l + 2 + 2 + o + 2;
        let buf = f.read(addr, fixed, &hwhat)?;
        let mut c = f.cursor(&buf, &hwhat);
        c.signature(b"FRHP")?;
        c.skip(1)?;
        let id_len = c.u16()? as usize;
        let filters = c.u16()?;
        let flags = c.u8()?;
        let max_managed = c.u32()? as u64;
        c.skip(l as usize)?; // next huge object ID
        let huge_btree = c.addr()?;
        c.skip((l + o + 8 * l) as usize)?;
        let width = c.u16()? as u64;
        let start = c.length()?;
        let max_direct = c.length()?;
        let max_heap_bits = c.u16()? as u64;
        c.skip(2)?;
        let root = c.addr()?;
        let root_rows = c.u16()? as u64;
        if filters > 0 {
            return Err(Hdf5Error::unsupported(
                &hwhat,
                "a fractal heap with I/O filters",
            ));
        }
        // The whole header, checksum included, now that its size is known.
        let all = f.read(addr, fixed + 4, &hwhat)?;
        check_checksum(&all, &hwhat)?;
        let pow2 = |x: u64| x.is_power_of_two();
        if width == 0
            || !pow2(width)
            || !pow2(start)
            || !pow2(max_direct)
            || max_direct < start
            || max_heap_bits == 0
            || max_heap_bits > 64
            || root_rows > MAX_ROWS
        {
            return Err(Hdf5Error::corrupt(
                &hwhat,
                format!(
                    "table width {width}, block sizes {start}..{max_direct}, \
                     {max_heap_bits}-bit offsets, {root_rows} root rows"
                ),
            ));
        }
        let log2 = |x: u64| 63 - x.leading_zeros() as u64;
        let off_size = max_heap_bits.div_ceil(8) as usize;
        let enc = |n: u64| (log2(n.max(1)) / 8 + 1) as usize;
        let len_size = (log2(max_direct).div_ceil(8) as usize).min(enc(max_managed));
        log::trace!(
            "{hwhat}: {root_rows} rows in its root block, {width} wide, from {start} bytes"
        );
        Ok(Heap {
            addr,
            id_len,
            huge_btree,
            huge: OnceCell::new(),
            off_size,
            len_size,
            width,
            start,
            max_direct_rows: log2(max_direct) - log2(start) + 2,
            root,
            root_rows,
            checksummed: flags & 0x02 != 0,
        })
    }

    /// Size of the blocks of row `r` of a doubling table.
    fn block_size(&self, r: u64) -> u64 {
        if r == 0 {
            self.start
        } else {
            1u64.checked_shl((r - 1) as u32)
                .and_then(|p| self.start.checked_mul(p))
                .unwrap_or(u64::MAX)
        }
    }

    /// The object with heap ID `id`.
    fn object(&self, f: &H5File, id: &[u8], what: &str) -> H5Result<Vec<u8>> {
        let owhat = format!("{what}: fractal heap at {:#x}", self.addr);
        let mut c = f.cursor(id, &owhat);
        let flags = c.u8()?;
        match (flags >> 4) & 0x03 {
            0 => {}
            1 => return self.huge_object(f, &mut c, &owhat),
            2 => {
                // Tiny: the object is in the ID, its length - 1 in the low
                // bits of the first byte.
                let n = (flags & 0x0F) as usize + 1;
                return Ok(c.bytes(n)?.to_vec());
            }
            t => {
                return Err(Hdf5Error::corrupt(&owhat, format!("heap ID of type {t}")));
            }
        }
        let offset = c.uint(self.off_size)?;
        let len = c.uint(self.len_size)?;
        if self.f_undefined(f) {
            return Err(Hdf5Error::corrupt(
                &owhat,
                "an object in a heap with no blocks",
            ));
        }
        let (block, at) = if self.root_rows == 0 {
            (self.root, offset)
        } else {
            self.locate(f, self.root, self.root_rows, 0, offset, 0, &owhat)?
        };
        self.read_in_direct(f, block, at, len, &owhat)
    }

    /// A huge object, its ID after the flags byte in `c` (H5HFhuge.c):
    /// the object's address and length when the ID has room for both,
    /// else a key of `min(id_len - 1, 8)` bytes into the huge-object
    /// B-tree (records of type 1: address, length, key).
    fn huge_object(&self, f: &H5File, c: &mut Cursor<'_>, what: &str) -> H5Result<Vec<u8>> {
        let (o, l) = (f.sizeof_addr as usize, f.sizeof_len as usize);
        let (addr, len) = if self.id_len > o + l {
            (c.addr()?, c.length()?)
        } else {
            let key = c.uint(self.id_len.saturating_sub(1).min(8))?;
            let found = match self.huge.get() {
                Some(map) => map.get(&key).copied(),
                None => {
                    let map = self.huge_records(f, what)?;
                    self.huge.get_or_init(|| map).get(&key).copied()
                }
            };
            found.ok_or_else(|| {
                Hdf5Error::corrupt(what, format!("huge object {key} not in its B-tree"))
            })?
        };
        let hwhat = format!("{what}: huge object at {addr:#x}");
        f.read(addr, len, &hwhat)
    }

    /// The records of the huge-object B-tree: key → (address, length).
    fn huge_records(&self, f: &H5File, what: &str) -> H5Result<HashMap<u64, (u64, u64)>> {
        if f.undefined(self.huge_btree) {
            return Err(Hdf5Error::corrupt(
                what,
                "a huge object but no huge-object B-tree",
            ));
        }
        let mut records = Vec::new();
        btree_records(f, self.huge_btree, what, &mut records)?;
        let mut map = HashMap::with_capacity(records.len());
        for (kind, rec) in records {
            if kind != 1 {
                return Err(Hdf5Error::unsupported(
                    what,
                    format!("huge objects indexed by B-tree records of type {kind}"),
                ));
            }
            let mut c = f.cursor(&rec, what);
            let (addr, len, key) = (c.addr()?, c.length()?, c.length()?);
            map.insert(key, (addr, len));
        }
        Ok(map)
    }

    fn f_undefined(&self, f: &H5File) -> bool {
        f.undefined(self.root)
    }

    /// Find the direct block holding heap offset `offset` below the
    /// indirect block at `iblock` (of `rows` rows, starting at heap offset
    /// `base`): the block's address and the offset within it.
    #[allow(clippy::too_many_arguments)]
    fn locate(
        &self,
        f: &H5File,
        iblock: u64,
        rows: u64,
        base: u64,
        offset: u64,
        depth: usize,
        what: &str,
    ) -> H5Result<(u64, u64)> {
        if depth > MAX_ROWS as usize || rows > MAX_ROWS {
            return Err(Hdf5Error::corrupt(what, "indirect blocks nested too deep"));
        }
        let rel = offset.checked_sub(base).ok_or_else(|| {
            Hdf5Error::corrupt(what, format!("heap offset {offset} before its block"))
        })?;
        // Row and column of `rel` in this block's table.
        let mut row_start = 0u64;
        let mut row = None;
        for r in 0..rows {
            let span = self.block_size(r).saturating_mul(self.width);
            if rel < row_start.saturating_add(span) {
                row = Some(r);
                break;
            }
            row_start = row_start.saturating_add(span);
        }
        let r = row.ok_or_else(|| {
            Hdf5Error::corrupt(what, format!("heap offset {offset} past the heap's blocks"))
        })?;
        let bsize = self.block_size(r);
        let col = (rel - row_start) / bsize;
        let entry = r * self.width + col;
        let o = f.sizeof_addr as u64;
        let direct_rows = rows.min(self.max_direct_rows);
        let ndirect = direct_rows * self.width;
        let nindirect = (rows - direct_rows) * self.width;
        let iwhat = format!("{what}: indirect block at {iblock:#x}");
        let head = 4 + 1 + o + self.off_size as u64;
        let size = head + (ndirect + nindirect) * o + 4;
        let buf = f.read(iblock, size, &iwhat)?;
        check_checksum(&buf, &iwhat)?;
        let mut c = f.cursor(&buf, &iwhat);
        c.signature(b"FHIB")?;
        c.skip(head as usize - 4 + (entry * o) as usize)?;
        let child = c.addr()?;
        if f.undefined(child) {
            return Err(Hdf5Error::corrupt(
                &iwhat,
                format!("heap offset {offset} lies in a block never allocated"),
            ));
        }
        let child_base = base
            .saturating_add(row_start)
            .saturating_add(col.saturating_mul(bsize));
        if r < self.max_direct_rows {
            Ok((child, offset - child_base))
        } else {
            // A child indirect block spanning `bsize * width` bytes: its
            // rows are those whose cumulated size reaches that.
            let log2 = |x: u64| 63 - x.leading_zeros() as u64;
            let child_rows = self
                .start
                .checked_mul(self.width)
                .and_then(|w| log2(bsize).checked_sub(log2(w)))
                .ok_or_else(|| Hdf5Error::corrupt(&iwhat, "child indirect block too small"))?
                + 1;
            self.locate(f, child, child_rows, child_base, offset, depth + 1, what)
        }
    }

    /// `len` bytes at offset `at` of the direct block at `block`.
    fn read_in_direct(
        &self,
        f: &H5File,
        block: u64,
        at: u64,
        len: u64,
        what: &str,
    ) -> H5Result<Vec<u8>> {
        let dwhat = format!("{what}: direct block at {block:#x}");
        let head = 4
            + 1
            + f.sizeof_addr as u64
            + self.off_size as u64
            + if self.checksummed { 4 } else { 0 };
        if at < head {
            return Err(Hdf5Error::corrupt(
                &dwhat,
                format!("object at offset {at}, inside the block header"),
            ));
        }
        let sig = f.read(block, 4, &dwhat)?;
        if sig != b"FHDB" {
            return Err(Hdf5Error::corrupt(&dwhat, "no FHDB signature"));
        }
        let start = block
            .checked_add(at)
            .ok_or_else(|| Hdf5Error::corrupt(&dwhat, "offset overflows"))?;
        f.read(start, len, &dwhat)
    }
}
