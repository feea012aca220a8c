//! The hold anchor's executable: a static ELF program of a few instructions that waits for a
//! signal in a loop and does nothing else ([`super::hold`] serves it from its FUSE mount, and
//! a held thread reads an xattr of it).
//!
//! The anchor used to be this program's own binary started with an argument that made it
//! wait. Starting it read the pages its loader and runtime touch through the daemon's own
//! FUSE server (about 3 MB of a 28 MB binary, 25 requests) at every daemon start, and kept
//! that binary mapped for the daemon's life. This one is one page: the kernel maps it, the
//! process makes one system call that sleeps until a signal, and makes it again.
//!
//! ```text
//! x86_64:   loop: mov eax, 34 (pause) ; syscall ; jmp loop
//! aarch64:  loop: x0..x3 = 0 ; x8 = 73 (ppoll: no fds, no timeout) ; svc #0 ; b loop
//! ```

/// Where the program is loaded (a fixed address: it has no data, takes no input and only
/// sleeps, so it has nothing to randomize).
const BASE: u64 = 0x40_0000;
/// The ELF header's size, and where the program headers start.
const EHDR: usize = 64;
/// One program header's size.
const PHDR: usize = 56;
/// Program headers: the one `PT_LOAD` of header and code, and `PT_GNU_STACK` (a stack that
/// is not executable).
const PHNUM: usize = 2;

/// The machine code of the wait loop for `target_arch`, and the ELF machine number.
fn wait_loop(target_arch: &str) -> Option<(u16, Vec<u8>)> {
    match target_arch {
        // b8 22 00 00 00: mov eax, 34 (__NR_pause); 0f 05: syscall; eb f7: jmp -9 (the mov).
        "x86_64" => Some((62, vec![0xb8, 0x22, 0x00, 0x00, 0x00, 0x0f, 0x05, 0xeb, 0xf7])),
        "aarch64" => {
            let words: [u32; 7] = [
                0xd280_0000, // mov x0, #0 (no fds)
                0xd280_0001, // mov x1, #0 (nfds)
                0xd280_0002, // mov x2, #0 (no timeout)
                0xd280_0003, // mov x3, #0 (no signal mask)
                0xd280_0928, // mov x8, #73 (__NR_ppoll)
                0xd400_0001, // svc #0
                0x17ff_fffa, // b -6 words (the first mov)
            ];
            Some((183, words.iter().flat_map(|w| w.to_le_bytes()).collect()))
        }
        _ => None,
    }
}

/// The anchor program for the architecture this crate was built for.
pub fn program() -> Vec<u8> {
    program_for(std::env::consts::ARCH).expect("pincer builds for x86_64 and aarch64 only (pincer-ebpf/build.rs)")
}

/// The anchor program for `target_arch` (`x86_64` or `aarch64`), `None` for another.
pub fn program_for(target_arch: &str) -> Option<Vec<u8>> {
    let (machine, code) = wait_loop(target_arch)?;
    let code_at = EHDR + PHNUM * PHDR;
    let len = (code_at + code.len()) as u64;
    let mut elf = Vec::with_capacity(code_at + code.len());
    // e_ident: magic, 64-bit, little-endian, version 1, System V ABI, padding.
    elf.extend_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    elf.extend_from_slice(&2u16.to_le_bytes()); // e_type: ET_EXEC
    elf.extend_from_slice(&machine.to_le_bytes()); // e_machine
    elf.extend_from_slice(&1u32.to_le_bytes()); // e_version
    elf.extend_from_slice(&(BASE + code_at as u64).to_le_bytes()); // e_entry
    elf.extend_from_slice(&(EHDR as u64).to_le_bytes()); // e_phoff
    elf.extend_from_slice(&0u64.to_le_bytes()); // e_shoff: no sections
    elf.extend_from_slice(&0u32.to_le_bytes()); // e_flags
    elf.extend_from_slice(&(EHDR as u16).to_le_bytes()); // e_ehsize
    elf.extend_from_slice(&(PHDR as u16).to_le_bytes()); // e_phentsize
    elf.extend_from_slice(&(PHNUM as u16).to_le_bytes()); // e_phnum
    elf.extend_from_slice(&[0; 6]); // e_shentsize, e_shnum, e_shstrndx
    // PT_LOAD, read + execute: the whole file at BASE.
    program_header(&mut elf, 1, 5, 0, BASE, len);
    // PT_GNU_STACK, read + write.
    program_header(&mut elf, 0x6474_e551, 6, 0, 0, 0);
    debug_assert_eq!(elf.len(), code_at);
    elf.extend_from_slice(&code);
    Some(elf)
}

