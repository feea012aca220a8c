//! Calls to kernel functions (kfuncs) in the BPF object.
//!
//! The held `file_open` (see [`super::hold`]) calls seven kfuncs. The object names them as
//! plain externs; the loader writes each call's target here, as libbpf does: the
//! instruction becomes a `BPF_PSEUDO_KFUNC_CALL` whose immediate is the function's id in
//! the running kernel's BTF. A kfunc the kernel lacks gets id 0, so the verifier refuses
//! the program that calls it and the loader attaches the plain variant of its hook.

use aya::Btf;
use aya_obj::btf::BtfKind;
use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget};

/// The kfuncs the object calls, and the kernel that has each one.
pub const KFUNCS: [(&str, &str); 7] = [
    ("bpf_rcu_read_lock", "6.2"),
    ("bpf_rcu_read_unlock", "6.2"),
    ("bpf_task_from_pid", "6.1"),
    ("bpf_task_release", "6.1"),
    ("bpf_get_task_exe_file", "6.12"),
    ("bpf_put_file", "6.12"),
    ("bpf_get_file_xattr", "6.8"),
];

/// The kfunc that reads the cache's stamps without a helper call (Linux 6.2): where the
/// kernel lacks it, its call gets id 0 and the object's `HAVE_RDONLY_CAST` stays 0, so the
/// verifier removes the call as dead code and every program loads as before.
pub const RDONLY_CAST: &str = "bpf_rdonly_cast";

/// Whether the loader resolves calls to `name`: the hold's kfuncs and [`RDONLY_CAST`].
fn resolved(name: &str) -> bool {
    name == RDONLY_CAST || KFUNCS.iter().any(|(k, _)| *k == name)
}

/// Whether `btf` (the running kernel's) has [`RDONLY_CAST`].
pub fn has_rdonly_cast(btf: &Btf) -> bool {
    btf.id_by_type_name_kind(RDONLY_CAST, BtfKind::Func).is_ok()
}

/// `BPF_PSEUDO_KFUNC_CALL`: the call's immediate is a BTF id of a kernel function.
const BPF_PSEUDO_KFUNC_CALL: u8 = 2;
/// `BPF_JMP | BPF_CALL`.
const CALL_OPCODE: u8 = 0x85;

/// Why the object's kfunc calls could not be written.
#[derive(Debug, thiserror::Error)]
pub enum KfuncError {
    /// The object is not an ELF file this code can read.
    #[error("the BPF object cannot be parsed: {0}")]
    Parse(#[from] object::Error),
    /// The object's BTF could not be read.
    #[error("the BPF object's BTF cannot be read: {0}")]
    Btf(String),
    /// A relocation names a kfunc but does not sit on a call instruction.
    #[error("the relocation of {name} at byte {offset} of section {section} is not on a call instruction")]
    NotACall {
        /// The kfunc.
        name: String,
        /// The program section.
        section: String,
        /// Offset of the instruction in the section.
        offset: u64,
    },
}

/// The kfuncs of [`KFUNCS`] that `btf` (the running kernel's) does not have.
pub fn missing(btf: &Btf) -> Vec<&'static str> {
    KFUNCS.iter().map(|(name, _)| *name).filter(|name| btf.id_by_type_name_kind(name, BtfKind::Func).is_err()).collect()
}

/// `elf` with every call to a kfunc of [`KFUNCS`] (and to [`RDONLY_CAST`]) pointed at the function's BTF id as
/// `id_of` gives it (0 when it gives none: the verifier then refuses the program).
pub fn resolve(elf: &[u8], id_of: impl Fn(&str) -> Option<u32>) -> Result<Vec<u8>, KfuncError> {
    let file = object::File::parse(elf)?;
    let mut out = elf.to_vec();
    for section in file.sections() {
        let Some((start, size)) = section.file_range() else { continue };
        for (offset, reloc) in section.relocations() {
            let RelocationTarget::Symbol(index) = reloc.target() else { continue };
            let Ok(symbol) = file.symbol_by_index(index) else { continue };
            let Ok(name) = symbol.name() else { continue };
            if !symbol.is_undefined() || !resolved(name) {
                continue;
            }
            let at = usize::try_from(start + offset).unwrap_or(usize::MAX);
            if offset + 8 > size || at.checked_add(8).is_none_or(|end| end > out.len()) || out[at] != CALL_OPCODE {
                let section = section.name().unwrap_or("?").to_string();
                return Err(KfuncError::NotACall { name: name.to_string(), section, offset });
            }
            let id = id_of(name).unwrap_or(0);
            out[at + 1] = BPF_PSEUDO_KFUNC_CALL << 4; // src_reg = kfunc call, dst_reg = 0
            out[at + 2..at + 4].copy_from_slice(&0i16.to_le_bytes()); // in vmlinux, not a module
            out[at + 4..at + 8].copy_from_slice(&id.to_le_bytes());
        }
    }
    if let Some(btf) = file.section_by_name(".BTF") {
        if let Some((start, size)) = btf.file_range() {
            let (start, end) = (start as usize, (start + size) as usize);
            if end <= out.len() {
                extern_funcs_static(&mut out[start..end])?;
            }
        }
    }
    Ok(out)
}

