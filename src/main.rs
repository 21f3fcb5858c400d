//! The `slabfs` binary: parse the command line, set up logging, run.

mod cli;

use clap::Parser;

fn main() {
    let cli = cli::Cli::parse();
    env_logger::Builder::new()
        .parse_filters(&cli.log_level)
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
