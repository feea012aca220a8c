//! The `pincer` command line: the daemon, the worker's request tool and the evaluation harness.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
