//! Bytes of an HDF5 file: bounded positioned reads relative to the
//! superblock, and a cursor that decodes little-endian fields without ever
//! reading past its slice.
//!
//! Every read of metadata goes through [`H5File::read`], which checks the
//! address against the file's length and the size against a limit before
//! allocating, so a corrupt length cannot ask for gigabytes.

use std::sync::Arc;

use super::error::{H5Result, Hdf5Error};
use crate::codec::jenkins_lookup3::hashlittle;
use crate::storage::{ReadAt, ReadCache};

/// The signature every HDF5 superblock starts with.
pub const SIGNATURE: &[u8; 8] = b"\x89HDF\r\n\x1a\n";

/// The largest single metadata structure read (an object header chunk, a
/// B-tree node, a heap, a chunk-index block). Real ones are kilobytes to a
/// few megabytes; a global heap collection of a huge attribute is the
/// largest legitimate one.
pub const MAX_METADATA_READ: u64 = 64 << 20;

/// The fractal heaps of the shared message table's indexes, each with
/// the message types it holds (bit `1 << type`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct SharedHeaps(pub Vec<(u16, u64)>);

impl SharedHeaps {
    /// The heap holding shared messages of type `kind`.
    pub fn heap_for(&self, kind: u16) -> Option<u64> {
        let bit = 1u32.checked_shl(kind as u32)?;
        self.0
            .iter()
            .find(|(types, _)| u32::from(*types) & bit != 0)
            .map(|&(_, heap)| heap)
    }
}

/// One open HDF5 file: where its superblock is and how wide its addresses
/// and lengths are.
#[derive(Debug, Clone)]
pub struct H5File {
    pub file: Arc<dyn ReadAt>,
    /// Offset of the superblock: file addresses are relative to it (a user
    /// block before it shifts everything).
    pub base: u64,
    pub len: u64,
    /// Size of file addresses and of lengths, in bytes (2, 4 or 8).
    pub sizeof_addr: u8,
    pub sizeof_len: u8,
    /// The heaps of the shared object header message table, when the
    /// superblock extension has one ([`super::extension`]).
    pub shared: Arc<SharedHeaps>,
}

impl H5File {
    /// This file read through a [`ReadCache`], for parsing metadata (many
    /// small reads, most of them near each other): to be dropped after,
    /// as the cache holds a few blocks. As is if its size cannot be read.
    pub fn for_parsing(&self) -> H5File {
        match ReadCache::new(self.file.clone()) {
            Ok(c) => H5File {
                file: Arc::new(c),
                ..self.clone()
            },
            Err(_) => self.clone(),
        }
    }

    /// Whether `addr` is the undefined address (all bits set).
    pub fn undefined(&self, addr: u64) -> bool {
        addr == self.undefined_address()
    }

    /// The undefined address: all bits of an address set.
    pub fn undefined_address(&self) -> u64 {
        let bits = 8 * self.sizeof_addr as u32;
        if bits >= 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        }
    }

    /// `n` bytes at the relative address `addr`, checked against the end
    /// of the file and against [`MAX_METADATA_READ`].
    /// A hint that small reads at these addresses come next
    /// ([`ReadAt::will_read`]: blocks fetched together over a remote
    /// object).
    pub fn will_read(&self, addrs: &[u64]) {
        let offsets: Vec<u64> = addrs
            .iter()
            .filter(|&&a| !self.undefined(a))
            .map(|&a| a.saturating_add(self.base))
            .collect();
        self.file.will_read(&offsets);
    }

    pub fn read(&self, addr: u64, n: u64, what: &str) -> H5Result<Vec<u8>> {
        if n > MAX_METADATA_READ {
            return Err(Hdf5Error::TooLarge {
                what: what.to_string(),
                size: n,
                limit: MAX_METADATA_READ,
            });
        }
        self.read_raw(addr, n, what)
    }

    /// [`H5File::read`] without the metadata limit (chunk data, whose
    /// limit the caller checks).
    pub fn read_raw(&self, addr: u64, n: u64, what: &str) -> H5Result<Vec<u8>> {
        let offset = self.base.checked_add(addr);
        let end = offset.and_then(|o| o.checked_add(n));
        let (Some(offset), Some(end)) = (offset, end) else {
            return Err(Hdf5Error::corrupt(
                what,
                format!("address {addr:#x} + {n} bytes overflows"),
            ));
        };
        if end > self.len {
            return Err(Hdf5Error::PastEof {
                what: what.to_string(),
                offset,
                end,
                file_len: self.len,
            });
        }
        let mut buf = vec![0u8; n as usize];
        self.file
            .read_exact_at(&mut buf, offset)
            .map_err(|e| Hdf5Error::Io {
                what: what.to_string(),
                source: Arc::new(e),
            })?;
        Ok(buf)
    }

    pub fn cursor<'a>(&self, buf: &'a [u8], what: &'a str) -> Cursor<'a> {
        Cursor {
            buf,
            pos: 0,
            what,
            sizeof_addr: self.sizeof_addr,
            sizeof_len: self.sizeof_len,
        }
    }
}

