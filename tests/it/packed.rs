//! Blocked netCDF-3 archives (`slabfs pack` / `unpack`, src/packed/)
//! against what netCDF4-python reads from the original files.
//!
//! Originals: every netCDF-3 fixture (tests/fixtures/netcdf3, written by
//! netCDF4-python and ncgen) and tests/fixtures/packed/data/realistic.nc
//! (smooth-plus-noise data, 212-byte rows, interleaved and padded
//! records). Expected bytes are netCDF4-python's (the fixtures'
//! expected/*.bin); unpacked files are compared with the originals by
//! netCDF4-python (tests/fixtures/packed/compare.py). Block sizes never
//! line up with rows. Damaged archives must fail only the reads that
//! touch the damage.

use crate::common;
use common::check_ranges;
use common::mount::Mount;

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::Value;
use slabfs::dtype::Endian;
use slabfs::engine::cache::ChunkCache;
use slabfs::engine::read::read_at;
use slabfs::formats::dataset;
use slabfs::formats::netcdf3;
use slabfs::formats::packed::format::{self, Superblock, VarIndex};
use slabfs::formats::packed::{self, BlockCodec, PackOptions, pack, unpack};
use slabfs::fs::error::ToErrno;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cache() -> Arc<ChunkCache> {
    Arc::new(ChunkCache::new(4 << 20))
}

/// An original file and its variables: (name, expected little-endian bytes).
struct Original {
    path: PathBuf,
    vars: Vec<(String, Vec<u8>)>,
}

fn originals() -> Vec<Original> {
    let mut out = Vec::new();
    for (dir, manifest) in [
        ("tests/fixtures/netcdf3", "manifest.json"),
        ("tests/fixtures/packed", "manifest.json"),
    ] {
        let dir = repo().join(dir);
        let m: Value = serde_json::from_slice(&std::fs::read(dir.join(manifest)).unwrap()).unwrap();
        let files = match m {
            Value::Array(files) => files,
            one => vec![one],
        };
        for f in files {
            let vars = f["variables"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| {
                    let bytes = std::fs::read(dir.join(v["expected"].as_str().unwrap())).unwrap();
                    (v["name"].as_str().unwrap().to_string(), bytes)
                })
                .collect();
            out.push(Original {
                path: dir.join(f["file"].as_str().unwrap()),
                vars,
            });
        }
    }
    assert!(out.len() >= 14, "fixtures missing");
    out
}

fn realistic() -> PathBuf {
    repo().join("tests/fixtures/packed/data/realistic.nc")
}

fn expected(name: &str) -> Vec<u8> {
    std::fs::read(repo().join(format!(
        "tests/fixtures/packed/expected/realistic.{name}.bin"
    )))
    .unwrap()
}

fn opts(block_size: u64, codec: BlockCodec, shuffle: bool) -> PackOptions {
    PackOptions {
        block_size,
        codec,
        level: None,
        shuffle,
    }
}

/// Block sizes (bytes) none of which divides or is divided by a row of
/// any fixture (rows of 20, 60, 116, 212 bytes...), with a codec and the
/// shuffle filter on or off each.
const PACKINGS: [(u64, BlockCodec, bool); 4] = [
    (8, BlockCodec::Zstd, false),
    (24, BlockCodec::Deflate, true),
    (1000, BlockCodec::Zstd, true),
    (4104, BlockCodec::Deflate, false),
];

#[test]
fn archives_read_as_netcdf4_python_reads_the_original() {
    let tmp = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for orig in originals() {
        let classic = netcdf3::File::open(&orig.path).unwrap();
        for (k, &(block, codec, shuffle)) in PACKINGS.iter().enumerate() {
            let archive = tmp.path().join(format!("{k}.ncb"));
            pack(&orig.path, &archive, &opts(block, codec, shuffle)).unwrap();
            let ds = dataset::Opener::new(cache()).open(&archive).unwrap();
            assert!(ds.skipped.is_empty(), "{:?}", ds.skipped);
            assert_eq!(ds.entries.len(), orig.vars.len(), "{}", orig.path.display());
            for (name, want) in &orig.vars {
                let what = format!(
                    "{} {name} blocks of {block} {codec:?} shuffle {shuffle}",
                    orig.path.display()
                );
                let a = ds.get(name).unwrap_or_else(|| panic!("{what}: missing"));
                // The same facts as the original (checked against
                // netCDF4-python by tests/it/netcdf3.rs), but its own source.
                let c = classic.array(name).unwrap();
                let (m, cm) = (a.array.meta(), c.meta());
                assert_eq!(
                    (
                        &m.shape,
                        &m.dtype,
                        &m.dimension_names,
                        &m.attributes,
                        &m.fill_value
                    ),
                    (
                        &cm.shape,
                        &cm.dtype,
                        &cm.dimension_names,
                        &cm.attributes,
                        &cm.fill_value
                    ),
                    "{what}"
                );
                assert_eq!(m.source, archive.display().to_string());
                check_ranges(a.array.as_ref(), want, k as u64, 24)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                checked += 1;
            }
        }
    }
    assert!(checked > 400, "only {checked} variables checked");
}

