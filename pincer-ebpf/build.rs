//! Compiles the C BPF LSM program with clang into `OUT_DIR/pincer.bpf.o`.

use std::env;
use std::path::PathBuf;
use std::process::Command;

/// Sources compiled or included; each one re-runs this script when it changes.
const SOURCES: [&str; 4] = ["src/pincer.bpf.c", "src/pincer.h", "src/vfs.h", "src/reach.bpf.c"];

fn main() {
    for source in SOURCES {
        println!("cargo:rerun-if-changed={source}");
    }
    println!("cargo:rerun-if-env-changed=PINCER_CLANG");
    let clang = env::var("PINCER_CLANG").unwrap_or_else(|_| "clang-19".to_string());
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("pincer.bpf.o");
    // Debian keeps `asm/types.h` (needed by <linux/types.h>) under the
    // multiarch include directory of the host.
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets CARGO_CFG_TARGET_ARCH");
    let (multiarch, target_arch) = match arch.as_str() {
        "x86_64" => ("x86_64-linux-gnu", "x86"),
        "aarch64" => ("aarch64-linux-gnu", "arm64"),
        other => panic!("pincer-ebpf: unsupported target architecture {other}"),
    };
    let status = Command::new(&clang)
        .args(["-g", "-O2", "-target", "bpf", "-Wall", "-Werror"])
        .arg(format!("-D__TARGET_ARCH_{target_arch}"))
        .arg(format!("-I/usr/include/{multiarch}"))
        .args(["-c", "src/pincer.bpf.c", "-o"])
        .arg(&out)
        .status()
        .unwrap_or_else(|e| {
            panic!(
                "pincer-ebpf: cannot run {clang} ({e}); install it with `apt-get install clang-19 libbpf-dev` \
                 or set PINCER_CLANG to a clang that targets BPF"
            )
        });
    if !status.success() {
        panic!("pincer-ebpf: {clang} failed to compile src/pincer.bpf.c ({status})");
    }
}
