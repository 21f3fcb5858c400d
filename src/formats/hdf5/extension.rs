//! The superblock extension (spec II.A "Superblock", IV.A.2.p, IV.A.2.x):
//! an object header that superblocks 2 and 3 point to, holding the
//! file-wide messages. Two of them change how the rest of the file reads:
//!
//! - **Shared Message Table** (message 0x000F, spec III.E "Shared Object
//!   Header Message Table"): a file created with
//!   `H5Pset_shared_mesg_nindexes` keeps messages that many objects share
//!   (datatypes, dataspaces, fill values, filter pipelines, attributes)
//!   once, in a fractal heap per index, and each object header holds a
//!   shared message (version 3, type 1) whose 8-byte heap ID names it.
//!   The message's type says which index (each has a bit mask of the
//!   message types it holds), and the index says which heap: the list or
//!   v2 B-tree of the index itself is what HDF5 uses to find duplicates
//!   when writing and is not needed to read ([`SharedHeaps`], which the
//!   [`H5File`] carries; HDF5's `H5SM_get_fheap_addr` does the same).
//! - **Metadata Cache Image** (message 0x0018, `H5Pset_mdc_image_config`,
//!   HDF5 1.10+; spec III.K "Metadata Cache Image"): at close HDF5 wrote
//!   the metadata cache's entries (object headers, B-trees, heaps, chunk
//!   indexes) into one block instead of each at its address, which holds
//!   zeros meanwhile (H5Cimage.c; `h5clear --image` writes them back). A
//!   reader that ignores the image reads zeros where the root group
//!   should be, so the image is not a hint: [`CacheImage`] serves reads of
//!   those addresses from the image's entries, below the block cache, for
//!   the metadata walk and the chunk indexes alike. The superblock and its
//!   extension are never in the image (their ring is outside it).

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

use super::error::{H5Result, Hdf5Error};
use super::io::{H5File, SharedHeaps, check_checksum};
use super::meta;
use crate::storage::ReadAt;

/// Shared Message Table message.
pub const MSG_SHARED_TABLE: u16 = 0x000F;
/// Metadata Cache Image message.
pub const MSG_CACHE_IMAGE: u16 = 0x0018;

/// The most indexes a shared message table has (`H5O_SHMESG_MAX_NINDEXES`).
const MAX_INDEXES: usize = 8;

/// Where the superblock extension says the file-wide structures are.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Extension {
    /// The shared message table: its address and number of indexes.
    pub shared_table: Option<(u64, u8)>,
    /// The metadata cache image block: address and length.
    pub cache_image: Option<(u64, u64)>,
}

