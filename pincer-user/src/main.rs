//! The `pincer` command line: the daemon, the worker's request tool and the evaluation harness
//! (`pincer::cli_main`, in the library so that every binary named `pincer` links it rather than
//! compiling it again).

fn main() -> std::process::ExitCode {
    pincer::cli_main()
}
