//! `mount.slabfs`: slabfs as a mount(8) helper, so an fstab line or a
//! systemd `.mount` unit of type `fuse.slabfs` mounts a dataset.
//!
//! # How mount(8) reaches slabfs
//!
//! For `mount -t fuse.slabfs SOURCE DIR -o OPTS` (or an fstab line of that
//! type) util-linux runs the first helper it finds among
//! `/sbin/mount.fuse.slabfs` and then `/sbin/mount.fuse` (the type with its
//! `.subtype` cut off), as
//!
//! ```text
//! HELPER SOURCE DIR [-s] [-f] [-n] [-v] [-N NS] [-o OPTS] [-t fuse.slabfs]
//! ```
//!
//! (`-t` only when the helper's name lacks the subtype), and returns when
//! the helper does. It passes every option but `auto`, `noauto`,
//! `comment=`, `x-*`/`X-*` and a few propagation flags, and adds `rw` when
//! neither `ro` nor `rw` is given. So:
//!
//! - slabfs answers to `mount.fuse.slabfs` and `mount.slabfs` (argv[0]):
//!   install a symlink `/sbin/mount.fuse.slabfs -> slabfs`.
//! - Without that symlink, fuse3's `mount.fuse` runs
//!   `/bin/sh -c "slabfs SOURCE DIR -o OPTS,dev,suid"` from the shell's
//!   default PATH (mount(8) clears PATH for helpers): slabfs also accepts
//!   that form — a first argument that is not a subcommand, and `-o`.
//! - The helper must return once the mount is live, so it always detaches
//!   like `slabfs mount --daemon`: exit 0 when mounted, or print the reason
//!   and exit 32 (mount(8)'s "mount failure"); a usage error exits 1.
//!
//! # Options
//!
//! `-o` options are `slabfs mount`'s long flags with `_` for `-`
//! (`cache_size=2GiB`, `allow_other`, `views=raw+json`), parsed by clap
//! from the same definitions, plus fstab's own words (`ro`, `nonempty`,
//! `x-mount.mkdir`, generic options that change nothing here): see
//! [`super::options`], which `slabfs mount -o` uses too. Unknown options
//! are refused, unless `-s` (sloppy) is given, which only warns. `-f`
//! (fake) checks everything and mounts nothing; `-n` and `-v` are
//! accepted (`-v` logs at info; `log_level=LEVEL` sets the level).

use std::ffi::{OsStr, OsString};
use std::path::Path;

use super::options::{self, OptError};
use super::{Cli, Command, MountArgs};
use clap::Parser;

/// Names under which slabfs acts as a mount helper (argv[0]'s file name).
pub const NAMES: [&str; 2] = ["mount.slabfs", "mount.fuse.slabfs"];

/// A parsed helper invocation.
#[derive(Debug)]
pub struct Invocation {
    /// What `slabfs mount` would have been given; `daemon` is always set.
    pub args: MountArgs,
    /// `-f`: check everything, mount nothing.
    pub fake: bool,
    /// `log_level=`, else `info` with `-v`, else `None` (the default).
    pub log_level: Option<String>,
    /// Unknown options ignored because of `-s`.
    pub ignored: Vec<String>,
}

/// Whether `argv` asks for the mount helper: argv[0] named like one of
/// [`NAMES`], or the form fuse3's `mount.fuse` runs, `slabfs SOURCE DIR -o
/// OPTS` (a first argument that is neither an option nor one of
/// `subcommands`, and a `-o`).
pub fn is_helper(argv: &[OsString], subcommands: &[&str]) -> bool {
    let Some(argv0) = argv.first() else {
        return false;
    };
    let name = Path::new(argv0).file_name().unwrap_or(argv0);
    if NAMES.iter().any(|n| name == OsStr::new(n)) {
        return true;
    }
    let has_o = || {
        argv[2..]
            .iter()
            .any(|a| a.to_str().is_some_and(|a| a.starts_with("-o")))
    };
    match argv.get(1).map(|a| a.to_str()) {
        None => false,
        // A non-UTF-8 first argument is a path, not a subcommand either.
        Some(None) => has_o(),
        Some(Some(first)) => !first.starts_with('-') && !subcommands.contains(&first) && has_o(),
    }
}