/// Check the Jenkins lookup3 checksum HDF5 stores after a structure: the
/// last 4 bytes of `buf` over the bytes before them.
pub fn check_checksum(buf: &[u8], what: &str) -> H5Result<()> {
    if buf.len() < 4 {
        return Err(Hdf5Error::Truncated {
            what: what.to_string(),
            needed: 4,
            have: buf.len() as u64,
        });
    }
    let (body, sum) = buf.split_at(buf.len() - 4);
    let stored = u32::from_le_bytes(sum.try_into().expect("4 bytes"));
    let computed = hashlittle(body, 0);
    if stored != computed {
        return Err(Hdf5Error::Checksum {
            what: what.to_string(),
            stored,
            computed,
        });
    }
    Ok(())
}

/// Little-endian fields off a byte slice; reading past its end is a
/// [`Hdf5Error::Truncated`] naming `what`.
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
    pub what: &'a str,
    pub sizeof_addr: u8,
    pub sizeof_len: u8,
}

impl<'a> Cursor<'a> {
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn bytes(&mut self, n: usize) -> H5Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(Hdf5Error::Truncated {
                what: self.what.to_string(),
                needed: (self.pos as u64).saturating_add(n as u64),
                have: self.buf.len() as u64,
            });
        }
        let b = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }

    pub fn skip(&mut self, n: usize) -> H5Result<()> {
        self.bytes(n).map(|_| ())
    }

    pub fn u8(&mut self) -> H5Result<u8> {
        Ok(self.bytes(1)?[0])
    }

    pub fn u16(&mut self) -> H5Result<u16> {
        Ok(self.uint(2)? as u16)
    }

    pub fn u32(&mut self) -> H5Result<u32> {
        Ok(self.uint(4)? as u32)
    }

    pub fn u64(&mut self) -> H5Result<u64> {
        self.uint(8)
    }

    /// An unsigned little-endian integer of `n` bytes (0 to 8).
    pub fn uint(&mut self, n: usize) -> H5Result<u64> {
        if n > 8 {
            return Err(Hdf5Error::corrupt(
                self.what,
                format!("an integer field of {n} bytes"),
            ));
        }
        let b = self.bytes(n)?;
        Ok(b.iter().rev().fold(0u64, |acc, &x| (acc << 8) | x as u64))
    }

    /// A file address (size of offsets bytes).
    pub fn addr(&mut self) -> H5Result<u64> {
        self.uint(self.sizeof_addr as usize)
    }

    /// A length (size of lengths bytes).
    pub fn length(&mut self) -> H5Result<u64> {
        self.uint(self.sizeof_len as usize)
    }

    /// Expect the 4-byte signature `sig`.
    pub fn signature(&mut self, sig: &[u8; 4]) -> H5Result<()> {
        let got = self.bytes(4)?;
        if got != sig {
            return Err(Hdf5Error::corrupt(
                self.what,
                format!(
                    "expected signature {:?}, found {:?}",
                    String::from_utf8_lossy(sig),
                    String::from_utf8_lossy(got)
                ),
            ));
        }
        Ok(())
    }

    /// Advance to the next multiple of `align` from the slice's start.
    pub fn align(&mut self, align: usize) -> H5Result<()> {
        let pad = (align - self.pos % align) % align;
        self.skip(pad.min(self.remaining()))
    }
}

/// The offset of the HDF5 signature in `file`: 0, or the first of 512,
/// 1024, 2048... (a user block) that holds it; `None` when none does.
pub fn find_signature(file: &dyn ReadAt) -> std::io::Result<Option<u64>> {
    let len = file.size()?;
    let mut at = 0u64;
    let mut magic = [0u8; 8];
    while at.checked_add(8).is_some_and(|end| end <= len) {
        file.read_exact_at(&mut magic, at)?;
        if &magic == SIGNATURE {
            return Ok(Some(at));
        }
        at = if at == 0 { 512 } else { at * 2 };
    }
    Ok(None)
}