/// Pack then unpack every original; netCDF4-python must see the same
/// file. A file written in fill mode comes back byte for byte.
#[test]
fn unpack_gives_back_what_netcdf4_python_read() {
    let tmp = tempfile::tempdir().unwrap();
    let mut pairs = Vec::new();
    for (i, orig) in originals().iter().enumerate() {
        for (k, &(block, codec, shuffle)) in PACKINGS.iter().enumerate().skip(i % 2).step_by(2) {
            let archive = tmp.path().join(format!("{i}-{k}.ncb"));
            let back = tmp.path().join(format!("{i}-{k}.nc"));
            let stats = pack(&orig.path, &archive, &opts(block, codec, shuffle)).unwrap();
            let ustats = unpack(&archive, &back).unwrap();
            assert_eq!(stats.data_bytes, ustats.data_bytes);
            assert_eq!(
                std::fs::metadata(&back).unwrap().len(),
                std::fs::metadata(&orig.path).unwrap().len()
            );
            pairs.push((orig.path.clone(), back));
        }
    }
    let is_streaming = |p: &Path| {
        p.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("streaming")
    };
    let compare = repo().join("tests/fixtures/packed/compare.py");
    let mut cmd = common::python::Python::new();
    cmd.arg(&compare);
    for (a, b) in pairs.iter().filter(|(a, _)| !is_streaming(a)) {
        cmd.arg(a).arg(b);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "netCDF4-python sees differences:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Written by netCDF4-python in its default fill mode: identical bytes.
    let (orig, back) = pairs
        .iter()
        .find(|(a, _)| a.ends_with("realistic.nc"))
        .unwrap();
    assert!(std::fs::read(orig).unwrap() == std::fs::read(back).unwrap());
    // netCDF4-python reads a streaming record count as 2^32-1 records, so
    // those originals are compared through their expected bytes (read
    // before the fixture generator patched numrecs); the archive stores
    // the real count, so only the numrecs field differs from the original.
    let all = originals();
    let mut streaming = 0;
    for (orig, back) in pairs.iter().filter(|(a, _)| is_streaming(a)) {
        streaming += 1;
        let dump = tempfile::tempdir().unwrap();
        let out = common::python::Python::new()
            .arg(&compare)
            .arg("--dump")
            .arg(dump.path())
            .arg(back)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let o = all.iter().find(|o| &o.path == orig).unwrap();
        for (name, want) in &o.vars {
            let got = std::fs::read(dump.path().join(format!("{name}.bin"))).unwrap();
            assert!(&got == want, "{}: {name}", back.display());
        }
        let (a, b) = (std::fs::read(orig).unwrap(), std::fs::read(back).unwrap());
        let differ: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
        assert!(
            !differ.is_empty() && differ.iter().all(|&i| (4..12).contains(&i)),
            "{}: bytes {differ:?} differ",
            orig.display()
        );
    }
    assert_eq!(streaming, 4, "two streaming fixtures, two packings each");
}

#[test]
fn netcdf_libraries_refuse_an_archive_instead_of_misreading_it() {
    let tmp = tempfile::tempdir().unwrap();
    let archive = tmp.path().join("a.ncb");
    pack(&realistic(), &archive, &PackOptions::default()).unwrap();
    let bytes = std::fs::read(&archive).unwrap();
    assert_eq!(&bytes[..8], b"SLABNC3\0");
    let out = common::python::Python::new()
        .args(["-c", "import sys, netCDF4; netCDF4.Dataset(sys.argv[1])"])
        .arg(&archive)
        .output()
        .unwrap();
    assert!(!out.status.success(), "netCDF4-python opened an archive");
    // And slabfs refuses to pack an archive or unpack a classic file.
    let again = tmp.path().join("b.ncb");
    let err = pack(&archive, &again, &PackOptions::default()).unwrap_err();
    assert!(
        err.to_string().contains("already a blocked archive"),
        "{err}"
    );
    let err = unpack(&realistic(), &tmp.path().join("c.nc")).unwrap_err();
    assert!(err.to_string().contains("not a blocked archive"), "{err}");
    assert!(!again.exists() && !tmp.path().join("c.nc").exists());
}

/// The index of variable `name` of `archive`.
fn var_index(archive: &Path, name: &str) -> (usize, VarIndex) {
    let f = packed::open(archive).unwrap();
    let i = f.variables().iter().position(|v| v.name == name).unwrap();
    (i, packed::archive_of(&f).unwrap().vars[i].clone())
}

#[test]
fn a_corrupt_block_fails_only_the_reads_that_touch_it() {
    let tmp = tempfile::tempdir().unwrap();
    let archive = tmp.path().join("r.ncb");
    pack(&realistic(), &archive, &opts(1000, BlockCodec::Zstd, false)).unwrap();
    let (_, idx) = var_index(&archive, "temp");
    let k = 17u64;
    let (a, b) = idx.block_range(k);
    let original = std::fs::read(&archive).unwrap();
    let mut bad = original.clone();
    bad[((a + b) / 2) as usize] ^= 0x10;
    std::fs::write(&archive, &bad).unwrap();

    let ds = dataset::Opener::new(cache()).open(&archive).unwrap();
    let temp = ds.get("temp").unwrap().array.clone();
    let want = expected("temp");
    let mut buf = vec![0u8; 100];
    for off in [k * 1000, k * 1000 + 950, k * 1000 - 50] {
        let err = read_at(temp.as_ref(), off, &mut buf, Endian::Little).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(&archive.display().to_string())
                && msg.contains(&format!("block {k}"))
                && msg.contains("checksum"),
            "{msg}"
        );
        assert_eq!(err.errno(), libc::EIO);
    }
    // Everything else reads, before and after the block.
    for off in [0, k * 1000 - 100, (k + 1) * 1000, want.len() as u64 - 100] {
        read_at(temp.as_ref(), off, &mut buf, Endian::Little).unwrap();
        assert_eq!(buf[..], want[off as usize..off as usize + 100]);
    }
    let elev = ds.get("elev").unwrap().array.clone();
    check_ranges(elev.as_ref(), &expected("elev"), 1, 8).unwrap();
    // Repaired in place, the block reads: nothing of the failure was kept.
    std::fs::write(&archive, &original).unwrap();
    read_at(temp.as_ref(), k * 1000, &mut buf, Endian::Little).unwrap();
    assert_eq!(buf[..], want[(k * 1000) as usize..][..100]);
}

