use serde_json::json;
use slabfs::codec::blosc::Blosc;
use slabfs::codec::{BytesToBytesCodec, DecodedSize};

fn compress(
    data: &[u8],
    typesize: usize,
    clevel: i32,
    shuffle: i32,
    cname: &str,
    blocksize: usize,
) -> Vec<u8> {
    let mut out = vec![0u8; data.len() + 16];
    let cname = std::ffi::CString::new(cname).unwrap();
    // SAFETY: buffers valid for their lengths.
    let n = unsafe {
        blosc_src::blosc_compress_ctx(
            clevel,
            shuffle,
            typesize,
            data.len(),
            data.as_ptr().cast(),
            out.as_mut_ptr().cast(),
            out.len(),
            cname.as_ptr(),
            blocksize,
            1,
        )
    };
    assert!(n > 0);
    out.truncate(n as usize);
    out
}

fn main() {
    let iters: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(100_000);
    let data: Vec<u8> = (0..30000u32)
        .flat_map(|i| (((i as f32) * 0.01).sin() * 100.0).round().to_le_bytes())
        .collect();
    let mut frames = Vec::new();
    for cname in ["blosclz", "lz4", "lz4hc", "zlib", "zstd"] {
        for shuffle in [0, 1, 2] {
            for (ts, bs) in [(4, 1024), (1, 0), (8, 0), (3, 256), (20, 0)] {
                frames.push(compress(
                    &data[..data.len() / ts * ts],
                    ts,
                    5,
                    shuffle,
                    cname,
                    bs,
                ));
            }
        }
    }
    let c = Blosc::from_config(&json!({"id": "blosc", "cname": "lz4"})).unwrap();
    let mut x: u64 = 0x9E3779B97F4A7C15;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut ok, mut err) = (0u64, 0u64);
    for it in 0..iters {
        let mut f = frames[(rnd() % frames.len() as u64) as usize].clone();
        let nb = u32::from_le_bytes(f[4..8].try_into().unwrap()) as usize;
        let k = 1 + rnd() % 6;
        for _ in 0..k {
            match rnd() % 6 {
                0 => {
                    let i = (rnd() % 16) as usize;
                    f[i] = rnd() as u8;
                }
                1 => {
                    let l = f.len().min(64) as u64;
                    let i = (rnd() % l) as usize;
                    f[i] ^= 1 << (rnd() % 8);
                }
                2 => {
                    let i = (rnd() % f.len() as u64) as usize;
                    f[i] = rnd() as u8;
                }
                3 => {
                    let l = (rnd() % f.len() as u64) as usize;
                    f.truncate(l.max(16));
                    let n = f.len() as u32;
                    f[12..16].copy_from_slice(&n.to_le_bytes());
                }
                4 => {
                    let v = (rnd() % (nb as u64 + 100)) as u32;
                    let at = [4usize, 8][(rnd() % 2) as usize];
                    f[at..at + 4].copy_from_slice(&v.to_le_bytes());
                }
                _ if f.len() > 20 => {
                    let l = f.len() as u64;
                    let i = 16 + (rnd() % (l.min(80) - 16)) as usize;
                    let v = (rnd() % (l + 8)) as u32;
                    let e = (i + 4).min(f.len());
                    let bytes = v.to_le_bytes();
                    f[i..e].copy_from_slice(&bytes[..e - i]);
                }
                _ => {}
            }
        }
        let size = if rnd() % 2 == 0 {
            DecodedSize::Exact(nb)
        } else {
            DecodedSize::AtMost(nb + 1000)
        };
        match c.decode(f, size) {
            Ok(out) => {
                assert!(out.len() <= nb + 1000);
                ok += 1
            }
            Err(_) => err += 1,
        }
        if it % 100_000 == 0 {
            eprintln!("{it}: ok {ok} err {err}");
        }
    }
    println!("done: {iters} mutated frames, {ok} decoded, {err} errors");
}
