//! The `slabfs` binary: parse the command line, set up logging, run.
//!
//! Called as `mount.slabfs` or `mount.fuse.slabfs` (or as fuse3's
//! `mount.fuse` runs it, `slabfs SOURCE DIR -o OPTIONS`), it is a mount(8)
//! helper instead: see [`cli::helper`].
//!
//! Logs go to stderr, or to `--log-file`. Under systemd (`$JOURNAL_STREAM`
//! names stderr) each line starts with its syslog priority (`<3>` error ...
//! `<7>` debug) and carries no timestamp, so the journal files it at the
//! right level (`journalctl -p warning`) and stamps it itself. A `--daemon`
//! without a log file logs to the system log once live, with a syslog
//! header (`<30>slabfs[PID]: ...`, see `slabfs::logging`).

mod cli;

use std::ffi::OsString;
use std::io::Write;

use clap::FromArgMatches;

fn main() {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let subcommands = cli::subcommands();
    let subcommands: Vec<&str> = subcommands.iter().map(String::as_str).collect();
    if cli::helper::is_helper(&argv, &subcommands) {
        std::process::exit(mount_helper(&argv));
    }

    // `slabfs mount -o OPTS`: the options become the flags they stand for.
    let argv = match cli::options::expand_argv(argv) {
        Ok(argv) => argv,
        Err(e) => {
            eprintln!("slabfs: {e}");
            std::process::exit(2);
        }
    };
    let matches = cli::command().get_matches_from(&argv);
    let cli = match cli::Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    // A daemon's log is its only voice: `mount` logs at info unless told
    // otherwise (mount, kernel settings, unmount); `ls`/`cat` stay quiet.
    let level = cli.log_level().to_string();
    // A daemon or a log file: lines go through slabfs::logging::Sink,
    // which can follow stderr to a file or the system log.
    let detaching =
        matches!(&cli.command, cli::Command::Mount(m) if m.daemon || m.log_file.is_some());
    init_logging(&level, detaching);
    if let Err(e) = cli::run(cli) {
        // A closed pipe (`slabfs cat ... | head`) is not an error worth a message.
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::BrokenPipe
        {
            std::process::exit(0);
        }
        // The library's errors already name the file, chunk and cause.
        match e.downcast_ref::<std::io::Error>() {
            Some(io) => eprintln!("slabfs: {}", slabfs::error::os_words(io)),
            None => eprintln!("slabfs: {e}"),
        }
        std::process::exit(1);
    }
}

/// Run as mount(8)'s helper; returns the exit status: 0 mounted, 1 bad
/// usage, 32 (mount(8)'s "mount failure") when mounting failed.
fn mount_helper(argv: &[OsString]) -> i32 {
    const USAGE: i32 = 1;
    const MOUNT_FAILURE: i32 = 32;
    let prog = std::path::Path::new(&argv[0])
        .file_name()
        .map_or("mount.slabfs".into(), |n| n.to_string_lossy().into_owned());
    let inv = match cli::helper::parse(&argv[1..]) {
        Ok(inv) => inv,
        Err(e) => {
            eprintln!("{prog}: {e}");
            return USAGE;
        }
    };
    // Quieter than `slabfs mount` by default: mount(8) is often run from a
    // terminal, which the daemon keeps as its stderr. `-v` gives info.
    init_logging(inv.log_level.as_deref().unwrap_or("warn"), true);
    for opt in &inv.ignored {
        log::warn!("ignoring unknown option {opt:?} (-s)");
    }
    if inv.fake {
        return 0;
    }
    match cli::mount(&inv.args, &prog, MOUNT_FAILURE) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{prog}: {e}");
            MOUNT_FAILURE
        }
    }
}

/// Install the logger at `level` (`RUST_LOG` overrides). `detaching`:
/// write through [`slabfs::logging::Sink`] (a log file, or a stderr that
/// becomes the system log), without colours.
fn init_logging(level: &str, detaching: bool) {
    let mut builder = env_logger::Builder::new();
    // notify logs at info and warn what is routine for it (the watch of
    // a deleted directory, gone already); RUST_LOG can still ask for it.
    builder
        .parse_filters(level)
        .filter_module("notify", log::LevelFilter::Error)
        .parse_env("RUST_LOG");
    if detaching {
        builder
            .target(env_logger::Target::Pipe(Box::new(slabfs::logging::Sink)))
            .write_style(env_logger::WriteStyle::Never);
    }
    if stderr_is_journal() {
        builder.format(|buf, record| {
            let priority = match record.level() {
                log::Level::Error => 3,
                log::Level::Warn => 4,
                log::Level::Info => 6,
                log::Level::Debug | log::Level::Trace => 7,
            };
            writeln!(buf, "<{priority}>{}: {}", record.target(), record.args())
        });
    } else if detaching {
        builder.format(|buf, record| {
            if slabfs::logging::syslog_format() {
                let header = slabfs::logging::syslog_header(record.level());
                return writeln!(buf, "{header}{}: {}", record.target(), record.args());
            }
            writeln!(
                buf,
                "[{} {:<5} {}] {}",
                buf.timestamp_millis(),
                record.level(),
                record.target(),
                record.args()
            )
        });
    } else {
        builder.format_timestamp_millis();
    }
    // Lines of the periodic re-loads are logged once an hour, not on every
    // refresh (slabfs::logging).
    let logger = slabfs::logging::Dedup::new(builder.build());
    log::set_max_level(logger.inner().filter());
    if log::set_boxed_logger(Box::new(logger)).is_err() {
        eprintln!("slabfs: a logger was already installed");
    }
}

/// Whether stderr is the journal stream systemd connected
/// (`$JOURNAL_STREAM` is `DEVICE:INODE` of it; a redirected stderr no
/// longer matches).
fn stderr_is_journal() -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let Some(stream) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Ok(stderr) = std::io::stderr().as_fd().try_clone_to_owned() else {
        return false;
    };
    let Ok(meta) = std::fs::File::from(stderr).metadata() else {
        return false;
    };
    stream.to_str() == Some(&format!("{}:{}", meta.dev(), meta.ino()))
}