/// Rewrite `archive` with block `k` of variable `var` replaced by
/// `block` and the index (offsets, CRCs) made consistent again: a forged
/// archive whose damage only the decompressor can see.
fn forge_block(archive: &Path, var: usize, k: u64, block: &[u8]) {
    let f = packed::open(archive).unwrap();
    let arc = packed::archive_of(&f).unwrap();
    let bytes = std::fs::read(archive).unwrap();
    let mut out = bytes[..arc.superblock.data_start() as usize].to_vec();
    let mut vars = arc.vars.clone();
    for (vi, v) in vars.iter_mut().enumerate() {
        let mut offsets = vec![out.len() as u64];
        let mut crcs = Vec::new();
        for i in 0..v.nblocks() {
            let (a, b) = v.block_range(i);
            let data = if vi == var && i == k {
                block
            } else {
                &bytes[a as usize..b as usize]
            };
            out.extend_from_slice(data);
            crcs.push(crc32c::crc32c(data));
            offsets.push(out.len() as u64);
        }
        v.offsets = offsets;
        v.crcs = crcs;
    }
    let index = format::encode_index(&vars);
    let sb = Superblock {
        index_offset: out.len() as u64,
        index_len: index.len() as u64 - 4,
        ..arc.superblock
    };
    out.extend_from_slice(&index);
    out[..64].copy_from_slice(&sb.encode());
    std::fs::write(archive, out).unwrap();
}