/// Parse `SOURCE DIR [-sfnv] [-N NS] [-o OPTS]... [-t TYPE]` (argv without
/// argv[0]). Errors are one line for the user.
pub fn parse(args: &[OsString]) -> Result<Invocation, String> {
    let mut positional: Vec<&OsString> = Vec::new();
    let mut options: Vec<String> = Vec::new();
    let (mut sloppy, mut fake, mut verbose) = (false, false, false);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let Some(a) = arg.to_str().filter(|a| a.starts_with('-') && a.len() > 1) else {
            positional.push(arg);
            continue;
        };
        let value = |it: &mut std::slice::Iter<OsString>, flag: &str| -> Result<String, String> {
            let v = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
            v.to_str()
                .map(str::to_string)
                .ok_or_else(|| format!("{flag} {v:?}: not UTF-8"))
        };
        if let Some(opts) = a.strip_prefix("-o") {
            options.push(if opts.is_empty() {
                value(&mut it, "-o")?
            } else {
                opts.to_string()
            });
        } else if let Some(t) = a.strip_prefix("-t") {
            let t = if t.is_empty() {
                value(&mut it, "-t")?
            } else {
                t.to_string()
            };
            if !matches!(t.as_str(), "fuse.slabfs" | "slabfs") {
                return Err(format!("-t {t}: this helper mounts only type fuse.slabfs"));
            }
        } else if a == "-N" || a.starts_with("-N") {
            return Err("-N (mount in another namespace) is not supported".into());
        } else {
            for flag in a[1..].chars() {
                match flag {
                    's' => sloppy = true,
                    'f' => fake = true,
                    'v' => verbose = true,
                    // No mtab is written anyway.
                    'n' => {}
                    _ => return Err(format!("unknown flag -{flag}")),
                }
            }
        }
    }
    let [source, mountpoint] = positional[..] else {
        return Err(format!(
            "expected SOURCE and MOUNTPOINT, got {} argument(s) (usage: mount.slabfs SOURCE \
             MOUNTPOINT [-sfnv] [-o OPTIONS])",
            positional.len()
        ));
    };
    // Each option becomes the `slabfs mount` flags it stands for
    // (super::options), checked alone first so that a bad value is
    // reported with the option that gave it.
    let mut flags: Vec<OsString> = Vec::new();
    let mut log_level = verbose.then(|| "info".to_string());
    let mut ignored = Vec::new();
    for opts in &options {
        for opt in opts.split(',').filter(|o| !o.is_empty()) {
            let e = match options::expand(opt) {
                Ok(e) => e,
                Err(OptError::Unknown) if sloppy => {
                    ignored.push(opt.to_string());
                    continue;
                }
                Err(OptError::Unknown) => {
                    return Err(format!(
                        "{}; -s ignores unknown ones",
                        options::unknown(opt)
                    ));
                }
                Err(OptError::Bad(msg)) => return Err(format!("option {opt:?}: {msg}")),
            };
            if let Some(level) = e.log_level {
                log_level = Some(level);
            }
            if !e.flags.is_empty() {
                // Alone, an option that needs another is not wrong yet.
                use clap::error::ErrorKind::{ArgumentConflict, MissingRequiredArgument};
                match mount_cli(&e.flags, &[OsStr::new("s"), OsStr::new("m")]) {
                    Err(e) if !matches!(e.kind(), MissingRequiredArgument | ArgumentConflict) => {
                        return Err(format!("option {opt:?}: {}", options::clap_line(&e)));
                    }
                    _ => {}
                }
            }
            flags.extend(e.flags);
        }
    }
    // The whole: options that conflict, or need another (`ref=` and
    // `all_refs`, `hdf5_plugin_path=` without `hdf5_plugins`).
    let cli = mount_cli(&flags, &[source, mountpoint]).map_err(|e| options::clap_line(&e))?;
    let Command::Mount(mut args) = cli.command else {
        unreachable!("parsed as a mount")
    };
    args.daemon = true;
    Ok(Invocation {
        args,
        fake,
        log_level,
        ignored,
    })
}

