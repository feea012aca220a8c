//! The `pincer` command line: the daemon, the worker's request tool and the evaluation harness
//! (`pincer::cli_main`, in the library so that every binary named `pincer` links it rather than
//! compiling it again).

fn main() -> std::process::ExitCode {
    // The hold anchor (started by the daemon from its FUSE mount) only waits.
    if std::env::args_os().nth(1).is_some_and(|a| a == pincer::kernel::hold::ANCHOR_ARG) {
        pincer::kernel::hold::anchor_main();
    }
    pincer::cli_main()
}