#[test]
fn forged_blocks_fail_without_unbounded_decompression() {
    let tmp = tempfile::tempdir().unwrap();
    let want = expected("temp");
    let k = 5u64;
    type Forge = Box<dyn Fn(&[u8]) -> Vec<u8>>;
    let cases: [(&str, Forge); 3] = [
        // A stream cut short.
        (
            "truncated",
            Box::new(|good: &[u8]| good[..good.len() / 2].to_vec()),
        ),
        // A bomb: a valid stream of far more than the block's 1000 bytes.
        (
            "bomb",
            Box::new(|_: &[u8]| zstd::bulk::compress(&vec![7u8; 64 << 20], 3).unwrap()),
        ),
        // Not zstd at all.
        ("garbage", Box::new(|good: &[u8]| vec![0xA5; good.len()])),
    ];
    for (what, make) in cases {
        let archive = tmp.path().join(format!("{what}.ncb"));
        pack(&realistic(), &archive, &opts(1000, BlockCodec::Zstd, false)).unwrap();
        let (var, idx) = var_index(&archive, "temp");
        let (a, b) = idx.block_range(k);
        let good = std::fs::read(&archive).unwrap()[a as usize..b as usize].to_vec();
        forge_block(&archive, var, k, &make(&good));
        let ds = dataset::Opener::new(cache()).open(&archive).unwrap();
        let temp = ds.get("temp").unwrap().array.clone();
        let mut buf = vec![0u8; 200];
        let err = read_at(temp.as_ref(), k * 1000 + 10, &mut buf, Endian::Little).unwrap_err();
        assert!(
            err.to_string().contains("block") && err.errno() == libc::EIO,
            "{what}: {err}"
        );
        read_at(temp.as_ref(), (k + 1) * 1000, &mut buf, Endian::Little).unwrap();
        assert_eq!(buf[..], want[((k + 1) * 1000) as usize..][..200], "{what}");
    }
}

#[test]
fn a_truncated_or_damaged_archive_is_skipped_with_a_message() {
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("good.ncb");
    pack(&realistic(), &good, &PackOptions::default()).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    std::fs::write(tmp.path().join("cut.ncb"), &bytes[..bytes.len() / 2]).unwrap();
    let mut flipped = bytes.clone();
    flipped[20] ^= 1; // the superblock's header offset
    std::fs::write(tmp.path().join("super.ncb"), &flipped).unwrap();
    let mut flipped = bytes.clone();
    let n = flipped.len();
    flipped[n - 10] ^= 1; // inside the index
    std::fs::write(tmp.path().join("index.ncb"), &flipped).unwrap();

    let ds = dataset::Opener::new(cache()).open(tmp.path()).unwrap();
    let listed: Vec<&str> = ds.entries.iter().map(|e| e.path.as_str()).collect();
    assert!(
        listed.iter().all(|p| p.starts_with("good.ncb/")),
        "{listed:?}"
    );
    assert_eq!(listed.len(), 6);
    let skipped: Vec<String> = ds.skipped.iter().map(|e| e.to_string()).collect();
    for (file, why) in [
        ("cut.ncb", "truncated"),
        ("super.ncb", "superblock checksum"),
        ("index.ncb", "index checksum"),
    ] {
        assert!(
            skipped.iter().any(|s| s.contains(file) && s.contains(why)),
            "{file}: {skipped:#?}"
        );
    }
}

/// Pack onto a full file system: an error naming the output, the old
/// output untouched, no temporary file left.
#[test]
fn pack_never_leaves_a_partial_archive() {
    let tmp = tempfile::tempdir().unwrap();
    let small = tmp.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=32k", "tmpfs"])
        .arg(&small)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mounting a small tmpfs (the tests run as root)");
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).status();
        }
    }
    let _guard = Unmount(&small);
    let out = small.join("out.ncb");
    std::fs::write(&out, b"the previous archive").unwrap();
    let err = pack(&realistic(), &out, &opts(4096, BlockCodec::Zstd, true)).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("small/"), "{msg}");
    assert_eq!(std::fs::read(&out).unwrap(), b"the previous archive");
    let left: Vec<_> = std::fs::read_dir(&small)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("out.ncb")]);
}

fn slabfs(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_slabfs"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn cli_pack_ls_cat_unpack() {
    let tmp = tempfile::tempdir().unwrap();
    let archive = tmp.path().join("r.ncb");
    let os = |s: &str| std::ffi::OsString::from(s);
    let out = Command::new(env!("CARGO_BIN_EXE_slabfs"))
        .args([
            "pack",
            "--block-size",
            "1000",
            "--codec",
            "deflate",
            "--level",
            "1",
        ])
        .arg(realistic())
        .arg(&archive)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("packed 6 variables"));
    let ls = slabfs(&[os("ls").as_os_str(), archive.as_os_str()]);
    let ls = String::from_utf8(ls.stdout).unwrap();
    assert!(ls.contains("temp\t<f4\t[12, 37, 53]\t94128"), "{ls}");
    let cat = slabfs(&[
        os("cat").as_os_str(),
        archive.as_os_str(),
        os("temp").as_os_str(),
    ]);
    assert!(cat.status.success());
    let mut want = expected("temp");
    if cfg!(target_endian = "big") {
        slabfs::dtype::swap_in_place(&mut want, 4);
    }
    assert!(cat.stdout == want);
    let back = tmp.path().join("back.nc");
    let un = slabfs(&[
        os("unpack").as_os_str(),
        archive.as_os_str(),
        back.as_os_str(),
    ]);
    assert!(
        un.status.success(),
        "{}",
        String::from_utf8_lossy(&un.stderr)
    );
    assert!(std::fs::read(&back).unwrap() == std::fs::read(realistic()).unwrap());
    // Bad options say what is wrong and write nothing.
    let bad = tmp.path().join("bad.ncb");
    let out = Command::new(env!("CARGO_BIN_EXE_slabfs"))
        .args(["pack", "--level", "30"])
        .arg(realistic())
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("zstd level 30 is outside"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!bad.exists());
}

