//! `-o OPTION[,OPTION...]`: mount options in fstab's spelling, for
//! `slabfs mount -o` and the `mount.slabfs` helper alike.
//!
//! There is one definition of every mount option: its clap flag
//! ([`super::MountArgs`]). An `-o` option is that flag's long name with
//! `_` for `-` (`cache_size=2GiB` is `--cache-size 2GiB`, `allow_other`
//! is `--allow-other`), so it is parsed and checked by the same code and
//! a new flag is an option at once. The exceptions are fstab's own words:
//!
//! - `ro` is accepted (a slabfs mount is always read-only); `rw` is
//!   refused with a message, since mount(8) adds it whenever `ro` is
//!   missing and a mount that claims to be writable would mislead;
//! - `nonempty` is `--allow-non-empty` (libfuse's spelling) and
//!   `x-mount.mkdir` is `--create-mountpoint` (util-linux's; mount(8)
//!   creates the directory itself and keeps `x-*` options from helpers);
//! - `views=` joins its views with `+` (`views=raw+json+npy`), since
//!   commas separate options, and `allow_outside=` its roots with `:`;
//! - generic options that change nothing for a read-only FUSE mount
//!   ([`IGNORED`]), other `x-*` options and `comment=` are accepted and
//!   ignored;
//! - `log_level=` is the helper's log level (its default is quieter than
//!   `slabfs mount`'s).
//!
//! Anything else is an unknown option: an error, or ignored with the
//! helper's `-s` (sloppy).

use std::ffi::OsString;

/// Options passed along by mount(8), fuse3's `mount.fuse` or systemd that
/// change nothing for slabfs: the mount is always `ro,nodev,nosuid`, files
/// are never executable, access times are meaningless without writes, and
/// mount(8) itself handles `user`/`users`/`owner`/`group`/`nofail`.
pub const IGNORED: &[&str] = &[
    "defaults",
    "auto",
    "noauto",
    "nofail",
    "_netdev",
    "user",
    "users",
    "nouser",
    "owner",
    "group",
    "dev",
    "nodev",
    "suid",
    "nosuid",
    "exec",
    "noexec",
    "async",
    "sync",
    "atime",
    "noatime",
    "diratime",
    "nodiratime",
    "relatime",
    "norelatime",
    "strictatime",
    "nostrictatime",
    "lazytime",
    "nolazytime",
    "silent",
    "loud",
    "default_permissions",
];

/// Why an option was not taken.
#[derive(Debug, PartialEq, Eq)]
pub enum OptError {
    /// No such option (the helper's `-s` ignores these).
    Unknown,
    /// A known option, wrongly given: the message says how.
    Bad(String),
}

/// What one option asks for.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Expanded {
    /// The `slabfs mount` flags it stands for (none for an ignored one).
    pub flags: Vec<OsString>,
    /// `log_level=LEVEL`.
    pub log_level: Option<String>,
}

/// The long flags `slabfs mount` takes, without `--`, and whether each
/// takes a value (`help` and `version` are no options).
fn mount_flags() -> Vec<(String, bool)> {
    use clap::CommandFactory;
    let cli = super::Cli::command();
    let mount = cli
        .find_subcommand("mount")
        .expect("slabfs has a mount subcommand");
    mount
        .get_arguments()
        .chain(cli.get_arguments().filter(|a| a.is_global_set()))
        .filter_map(|a| Some((a.get_long()?.to_string(), a.get_action().takes_values())))
        .filter(|(name, _)| !matches!(name.as_str(), "help" | "version" | "options"))
        .collect()
}

