//! The `slabfs` binary: parse the command line, set up logging, run.

mod cli;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches};

fn main() {
    let matches = cli::Cli::command().get_matches();
    let cli = match cli::Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    // A daemon's log is its only voice: `mount` logs at info unless told
    // otherwise (mount, kernel settings, unmount); `ls`/`cat` stay quiet.
    let level = match cli.command {
        cli::Command::Mount(_)
            if matches.value_source("log_level") != Some(ValueSource::CommandLine) =>
        {
            "info"
        }
        _ => cli.log_level.as_str(),
    };
    env_logger::Builder::new()
        .parse_filters(level)
        .parse_env("RUST_LOG")
        .format_timestamp_millis()
        .init();
    if let Err(e) = cli::run(cli) {
        // A closed pipe (`slabfs cat ... | head`) is not an error worth a message.
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::BrokenPipe
        {
            std::process::exit(0);
        }
        // The library's errors already name the file, chunk and cause.
        eprintln!("slabfs: {e}");
        std::process::exit(1);
    }
}