/// Blocks are compressed in parallel but the archive does not depend on
/// how many threads did it.
#[test]
fn pack_output_does_not_depend_on_the_thread_count() {
    let tmp = tempfile::tempdir().unwrap();
    let mut archives = Vec::new();
    for threads in ["1", "2", "5"] {
        let archive = tmp.path().join(format!("{threads}.ncb"));
        let out = Command::new(env!("CARGO_BIN_EXE_slabfs"))
            .env("RAYON_NUM_THREADS", threads)
            .args(["pack", "--block-size", "512"])
            .arg(realistic())
            .arg(&archive)
            .output()
            .unwrap();
        assert!(out.status.success());
        archives.push(std::fs::read(&archive).unwrap());
    }
    assert!(archives[0] == archives[1] && archives[1] == archives[2]);
}

#[test]
fn mounted_archives_serve_every_variable_and_eio_on_a_corrupt_block() {
    let src = tempfile::tempdir().unwrap();
    pack(
        &realistic(),
        &src.path().join("good.ncb"),
        &opts(1000, BlockCodec::Zstd, false),
    )
    .unwrap();
    let bad = src.path().join("bad.ncb");
    pack(&realistic(), &bad, &opts(1000, BlockCodec::Zstd, false)).unwrap();
    let (_, idx) = var_index(&bad, "temp");
    let k = 50u64; // bytes 50000..51000: inside page 12 (49152..53248)
    let (a, b) = idx.block_range(k);
    let mut bytes = std::fs::read(&bad).unwrap();
    bytes[((a + b) / 2) as usize] ^= 0x01;
    std::fs::write(&bad, &bytes).unwrap();

    let m = Mount::start(src.path(), &["--byte-order", "little"]);
    for name in ["code", "elev", "height", "mask", "stamp", "temp"] {
        let want = expected(name);
        let got = std::fs::read(m.path(&format!("good.ncb/{name}"))).unwrap();
        assert!(got == want, "good.ncb/{name}");
        let sidecar: Value = serde_json::from_slice(
            &std::fs::read(m.path(&format!("good.ncb/{name}.json"))).unwrap(),
        )
        .unwrap();
        assert!(sidecar.is_object());
    }
    let want = expected("temp");
    let f = File::open(m.path("bad.ncb/temp")).unwrap();
    // SAFETY: a valid open fd.
    assert_eq!(
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) },
        0
    );
    let mut page = vec![0u8; 4096];
    let err = f.read_at(&mut page, 12 * 4096).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO));
    for p in [0u64, 11, 13, 22] {
        let n = f.read_at(&mut page, p * 4096).unwrap();
        assert!(page[..n] == want[(p * 4096) as usize..][..n], "page {p}");
    }
    let log = m.log();
    assert!(
        log.lines().any(|l| l.contains("read failed")
            && l.contains("bad.ncb")
            && l.contains(&format!("block {k}"))),
        "no log line naming the file and block:\n{log}"
    );
    drop(f);
    m.stop();
}

/// Files whose names netCDF-C reads but the mount cannot all show
/// (tests/fixtures/netcdf3/names): an archive still holds every variable,
/// each its own (two variables named alike included), and unpacks to the
/// original bytes.
#[test]
fn pack_keeps_variables_the_mount_does_not_show() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = repo().join("tests/fixtures/netcdf3/names");
    for name in [
        "unshowable_names.nc",
        "nul_padded_classic.nc",
        "nul_padded_offset64.nc",
    ] {
        let orig = dir.join(name);
        let archive = tmp.path().join(format!("{name}.ncb"));
        let back = tmp.path().join(name);
        pack(&orig, &archive, &opts(64, BlockCodec::Zstd, true)).unwrap();
        unpack(&archive, &back).unwrap();
        assert!(
            std::fs::read(&orig).unwrap() == std::fs::read(&back).unwrap(),
            "{name}: unpacked bytes differ"
        );
    }
}