fn program_header(elf: &mut Vec<u8>, p_type: u32, flags: u32, offset: u64, vaddr: u64, len: u64) {
    elf.extend_from_slice(&p_type.to_le_bytes());
    elf.extend_from_slice(&flags.to_le_bytes());
    elf.extend_from_slice(&offset.to_le_bytes());
    elf.extend_from_slice(&vaddr.to_le_bytes()); // p_vaddr
    elf.extend_from_slice(&vaddr.to_le_bytes()); // p_paddr
    elf.extend_from_slice(&len.to_le_bytes()); // p_filesz
    elf.extend_from_slice(&len.to_le_bytes()); // p_memsz
    elf.extend_from_slice(&(if p_type == 1 { 0x1000u64 } else { 0x10 }).to_le_bytes()); // p_align
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    /// Writes the program for `arch` to a temporary file, starts it (through `runner` if
    /// given, as `qemu-aarch64` runs another architecture's program), and checks that it is
    /// still there, asleep, after a while, that a signal it does not handle ends it, and
    /// that it never wrote or exited on its own.
    fn waits_until_killed(arch: &str, runner: Option<&str>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("anchor");
        std::fs::write(&path, program_for(arch).unwrap()).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut cmd = match runner {
            Some(r) => {
                let mut c = Command::new(r);
                c.arg(&path);
                c
            }
            None => Command::new(&path),
        };
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        // A program that faulted or returned would be gone well within this.
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(500) {
            assert!(child.try_wait().unwrap().is_none(), "the {arch} anchor ended on its own");
            std::thread::sleep(Duration::from_millis(20));
        }
        // SIGCHLD is ignored by default: the wait goes on (a signal that interrupts it and
        // is not fatal must not end the loop).
        // SAFETY: kill(2) of our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGCHLD) };
        std::thread::sleep(Duration::from_millis(100));
        assert!(child.try_wait().unwrap().is_none(), "the {arch} anchor ended on an ignored signal");
        child.kill().unwrap();
        let out = child.wait_with_output().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(libc::SIGKILL), "{arch}: {:?}", out.status);
        assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{arch}: it wrote {:?} {:?}", out.stdout, out.stderr);
    }

    #[test]
    fn the_anchor_of_this_machine_waits_until_killed() {
        waits_until_killed(std::env::consts::ARCH, None);
    }

    /// The other architecture's program, under QEMU's user-mode emulator (Debian's
    /// `qemu-user`, which `cargo xtask deps` installs).
    #[test]
    fn the_anchor_of_the_other_architecture_waits_until_killed() {
        let (arch, runner) = match std::env::consts::ARCH {
            "x86_64" => ("aarch64", "qemu-aarch64"),
            _ => ("x86_64", "qemu-x86_64"),
        };
        waits_until_killed(arch, Some(runner));
    }

    #[test]
    fn is_one_small_page_with_a_stack_that_is_not_executable() {
        for arch in ["x86_64", "aarch64"] {
            let elf = program_for(arch).unwrap();
            assert!(elf.len() < 4096, "{arch}: {} bytes", elf.len());
            let ph = |i: usize, at: usize| u32::from_le_bytes(elf[EHDR + i * PHDR + at..EHDR + i * PHDR + at + 4].try_into().unwrap());
            assert_eq!((ph(1, 0), ph(1, 4)), (0x6474_e551, 6), "{arch}: PT_GNU_STACK, read + write");
        }
        assert!(program_for("riscv64").is_none());
    }
}