/// Read the superblock extension's object header at `addr`.
pub fn extension(f: &H5File, addr: u64) -> H5Result<Extension> {
    let what = "superblock extension";
    let mut out = Extension::default();
    for m in meta::object_header(f, addr, what)? {
        let mut c = f.cursor(&m.data, what);
        match m.kind {
            MSG_SHARED_TABLE => {
                let version = c.u8()?;
                if version != 0 {
                    return Err(Hdf5Error::unsupported(
                        what,
                        format!("shared message table message version {version}"),
                    ));
                }
                out.shared_table = Some((c.addr()?, c.u8()?));
            }
            MSG_CACHE_IMAGE => {
                let version = c.u8()?;
                if version != 0 {
                    return Err(Hdf5Error::unsupported(
                        what,
                        format!("metadata cache image message version {version}"),
                    ));
                }
                out.cache_image = Some((c.addr()?, c.length()?));
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Read the shared message table ("SMTB") at `addr`, of `n` indexes:
/// per index its version, type (list or B-tree), message type flags,
/// minimum message size, list and B-tree cutoffs, number of messages,
/// index address and heap address; then a checksum.
pub fn shared_table(f: &H5File, addr: u64, n: u8) -> H5Result<SharedHeaps> {
    let what = format!("shared message table at {addr:#x}");
    let n = n as usize;
    if n == 0 || n > MAX_INDEXES {
        return Err(Hdf5Error::corrupt(&what, format!("{n} indexes")));
    }
    let o = f.sizeof_addr as usize;
    let entry = 1 + 1 + 2 + 4 + 2 + 2 + 2 + 2 * o;
    let buf = f.read(addr, (4 + n * entry + 4) as u64, &what)?;
    check_checksum(&buf, &what)?;
    let mut c = f.cursor(&buf, &what);
    c.signature(b"SMTB")?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let version = c.u8()?;
        if version != 0 {
            return Err(Hdf5Error::unsupported(
                &what,
                format!("shared message index version {version}"),
            ));
        }
        c.skip(1)?; // index type: list or v2 B-tree
        let types = c.u16()?;
        c.skip(4 + 2 + 2 + 2)?; // minimum size, cutoffs, number of messages
        c.addr()?; // the index
        let heap = c.addr()?;
        if !f.undefined(heap) {
            out.push((types, heap));
        }
    }
    Ok(SharedHeaps(out))
}

/// A file read with its metadata cache image applied: a read of a range
/// that holds an image entry gets the entry's bytes there. Entries are
/// kept by absolute file offset, each as where its bytes lie in the image
/// block and how many: they are read from the file (`inner`) when asked
/// for, so an image (up to [`super::io::MAX_METADATA_READ`]) costs no
/// memory for the life of the mount. They never overlap.
#[derive(Debug)]
pub struct CacheImage {
    inner: Arc<dyn ReadAt>,
    /// Entry start -> its bytes' absolute offset in the image block, and
    /// their length.
    entries: BTreeMap<u64, (u64, u64)>,
}

impl CacheImage {
    /// Read the image block of `len` bytes at `addr` of `f` ("MDCI",
    /// version 0, flags, image length, number of entries; per entry its
    /// type, flags, ring, age, flush dependency child and dirty child
    /// counts, parent count, LRU rank, address, size, the parents'
    /// addresses and the entry's bytes; a checksum over it all: H5Cimage.c,
    /// `H5C__decode_cache_image_header` and `..._entry`), to serve reads of
    /// `inner` (the same file, offsets absolute). The block is checked and
    /// indexed here, then dropped.
    pub fn read(f: &H5File, addr: u64, len: u64, inner: Arc<dyn ReadAt>) -> H5Result<CacheImage> {
        let what = format!("metadata cache image at {addr:#x}");
        let buf = f.read(addr, len, &what)?;
        // `f.read` checked that base + addr + len is inside the file.
        let block = f.base + addr;
        let mut c = f.cursor(&buf, &what);
        c.signature(b"MDCI")?;
        let version = c.u8()?;
        if version != 0 {
            return Err(Hdf5Error::unsupported(
                &what,
                format!("cache image version {version}"),
            ));
        }
        let flags = c.u8()?;
        if flags & 0x01 != 0 {
            // HDF5 never writes the adaptive resize status ("not yet").
            return Err(Hdf5Error::unsupported(
                &what,
                "a cache image with its resize status",
            ));
        }
        let data_len = c.length()?;
        if data_len < 4 || data_len > len {
            return Err(Hdf5Error::corrupt(
                &what,
                format!("{data_len} bytes of image in a block of {len}"),
            ));
        }
        check_checksum(&buf[..data_len as usize], &what)?;
        let n = c.u32()?;
        let mut entries: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        for i in 0..n {
            c.skip(4)?; // type, flags, ring, age
            c.skip(4)?; // flush dependency children, dirty children
            let parents = c.u16()? as usize;
            c.skip(4)?; // LRU rank
            let at = c.addr()?;
            let size = c.length()?;
            c.skip(parents * f.sizeof_addr as usize)?;
            let from = block + c.pos as u64;
            c.bytes(usize::try_from(size).unwrap_or(usize::MAX))?;
            let start = f.base.checked_add(at).filter(|_| !f.undefined(at));
            let Some(start) = start.filter(|&s| s.checked_add(size).is_some()) else {
                return Err(Hdf5Error::corrupt(
                    &what,
                    format!("entry {i} at address {at:#x}"),
                ));
            };
            // HDF5 keeps one cache entry per address: two in the image
            // are corrupt, not a choice between them.
            if entries.insert(start, (from, size)).is_some() {
                return Err(Hdf5Error::corrupt(
                    &what,
                    format!("entry {i} at address {at:#x}: a second entry at that address"),
                ));
            }
        }
        if c.pos as u64 + 4 != data_len {
            return Err(Hdf5Error::corrupt(
                &what,
                format!("{} bytes of entries in {data_len} bytes of image", c.pos),
            ));
        }
        // Entries must not overlap: a read's patching relies on it.
        let mut end = 0u64;
        for (&start, &(_, size)) in &entries {
            if start < end {
                return Err(Hdf5Error::corrupt(
                    &what,
                    format!("entries overlap at {start:#x}"),
                ));
            }
            end = start + size;
        }
        log::debug!("{what}: {n} entries");
        Ok(CacheImage { inner, entries })
    }
}

impl ReadAt for CacheImage {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let end = offset.saturating_add(buf.len() as u64);
        // Entirely inside one entry: only the image is read.
        if let Some((&start, &(from, size))) = self.entries.range(..=offset).next_back()
            && end <= start + size
        {
            return self.inner.read_exact_at(buf, from + (offset - start));
        }
        self.inner.read_exact_at(buf, offset)?;
        for (&start, &(from, size)) in self.entries.range(..end).rev() {
            let stop = start + size;
            if stop <= offset {
                break; // the entries before end before this one
            }
            let (lo, hi) = (start.max(offset), stop.min(end));
            self.inner.read_exact_at(
                &mut buf[(lo - offset) as usize..(hi - offset) as usize],
                from + (lo - start),
            )?;
        }
        Ok(())
    }

    fn size(&self) -> io::Result<u64> {
        self.inner.size()
    }

    fn stamp(&self) -> Option<u64> {
        self.inner.stamp()
    }

    fn latency(&self) -> Option<std::time::Duration> {
        self.inner.latency()
    }

    fn will_read(&self, offsets: &[u64]) {
        self.inner.will_read(offsets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::storage::testing::InMemory as Mem;

    /// A file seen through its cache image keeps the `ReadAt` contract:
    /// its bytes with the image's entries in place of what the file holds
    /// there.
    #[test]
    fn cache_image_reads_conform() {
        use crate::storage::testing::conformance::check_read_at;
        let file: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        // Entries at 100..120 and 500..504, their bytes at 900 and 950.
        let entries = BTreeMap::from([(100, (900, 20)), (500, (950, 4))]);
        let mut seen = file.clone();
        seen.copy_within(900..920, 100);
        seen.copy_within(950..954, 500);
        let image = CacheImage {
            inner: Arc::new(Mem(file)),
            entries,
        };
        check_read_at("CacheImage", &image, &seen);
    }

    /// An image block of `entries` (address, bytes) as H5Cimage.c writes
    /// one (8-byte addresses and lengths, no parents), its checksum last.
    fn image_block(entries: &[(u64, &[u8])]) -> Vec<u8> {
        let mut body = Vec::new();
        for (addr, bytes) in entries {
            body.extend([0u8; 8]); // type, flags, ring, age, child counts
            body.extend(0u16.to_le_bytes()); // parents
            body.extend(0u32.to_le_bytes()); // LRU rank
            body.extend(addr.to_le_bytes());
            body.extend((bytes.len() as u64).to_le_bytes());
            body.extend(*bytes);
        }
        let mut b = b"MDCI".to_vec();
        b.extend([0, 0]); // version, flags
        b.extend((4 + 2 + 8 + 4 + body.len() as u64 + 4).to_le_bytes());
        b.extend((entries.len() as u32).to_le_bytes());
        b.extend(body);
        let sum = crate::codec::jenkins_lookup3::hashlittle(&b, 0);
        b.extend(sum.to_le_bytes());
        b
    }

    /// A file of 64 zero bytes then the image block, read as HDF5 would.
    fn read_image(entries: &[(u64, &[u8])]) -> H5Result<CacheImage> {
        let mut bytes = vec![0u8; 64];
        bytes.extend(image_block(entries));
        let file: Arc<dyn ReadAt> = Arc::new(Mem(bytes.clone()));
        let f = H5File {
            file: file.clone(),
            base: 0,
            len: bytes.len() as u64,
            sizeof_addr: 8,
            sizeof_len: 8,
            shared: Default::default(),
        };
        CacheImage::read(&f, 64, bytes.len() as u64 - 64, file)
    }

    #[test]
    fn image_entries_are_read_from_the_block() {
        let img = read_image(&[(8, &[1; 4]), (16, &[2, 3, 4])]).unwrap();
        let mut b = [9u8; 16];
        img.read_exact_at(&mut b, 6).unwrap();
        assert_eq!(b, [0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 2, 3, 4, 0, 0, 0]);
        let mut b = [9u8; 2];
        img.read_exact_at(&mut b, 17).unwrap();
        assert_eq!(b, [3, 4]);
    }

    #[test]
    fn two_image_entries_at_one_address_are_corrupt() {
        let e = read_image(&[(8, &[1; 4]), (8, &[2; 4])]).unwrap_err();
        assert!(matches!(e, Hdf5Error::Corrupt { .. }), "{e}");
        let e = e.to_string();
        assert!(e.contains("entry 1 at address 0x8"), "{e}");
    }

    #[test]
    fn reads_are_patched_where_entries_lie() {
        // The file: zeros where the entries lie (8..12, 16..24), their
        // bytes in the image block at 40..44 and 50..58.
        let mut file = vec![0; 64];
        file[40..44].fill(1);
        file[50..58].fill(2);
        let img = CacheImage {
            inner: Arc::new(Mem(file)),
            entries: BTreeMap::from([(8, (40, 4)), (16, (50, 8))]),
        };
        let mut b = [9u8; 20];
        img.read_exact_at(&mut b, 6).unwrap();
        let mut want = [0u8; 20];
        want[2..6].fill(1);
        want[10..18].fill(2);
        assert_eq!(b, want);
        let mut b = [9u8; 3];
        img.read_exact_at(&mut b, 17).unwrap();
        assert_eq!(b, [2; 3]);
        let mut b = [9u8; 4];
        img.read_exact_at(&mut b, 30).unwrap();
        assert_eq!(b, [0; 4]);
    }
}