/// `slabfs mount FLAGS -- POSITIONAL...` parsed by clap.
fn mount_cli(flags: &[OsString], positional: &[&OsStr]) -> Result<Cli, clap::Error> {
    let argv = [OsStr::new("slabfs"), OsStr::new("mount")]
        .into_iter()
        .chain(flags.iter().map(OsString::as_os_str))
        .chain([OsStr::new("--")])
        .chain(positional.iter().copied());
    Cli::try_parse_from(argv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use slabfs::fs::views::Views;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn mountpoint_options() {
        let plain = parse_ok(&["/data", "/mnt/x", "-o", "ro"]);
        assert!(!plain.args.allow_non_empty && !plain.args.create_mountpoint);
        let inv = parse_ok(&["/data", "/mnt/x", "-o", "ro,nonempty,x-mount.mkdir"]);
        assert!(inv.args.allow_non_empty && inv.args.create_mountpoint);
    }

    #[test]
    fn remote_options() {
        let inv = parse_ok(&[
            "s3://bucket/runs",
            "/mnt/x",
            "-o",
            "ro,endpoint_url=http://127.0.0.1:9000,no_sign_request,max_requests=8,\
             allow_outside=/data:s3://other/p:gs://g",
        ]);
        let r = &inv.args.common.remote;
        assert_eq!(r.endpoint_url.as_deref(), Some("http://127.0.0.1:9000"));
        assert!(r.no_sign_request);
        assert_eq!(r.max_requests, 8);
        assert_eq!(
            inv.args.source,
            std::path::PathBuf::from("s3://bucket/runs")
        );
        assert_eq!(
            inv.args.common.allow_outside,
            ["/data", "s3://other/p", "gs://g"].map(std::path::PathBuf::from)
        );
        assert!(parse(&os(&["s", "m", "-o", "ro,max_requests=0"])).is_err());
    }

    #[test]
    fn icechunk_ref_option() {
        let inv = parse_ok(&["/srv/repo", "/mnt/x", "-o", "ro,ref=v1"]);
        assert_eq!(inv.args.common.reference.as_deref(), Some("v1"));
        let inv = parse_ok(&["/srv/repo", "/mnt/x", "-o", "ro"]);
        assert_eq!(inv.args.common.reference, None);
        let inv = parse_ok(&["/srv/repo", "/mnt/x", "-o", "ro,all_refs"]);
        assert!(inv.args.common.all_refs);
        let err = parse_err(&["/srv/repo", "/mnt/x", "-o", "ro,ref=v1,all_refs"]);
        assert!(
            err.contains("'--ref <BRANCH|TAG|SNAPSHOT>' cannot be used with '--all-refs'"),
            "{err}"
        );
    }

    #[test]
    fn disk_cache_options() {
        let o = "ro,disk_cache=/var/cache/slabfs,disk_cache_size=2GiB";
        let inv = parse_ok(&["s3://b/p", "/mnt/x", "-o", o]);
        let remote = inv.args.common.remote.config();
        let cache = remote.disk_cache.expect("a disk cache");
        assert_eq!(cache.dir, std::path::Path::new("/var/cache/slabfs"));
        assert_eq!(cache.size, 2 << 30);
    }

    fn parse_ok(args: &[&str]) -> Invocation {
        parse(&os(args)).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    fn parse_err(args: &[&str]) -> String {
        match parse(&os(args)) {
            Ok(inv) => panic!("{args:?} accepted: {inv:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn helper_names_and_the_mount_fuse_form() {
        let subs = ["ls", "cat", "mount", "help"];
        let yes = |a: &[&str]| is_helper(&os(a), &subs);
        assert!(yes(&["/sbin/mount.slabfs", "src", "mnt"]));
        assert!(yes(&["mount.fuse.slabfs", "src", "mnt", "-o", "ro"]));
        // fuse3's mount.fuse: `slabfs SOURCE DIR -o OPTS`.
        assert!(yes(&["slabfs", "/data", "/mnt", "-o", "ro,dev,suid"]));
        assert!(yes(&["/usr/bin/slabfs", "/data", "/mnt", "-oro"]));
        assert!(!yes(&["slabfs", "mount", "/data", "/mnt"]));
        assert!(!yes(&["slabfs", "ls", "/data"]));
        assert!(!yes(&["slabfs", "/data", "/mnt"])); // no -o: a usage error
        assert!(!yes(&["slabfs", "--version"]));
        assert!(!yes(&["slabfs"]));
        assert!(!yes(&["mount.slabfsx", "a", "b"]));
    }

    #[test]
    fn fstab_options_map_onto_mount_flags() {
        let inv = parse_ok(&[
            "/data",
            "/mnt/data",
            "-o",
            "ro,allow_other,cache_size=64MiB,byte_order=big,views=raw+json+npy,refresh=0,\
             uid=1000,gid=100,threads=3,read_ahead_kb=2048,allow_outside=/srv/a:/srv/b,\
             metrics=9108,metrics_otlp=http://127.0.0.1:4318/v1/metrics,metrics_otlp_interval=30,\
             metrics_label=mount=archive,metrics_label=site=a",
        ]);
        assert!(!inv.fake);
        let cfg = inv.args.mount_config();
        assert_eq!(cfg.source, Path::new("/data"));
        assert_eq!(cfg.mountpoint, Path::new("/mnt/data"));
        assert!(cfg.allow_other && inv.args.daemon);
        assert_eq!(cfg.cache_size, 64 << 20);
        assert_eq!(
            cfg.allow_outside,
            [Path::new("/srv/a"), Path::new("/srv/b")]
        );
        assert_eq!(cfg.byte_order, slabfs::dtype::Endian::Big);
        assert_eq!(
            cfg.views,
            Views {
                raw: true,
                json: true,
                npy: true,
                hdr: false
            }
        );
        assert_eq!(cfg.refresh, None);
        assert_eq!((cfg.uid, cfg.gid), (Some(1000), Some(100)));
        assert_eq!(cfg.threads, 3);
        assert_eq!(cfg.read_ahead_kb, Some(2048));
        assert_eq!(cfg.metrics, Some("127.0.0.1:9108".parse().unwrap()));
        let otlp = cfg.metrics_otlp.unwrap();
        assert_eq!(otlp.endpoint.as_str(), "http://127.0.0.1:4318/v1/metrics");
        assert_eq!(otlp.interval, std::time::Duration::from_secs(30));
        let label = |k: &str, v: &str| (k.to_string(), v.to_string());
        assert_eq!(
            cfg.metrics_labels,
            [label("mount", "archive"), label("site", "a")]
        );
        assert_eq!(inv.log_level, None);
    }

    #[test]
    fn hdf5_plugins_are_allowed_only_by_name() {
        let inv = parse_ok(&["/data", "/mnt", "-o", "ro"]);
        assert!(!inv.args.common.hdf5_plugins().enabled);
        let inv = parse_ok(&[
            "/data",
            "/mnt",
            "-o",
            "ro,hdf5_plugins,hdf5_plugin_path=/opt/p1:/opt/p2",
        ]);
        let cfg = inv.args.common.hdf5_plugins();
        assert!(cfg.enabled);
        assert_eq!(cfg.dirs, [Path::new("/opt/p1"), Path::new("/opt/p2")]);
        let e = parse_err(&["/data", "/mnt", "-o", "ro,hdf5_plugin_path=/opt/p"]);
        assert!(
            e.contains("required arguments were not provided: --hdf5-plugins"),
            "{e}"
        );
    }

    #[test]
    fn defaults_are_those_of_slabfs_mount() {
        let inv = parse_ok(&["/data", "/mnt", "-o", "ro"]);
        let cfg = inv.args.mount_config();
        assert_eq!(cfg.cache_size, 512 << 20);
        assert_eq!(cfg.views, Views::default());
        assert_eq!(cfg.refresh, Some(std::time::Duration::from_secs(5)));
        assert!(!cfg.allow_other);
        assert_eq!((cfg.uid, cfg.gid, cfg.read_ahead_kb), (None, None, None));
        // No -o at all is fine too (mount(8) always passes one, though).
        parse_ok(&["/data", "/mnt"]);
    }

    #[test]
    fn what_mount_systemd_and_mount_fuse_pass_is_ignored() {
        // As util-linux, systemd and fuse3's mount.fuse really pass them.
        let inv = parse_ok(&[
            "/data",
            "/mnt",
            "-s",
            "-f",
            "-n",
            "-v",
            "-o",
            "ro,noexec,nodev,nosuid,user,users,_netdev,nofail,defaults,noauto,auto,\
             x-systemd.automount,x-systemd.idle-timeout=60,X-mount.mkdir,comment=systemd.x,\
             relatime,dev,suid,exec",
            "-t",
            "fuse.slabfs",
        ]);
        assert!(inv.fake);
        assert!(inv.ignored.is_empty(), "{:?}", inv.ignored);
        assert_eq!(inv.log_level.as_deref(), Some("info"));
        let inv = parse_ok(&["/d", "/m", "-o", "ro", "-o", "log_level=debug", "-sfv"]);
        assert_eq!(inv.log_level.as_deref(), Some("debug"));
        assert!(inv.fake);
        let inv = parse_ok(&["/d", "/m", "-o", "ro,log_file=/var/log/slabfs.log"]);
        assert_eq!(
            inv.args.log_file.as_deref(),
            Some(Path::new("/var/log/slabfs.log"))
        );
        assert!(parse_err(&["/d", "/m", "-o", "ro,log_file"]).contains("needs a value"));
    }

    #[test]
    fn rw_unknown_and_malformed_options_are_refused() {
        let e = parse_err(&["/d", "/m", "-o", "rw"]);
        assert!(e.contains("read-only") && e.contains("write ro"), "{e}");
        let e = parse_err(&["/d", "/m", "-o", "ro,compress=zstd"]);
        assert!(e.contains("unknown option \"compress=zstd\""), "{e}");
        let e = parse_err(&["/d", "/m", "-o", "views=raw,npy"]);
        assert!(e.contains("unknown option \"npy\""), "{e}");
        let e = parse_err(&["/d", "/m", "-o", "views=raw+tiff"]);
        assert!(e.contains("unknown view \"tiff\""), "{e}");
        for bad in [
            "cache_size=lots",
            "cache_size",
            "byte_order=middle",
            "refresh=-1",
            "uid=root",
            "gid=",
            "threads=0",
            "threads=70000",
            "read_ahead_kb=1M",
            "metrics=",
            "metrics=nine",
            "metrics_otlp=",
            "metrics_otlp=collector:4318",
            "metrics_otlp=http://u:p@c:4318",
            "metrics_otlp_interval=0",
            "metrics_otlp_interval=1m",
            "ro=1",
            "allow_other=yes",
            "noexec=1",
        ] {
            let e = parse_err(&["/d", "/m", "-o", bad]);
            assert!(
                e.starts_with("option") || e.starts_with("unknown"),
                "{bad}: {e}"
            );
        }
        // -s tolerates unknown options, never bad values.
        let inv = parse_ok(&["/d", "/m", "-s", "-o", "ro,compress=zstd,auto_unmount"]);
        assert_eq!(inv.ignored, ["compress=zstd", "auto_unmount"]);
        assert!(parse(&os(&["/d", "/m", "-s", "-o", "cache_size=x"])).is_err());
    }

    #[test]
    fn bad_command_lines() {
        assert!(parse_err(&["/d"]).contains("expected SOURCE and MOUNTPOINT"));
        assert!(parse_err(&["/d", "/m", "/x"]).contains("got 3"));
        assert!(parse_err(&["/d", "/m", "-o"]).contains("-o needs a value"));
        assert!(parse_err(&["/d", "/m", "-t", "fuse.sshfs"]).contains("fuse.slabfs"));
        assert!(parse_err(&["/d", "/m", "-N", "/proc/1/ns/mnt"]).contains("namespace"));
        assert!(parse_err(&["/d", "/m", "-x"]).contains("unknown flag -x"));
        parse_ok(&["/d", "/m", "-tslabfs", "-oro"]);
    }
}
