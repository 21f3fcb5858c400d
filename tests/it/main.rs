//! slabfs's integration tests: one binary, so that `cargo test` runs them
//! side by side (a binary's tests run in parallel, binaries one after
//! another) and links once after a change. Each module is one subject;
//! `cargo test --test it remote::` runs one of them.
//!
//! Many tests wait on something other than the CPU (a mount, a refresh
//! pass, a stalled server), so the harness runs more tests at once than
//! there are cores: `RUST_TEST_THREADS` in .cargo/config.toml.
//!
//! Process-wide state is set up here, before `main`, while the process
//! has one thread ([`test_environment`]). The one test that sets
//! something process-wide, the logger of `signals::panics`, only adds
//! lines the others' assertions never read.

mod common;

mod attributes;
mod bad_input;
mod cache;
mod codec_stores;
mod codecs;
mod corpus;
mod dependencies;
mod descriptors;
mod disk_cache;
mod errors;
mod faults;
mod forwarding;
mod fuzz_regressions;
mod georef;
mod hdf5;
mod hdf5_plugins;
mod icechunk;
mod kerchunk;
mod latency;
mod layers;
mod lazy;
mod metrics;
mod mount;
mod mount_live;
mod nca;
mod ncml;
mod nczarr;
mod netcdf3;
mod ops;
mod packed;
mod readers;
mod registry;
mod remote;
mod remote_faults;
mod security;
mod series;
mod sharding;
mod signals;
mod soak;
mod zarr_fixtures;

/// The environment of every test (AWS's, and one for NumPy's BLAS),
/// which the servers' clients, the tests' Pythons and the daemons the
/// tests start inherit: the tests' own key (which must never
/// show anywhere, [`common::AWS_SECRET`]), and never a real endpoint,
/// profile or log setting of the machine's. Set by the loader before
/// `main`, when no other thread exists: setting the environment while
/// another thread reads it is undefined behaviour.
extern "C" fn test_environment() {
    // SAFETY: runs from .init_array, before main, on the only thread.
    unsafe {
        std::env::set_var("AWS_ACCESS_KEY_ID", common::AWS_KEY_ID);
        std::env::set_var("AWS_SECRET_ACCESS_KEY", common::AWS_SECRET);
        std::env::set_var("AWS_REGION", "us-east-1");
        // NumPy's OpenBLAS starts a thread per core in every Python the
        // tests run, which spin while they wait (about 5 s of CPU over a
        // run, perf): the tests' Pythons do no linear algebra.
        std::env::set_var("OPENBLAS_NUM_THREADS", "1");
        for var in [
            "AWS_ENDPOINT_URL",
            "AWS_ENDPOINT_URL_S3",
            "AWS_PROFILE",
            "AWS_SESSION_TOKEN",
            "RUST_LOG",
        ] {
            std::env::remove_var(var);
        }
    }
}

#[used]
#[unsafe(link_section = ".init_array")]
static TEST_ENVIRONMENT: extern "C" fn() = test_environment;