/// Translate one option (`key` or `key=value`) into `slabfs mount` flags.
pub fn expand(opt: &str) -> Result<Expanded, OptError> {
    let (key, value) = match opt.split_once('=') {
        Some((k, v)) => (k, Some(v)),
        None => (opt, None),
    };
    let bad = |m: &str| Err(OptError::Bad(m.to_string()));
    let flag = |f: &str| Expanded {
        flags: vec![OsString::from(f)],
        log_level: None,
    };
    match (key, value) {
        ("ro", None) => return Ok(Expanded::default()),
        ("rw", None) => {
            return bad(
                "slabfs mounts are read-only: write ro (mount passes rw when neither is given)",
            );
        }
        ("nonempty", None) => return Ok(flag("--allow-non-empty")),
        ("x-mount.mkdir", _) => return Ok(flag("--create-mountpoint")),
        // x-systemd.* and comment= normally never reach a helper; systemd
        // and older mount(8) versions may still pass them.
        _ if key.starts_with("x-") || key.starts_with("X-") || key == "comment" => {
            return Ok(Expanded::default());
        }
        (_, None) if IGNORED.contains(&key) => return Ok(Expanded::default()),
        ("log_level", Some(level)) => {
            return Ok(Expanded {
                flags: Vec::new(),
                log_level: Some(level.to_string()),
            });
        }
        _ => {}
    }
    let long = key.replace('_', "-");
    // Spelled with `_`, as fstab options are: `cache-size=` is no option.
    if key.contains('-') {
        return Err(OptError::Unknown);
    }
    let Some(&(_, takes_value)) = mount_flags().iter().find(|(name, _)| *name == long) else {
        return Err(OptError::Unknown);
    };
    let mut flags = Vec::new();
    match (takes_value, value) {
        (false, None) => flags.push(OsString::from(format!("--{long}"))),
        (false, Some(_)) => return bad(&format!("{key} takes no value")),
        (true, None | Some("")) => return bad(&format!("{key}= needs a value")),
        // Several roots in one option: `:` between them (commas separate
        // options), except the `:` of a URL's `scheme://`.
        (true, Some(v)) if key == "allow_outside" => {
            for root in split_roots(v) {
                flags.push(OsString::from("--allow-outside"));
                flags.push(OsString::from(root));
            }
        }
        (true, Some(v)) => {
            flags.push(OsString::from(format!("--{long}")));
            flags.push(OsString::from(if key == "views" {
                v.replace('+', ",")
            } else {
                v.to_string()
            }));
        }
    }
    Ok(Expanded {
        flags,
        log_level: None,
    })
}

/// The names `-o` takes, for a message listing them.
pub fn names() -> String {
    let mut names: Vec<String> = mount_flags()
        .into_iter()
        .filter(|(name, _)| name != "daemon")
        .map(|(name, takes)| {
            let name = name.replace('-', "_");
            if takes { format!("{name}=") } else { name }
        })
        .collect();
    names.extend(["ro", "nonempty", "x-mount.mkdir"].map(String::from));
    names.sort();
    names.join(", ")
}

/// The message of an unknown option.
pub fn unknown(opt: &str) -> String {
    format!(
        "unknown option {opt:?} (-o takes mount's long options with _ for -, as NAME=VALUE or \
         NAME: {})",
        names()
    )
}

/// `allow_outside=` values: `:` separates roots, except the `:` of a
/// URL's `scheme://` (`/a:s3://b/p` is `/a` and `s3://b/p`).
pub fn split_roots(v: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for piece in v.split(':') {
        match out.last_mut() {
            Some(last) if piece.starts_with("//") && !last.contains('/') => {
                last.push(':');
                last.push_str(piece);
            }
            _ => out.push(piece.to_string()),
        }
    }
    out.retain(|p| !p.is_empty());
    out
}

/// A clap error in one line, without clap's `error: ` and usage: for a
/// message that names the option too.
pub fn clap_line(e: &clap::Error) -> String {
    let text = e.to_string();
    let first: Vec<&str> = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let line = first.join(" ");
    line.strip_prefix("error: ").unwrap_or(&line).to_string()
}

/// `argv` (all of it, argv[0] first) with the `-o` options of a `slabfs
/// mount` command line expanded ([`expand_mount_args`]); other command
/// lines as they are.
pub fn expand_argv(argv: Vec<OsString>) -> Result<Vec<OsString>, String> {
    // The subcommand: the first word that is neither an option nor the
    // value of the one global option that takes one.
    let mut i = 1;
    while let Some(a) = argv.get(i).and_then(|a| a.to_str()) {
        match a {
            "--log-level" => i += 2,
            _ if a.starts_with('-') => i += 1,
            _ => break,
        }
    }
    if argv.get(i).and_then(|a| a.to_str()) != Some("mount") {
        return Ok(argv);
    }
    let mut out = argv[..=i].to_vec();
    out.extend(expand_mount_args(&argv[i + 1..])?);
    Ok(out)
}