/// Gives the object's BTF declarations of the kfuncs static linkage: the compiler marks
/// them extern, which the kernel's BTF loader refuses ("Invalid func linkage"); libbpf
/// does the same. Only the kfuncs' own `FUNC` entries change.
fn extern_funcs_static(btf: &mut [u8]) -> Result<(), KfuncError> {
    const KIND_FUNC: u32 = 12;
    const LINKAGE_EXTERN: u32 = 2;
    let bad = |problem: &str| KfuncError::Btf(problem.to_string());
    let u32_at = |b: &[u8], at: usize| b.get(at..at + 4).map(|v| u32::from_le_bytes(v.try_into().expect("4 bytes")));
    if btf.get(0..2) != Some(&0xeb9fu16.to_le_bytes()[..]) {
        return Err(bad("not little-endian BTF"));
    }
    let hdr_len = u32_at(btf, 4).ok_or_else(|| bad("short header"))? as usize;
    let type_off = u32_at(btf, 8).ok_or_else(|| bad("short header"))? as usize;
    let type_len = u32_at(btf, 12).ok_or_else(|| bad("short header"))? as usize;
    let str_off = u32_at(btf, 16).ok_or_else(|| bad("short header"))? as usize;
    let str_len = u32_at(btf, 20).ok_or_else(|| bad("short header"))? as usize;
    let types = hdr_len + type_off;
    let strings = hdr_len + str_off;
    if types + type_len > btf.len() || strings + str_len > btf.len() {
        return Err(bad("sections run past the end"));
    }
    let name = |b: &[u8], off: usize| -> Option<String> {
        let s = b.get(strings + off..strings + str_len)?;
        let end = s.iter().position(|c| *c == 0)?;
        Some(String::from_utf8_lossy(&s[..end]).into_owned())
    };
    let mut at = types;
    while at < types + type_len {
        let name_off = u32_at(btf, at).ok_or_else(|| bad("truncated type"))? as usize;
        let info = u32_at(btf, at + 4).ok_or_else(|| bad("truncated type"))?;
        let (kind, vlen) = ((info >> 24) & 0x1f, (info & 0xffff) as usize);
        if kind == KIND_FUNC && vlen as u32 == LINKAGE_EXTERN && name(btf, name_off).is_some_and(|n| resolved(&n)) {
            btf[at + 4..at + 8].copy_from_slice(&(info & !0xffff).to_le_bytes());
        }
        let extra = match kind {
            1 | 14 | 17 => 4,  // INT, VAR, DECL_TAG
            3 => 12,           // ARRAY
            4 | 5 => vlen * 12, // STRUCT, UNION
            6 | 13 => vlen * 8, // ENUM, FUNC_PROTO
            15 | 19 => vlen * 12, // DATASEC, ENUM64
            2 | 7..=12 | 16 | 18 => 0,
            _ => return Err(bad(&format!("unknown type kind {kind}"))),
        };
        at += 12 + extra;
    }
    Ok(())
}

/// [`resolve`] against the running kernel's BTF.
pub fn resolve_for(elf: &[u8], btf: &Btf) -> Result<Vec<u8>, KfuncError> {
    resolve(elf, |name| btf.id_by_type_name_kind(name, BtfKind::Func).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kfunc calls of `elf`: (name, src_reg byte, immediate).
    fn calls(elf: &[u8]) -> Vec<(String, u8, u32)> {
        let file = object::File::parse(elf).unwrap();
        let mut found = Vec::new();
        for section in file.sections() {
            let Some((start, _)) = section.file_range() else { continue };
            for (offset, reloc) in section.relocations() {
                let RelocationTarget::Symbol(index) = reloc.target() else { continue };
                let symbol = file.symbol_by_index(index).unwrap();
                let name = symbol.name().unwrap();
                if symbol.is_undefined() && resolved(name) {
                    let at = (start + offset) as usize;
                    found.push((name.to_string(), elf[at + 1], u32::from_le_bytes(elf[at + 4..at + 8].try_into().unwrap())));
                }
            }
        }
        found
    }

    /// Every call to a kfunc in the shipped object is rewritten to its id, and only those
    /// bytes change.
    #[test]
    fn every_kfunc_call_of_the_object_gets_its_id() {
        let elf = pincer_ebpf::PINCER_BPF;
        let id = |name: &str| {
            KFUNCS.iter().position(|(k, _)| *k == name).map(|i| 1000 + i as u32).or((name == RDONLY_CAST).then_some(999))
        };
        let out = resolve(elf, id).expect("the object's kfunc calls resolve");
        assert_eq!(out.len(), elf.len());
        let found = calls(&out);
        for (name, _) in KFUNCS {
            assert!(found.iter().any(|(n, _, _)| n == name), "the held file_open calls {name}");
        }
        assert!(found.iter().any(|(n, _, _)| n == RDONLY_CAST), "the stamps are read through {RDONLY_CAST}");
        for (name, regs, imm) in &found {
            assert_eq!(*regs, BPF_PSEUDO_KFUNC_CALL << 4, "{name}");
            assert_eq!(Some(*imm), id(name), "{name}");
        }
        let changed = (0..elf.len()).filter(|&i| elf[i] != out[i]).count();
        assert!(changed <= found.len() * 7, "only the calls' register and immediate bytes change ({changed})");
        // A kernel without them: the calls point at id 0, which the verifier refuses.
        assert!(calls(&resolve(elf, |_| None).unwrap()).iter().all(|(_, r, imm)| *r == 0x20 && *imm == 0));
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert!(matches!(resolve(b"not an elf", |_| None), Err(KfuncError::Parse(_))));
        assert!(resolve(&[0x7f, b'E', b'L', b'F', 2, 1, 1], |_| None).is_err());
    }
}