/// `slabfs mount` arguments with every `-o OPTS` / `-oOPTS` replaced by
/// the flags its options stand for (`args` start after `mount`); stops
/// at `--`. Unknown options are errors here: `-s` is the helper's.
pub fn expand_mount_args(args: &[OsString]) -> Result<Vec<OsString>, String> {
    let mut out = Vec::with_capacity(args.len());
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let text = arg.to_str();
        let opts = match text {
            Some("--") => {
                out.push(arg.clone());
                out.extend(it.cloned());
                break;
            }
            Some("-o" | "--options") => match it.next() {
                Some(v) => v
                    .to_str()
                    .ok_or_else(|| format!("-o {v:?}: not UTF-8"))?
                    .to_string(),
                None => return Err("-o needs a value: -o OPTION[,OPTION...]".into()),
            },
            Some(t) if t.starts_with("-o") && !t.starts_with("--") => t[2..].to_string(),
            Some(t) if t.starts_with("--options=") => t["--options=".len()..].to_string(),
            _ => {
                out.push(arg.clone());
                continue;
            }
        };
        for opt in opts.split(',').filter(|o| !o.is_empty()) {
            match expand(opt) {
                Ok(e) => {
                    out.extend(e.flags);
                    if let Some(level) = e.log_level {
                        out.push("--log-level".into());
                        out.push(level.into());
                    }
                }
                Err(OptError::Unknown) => return Err(unknown(opt)),
                Err(OptError::Bad(m)) => return Err(format!("option {opt:?}: {m}")),
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(opt: &str) -> Vec<String> {
        expand(opt)
            .unwrap()
            .flags
            .into_iter()
            .map(|f| f.into_string().unwrap())
            .collect()
    }

    #[test]
    fn options_are_the_long_flags_with_underscores() {
        assert_eq!(flags("cache_size=2GiB"), ["--cache-size", "2GiB"]);
        assert_eq!(flags("allow_other"), ["--allow-other"]);
        assert_eq!(flags("views=raw+json+npy"), ["--views", "raw,json,npy"]);
        assert_eq!(flags("nonempty"), ["--allow-non-empty"]);
        assert_eq!(flags("x-mount.mkdir"), ["--create-mountpoint"]);
        assert_eq!(
            flags("allow_outside=/a:s3://b/p"),
            ["--allow-outside", "/a", "--allow-outside", "s3://b/p"]
        );
        assert!(flags("ro").is_empty() && flags("noatime").is_empty());
        assert!(flags("x-systemd.automount").is_empty());
        assert_eq!(expand("cache-size=1G"), Err(OptError::Unknown));
        assert_eq!(expand("compress=zstd"), Err(OptError::Unknown));
        assert!(matches!(expand("rw"), Err(OptError::Bad(m)) if m.contains("write ro")));
        assert!(
            matches!(expand("cache_size"), Err(OptError::Bad(m)) if m.contains("needs a value"))
        );
        assert!(matches!(expand("allow_other=1"), Err(OptError::Bad(m)) if m.contains("no value")));
    }

    #[test]
    fn every_mount_flag_is_an_option() {
        let names = names();
        for n in [
            "cache_size=",
            "refresh=",
            "endpoint_url=",
            "no_sign_request",
            "metrics=",
        ] {
            assert!(names.contains(n), "{n}: {names}");
        }
        assert!(
            !names.contains("help") && !names.contains("daemon"),
            "{names}"
        );
    }

    #[test]
    fn mount_args_expand_every_o() {
        let os = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        let got = expand_mount_args(&os(&[
            "-o",
            "ro,cache_size=1GiB",
            "-oallow_other",
            "src",
            "--",
            "-o",
        ]))
        .unwrap();
        assert_eq!(
            got,
            os(&["--cache-size", "1GiB", "--allow-other", "src", "--", "-o"])
        );
        let e = expand_mount_args(&os(&["-o", "ro,compress=zstd"])).unwrap_err();
        assert!(e.starts_with("unknown option \"compress=zstd\""), "{e}");
        assert!(
            expand_mount_args(&os(&["-o"]))
                .unwrap_err()
                .contains("needs a value")
        );
    }
}
