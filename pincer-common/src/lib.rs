//! `#[repr(C)]` layouts shared with the BPF LSM program in `pincer-ebpf`.
//!
//! This crate is the single source of truth for everything that crosses the
//! kernel/userspace boundary: map keys and values, access bits and the miss
//! event record. The constants and map names are written only here: the build
//! script of `pincer-ebpf` writes them into a generated C header. The structs are
//! written twice (Rust here, C in `pincer-ebpf/src/pincer.h`), and the same build
//! script generates a `_Static_assert` for the size of every shared struct and the
//! offset and size of every field from [`LAYOUTS`], so any drift fails the C
//! compile. No `bool`, no enums and no implicit padding (checked here): every hole
//! is an explicit `_pad` field.
//!
//! Device numbers are the kernel's *internal* `dev_t` (`super_block.s_dev`,
//! `major << 20 | minor`), not the userspace `st_dev` encoding: use
//! [`kernel_dev`] to convert.
#![no_std]
#![warn(missing_docs)]

/// Declares the shared constants once, as Rust `const`s, and lists them in
/// a `C_CONSTANTS` table of the module it is used in ([`C_CONSTANTS`],
/// [`reach::C_CONSTANTS`]) so that `pincer-ebpf`'s build script writes the same values
/// into the C header it generates (`pincer_gen.h`).
macro_rules! shared_consts {
    ($($(#[$m:meta])* $name:ident : $t:ty = $v:expr;)*) => {
        $($(#[$m])* pub const $name: $t = $v;)*
        /// Every constant shared with the C program, by its C (and Rust) name.
        pub const C_CONSTANTS: &[(&str, u64)] = &[$((stringify!($name), $name as u64),)*];
    };
}

shared_consts! {
    /// Access bit: open a file for reading (exec counts as read).
    ACCESS_READ: u32 = 1 << 0;
    /// Access bit: open a file for writing, truncate it, or change its metadata
    /// (mode, owner, times, xattrs).
    ACCESS_WRITE: u32 = 1 << 1;
    /// Access bit: create an entry (file, directory, symlink, hard link, FIFO,
    /// device node, socket) in a directory.
    ACCESS_CREATE: u32 = 1 << 2;
    /// Access bit: unlink a file, remove a directory, or rename an entry away.
    ACCESS_DELETE: u32 = 1 << 3;
    /// Access bit: read a directory's entries (open a directory for reading).
    ACCESS_LIST: u32 = 1 << 4;
    /// Marker bit set by the kernel on exact grants it recorded for an object the
    /// session created itself under a `create` grant (it carries read and write).
    ACCESS_CREATED_BY_SESSION: u32 = 1 << 31;
    /// Marker bit on a session's exact grant of a directory: the session was given
    /// `create` there for single names, each an entry of [`map_names::CREATE_NAMES`]. A
    /// grant given for `notes.md` makes `notes.md` only, not `Cargo.toml`, `go.work` or
    /// `.envrc` beside it. The marker goes with the directory's grants when its inode is
    /// freed, so a later directory that reuses the number takes none of the names.
    ACCESS_NAMED_CREATE: u32 = 1 << 29;
    /// Bytes of [`CreateNameKey::name`]: a name up to `NAME_MAX` (255) and its NUL.
    CREATE_NAME_LEN: usize = 256;
    /// Entries one session may hold in [`map_names::VACATED`] (of its 32,768): past them
    /// the session's removal or move of a folder of the user's is refused, and no session
    /// fills the map for the others.
    VACATED_PER_SESSION: u32 = 4096;
    /// Marker bit set by the kernel, beside [`ACCESS_CREATED_BY_SESSION`], on the exact
    /// grant of a directory the session made where a folder of the user's stood (a name
    /// in [`map_names::VACATED`]) or beneath the user's place: the user's place, whoever
    /// remade it, so hidden names in it need a grant as in any folder of the user's.
    ACCESS_USERS_PLACE: u32 = 1 << 30;
    /// Marker bit set by the kernel on the exact grant of a new folder of the session's
    /// (one with [`ACCESS_CREATED_BY_SESSION`] and not [`ACCESS_USERS_PLACE`]) once the
    /// session made a hidden entry in it (`.cargo/`, `.envrc`): the user's objects do not
    /// move beneath it, where the user's tools would read that configuration as theirs.
    ACCESS_HOLDS_HIDDEN: u32 = 1 << 28;
    /// Marker bit the daemon writes on a session's exact entry of a folder an earlier
    /// session of the same owner made at a new name (carried from the owner's kept
    /// entries): it moves as the session's own new folder does (not to a name where a
    /// folder of the user's stood, nor beneath the user's place, and no object of the
    /// user's moves beneath it while it holds hidden entries a session made), and it
    /// takes no hidden name freely: for this session it is the user's folder otherwise.
    ACCESS_MADE_EARLIER: u32 = 1 << 27;

    /// Hook id in [`MissEvent::hook`]: `file_open`.
    HOOK_FILE_OPEN: u32 = 1;
    /// Hook id: `inode_create`.
    HOOK_INODE_CREATE: u32 = 2;
    /// Hook id: `inode_mkdir`.
    HOOK_INODE_MKDIR: u32 = 3;
    /// Hook id: `inode_symlink`.
    HOOK_INODE_SYMLINK: u32 = 4;
    /// Hook id: `inode_link` (the new name's directory lacks `create`).
    HOOK_INODE_LINK: u32 = 5;
    /// Hook id: `inode_link` (the linked object lacks `read`).
    HOOK_INODE_LINK_SOURCE: u32 = 6;
    /// Hook id: `inode_unlink`.
    HOOK_INODE_UNLINK: u32 = 7;
    /// Hook id: `inode_rmdir`.
    HOOK_INODE_RMDIR: u32 = 8;
    /// Hook id: `inode_rename` (the moved object lacks `delete`).
    HOOK_INODE_RENAME_FROM: u32 = 9;
    /// Hook id: `inode_rename` (the new directory lacks `create`).
    HOOK_INODE_RENAME_TO: u32 = 10;
    /// Hook id: `inode_rename` (an existing target that would be replaced lacks `delete`).
    HOOK_INODE_RENAME_OVER: u32 = 11;
    /// Hook id: `inode_setattr`: size (truncate), mode, owner or times.
    HOOK_INODE_SETATTR: u32 = 12;
    /// Hook id: `inode_setxattr` (setting an extended attribute needs `write`).
    HOOK_INODE_SETXATTR: u32 = 13;
    /// Hook id: `inode_removexattr` (removing an extended attribute needs `write`).
    HOOK_INODE_REMOVEXATTR: u32 = 14;
    /// Hook id: `inode_set_acl` (Linux 6.2+: POSIX ACLs no longer pass `inode_setxattr`).
    HOOK_INODE_SET_ACL: u32 = 15;
    /// Hook id: `inode_remove_acl` (Linux 6.2+).
    HOOK_INODE_REMOVE_ACL: u32 = 16;
    /// Hook id: `inode_mknod` (FIFOs, device nodes and Unix socket binds need `create`).
    HOOK_INODE_MKNOD: u32 = 17;
    /// Hook id: `file_receive` (an fd arriving by `SCM_RIGHTS` or `pidfd_getfd`,
    /// checked like an open with the file's mode).
    HOOK_FILE_RECEIVE: u32 = 18;
    /// Hook id: `file_ioctl` (terminal injection: `TIOCSTI`, `TIOCLINUX`, never allowed;
    /// inode flag changes, `FS_IOC_SETFLAGS` and `FS_IOC_FSSETXATTR`, need `write`).
    HOOK_FILE_IOCTL: u32 = 19;
    /// Hook id: `userns_create` (a new user namespace without `SESSION_FLAG_ALLOW_USERNS`).
    HOOK_USERNS_CREATE: u32 = 20;
    /// Hook id: `path_notify` (an inotify, fanotify or dnotify watch needs `read`,
    /// or `list` on a directory).
    HOOK_PATH_NOTIFY: u32 = 21;
    /// Hook id: `inode_getattr` (`stat`, `statx` of a never-grantable object).
    HOOK_INODE_GETATTR: u32 = 22;
    /// Hook id: `inode_getxattr` (an extended attribute of a never-grantable object).
    HOOK_INODE_GETXATTR: u32 = 23;
    /// Hook id: `inode_listxattr` (the extended attribute names of a never-grantable object).
    HOOK_INODE_LISTXATTR: u32 = 24;
    /// Hook id: `inode_readlink` (the target of a never-grantable symlink).
    HOOK_INODE_READLINK: u32 = 25;
    /// Hook id: `file_lock` (a lock or lease taken through a descriptor not open for
    /// writing needs `write`).
    HOOK_FILE_LOCK: u32 = 26;

    /// Event flag: the walk up the dentries ran out of its bound before it found
    /// a protected root or the filesystem root, so the access was denied.
    EVENT_FLAG_WALK_EXHAUSTED: u32 = 1 << 0;
    /// Event flag: [`MissEvent::path`] was cut short (more components than fit).
    EVENT_FLAG_PATH_TRUNCATED: u32 = 1 << 1;
    /// Event flag: the object has several hard links, so only an exact grant
    /// (not a subtree grant) could have allowed it.
    EVENT_FLAG_MULTI_LINK: u32 = 1 << 2;
    /// Event flag: denied because the object (or a directory above it, or its
    /// name in its directory) is never-grantable for these access bits: no
    /// grant, open path, created-by-session bit or shadow mode can allow it.
    EVENT_FLAG_NEVER: u32 = 1 << 3;
    /// Event flag: the session is in shadow mode, so this miss was reported but
    /// allowed.
    EVENT_FLAG_SHADOW: u32 = 1 << 4;
    /// Never map value bit: the object itself cannot be removed or renamed in a
    /// session (an existing ancestor of a never-grantable place: moving it away
    /// would let a session rebuild the path to the place in a directory of its
    /// own). It covers nothing below the object.
    NEVER_PINNED: u32 = 1 << 16;
    /// Never map value bit: the object is what a hidden entry of the user's names
    /// (the target of a hidden symlink: `~/.gdbinit -> ~/dots/gdbinit`, a project's
    /// `.cargo -> ../shared-cargo`). The walk treats it as a hidden entry: a grant
    /// above it does not reach it or anything inside it, a grant on it or inside it
    /// does. It refuses nothing by itself.
    NEVER_HIDDEN: u32 = 1 << 17;
    /// Never-name value bit: the name is reserved in its directory, as the first
    /// missing directory on the way to a never-grantable place (`~/.config` while
    /// `~/.config/autostart/**` is a never place and `~/.config` does not exist).
    /// It acts at the entry's own level only: nothing may be created under the name
    /// (file, link, node, rename onto it) except a directory by `mkdir` where a carry
    /// ([`map_names::NEVER_CARRY`]) is recorded for the name: the kernel then gives
    /// the new directory the names the template holds (the places below it) and
    /// marks it [`NEVER_DIR_CARRIED`]. Under a directory of that name that was not so
    /// made, the name refuses `create` (as if the never place were there).
    NEVER_RESERVED: u32 = 1 << 18;
    /// [`map_names::NEVER_DIRS`] value bit: the kernel gave this directory the names
    /// of its reserved name's template when it was made (the low bits still count
    /// the names userspace put there).
    NEVER_DIR_CARRIED: u32 = 1 << 31;
    /// Event flag: the object (for a creation, its directory) belongs to the
    /// session's uid and lies outside every protected root: it is gated by its
    /// owner, so the walk named no root.
    EVENT_FLAG_OWNED: u32 = 1 << 5;
    /// Event flag: the access is held: the worker's syscall waits until the
    /// daemon answers the hold (on the hold anchor's FUSE file), then the
    /// kernel looks for an exact grant on the object again.
    EVENT_FLAG_HELD: u32 = 1 << 6;
    /// Event flag: the object, or a folder on the way to the grant that would have
    /// covered it, is kept more private than the folder it is in (its mode gives its
    /// group and others nothing, the folder's gives them something): a grant on a
    /// folder above it does not reach it; only a grant on it or inside it does.
    EVENT_FLAG_KEPT_PRIVATE: u32 = 1 << 7;

    /// Session flag ([`SessionValue::flags`]): misses are reported but allowed,
    /// except never-grantable ones and terminal injection.
    SESSION_FLAG_SHADOW: u32 = 1 << 0;
    /// Session flag: the session may create user namespaces.
    SESSION_FLAG_ALLOW_USERNS: u32 = 1 << 1;

    /// How many steps the kernel walk takes at most (object included; a step
    /// from a filesystem's root to its mount point counts as one).
    MAX_WALK_DEPTH: u32 = 32;
    /// How many cgroup ancestor levels are checked for a registered session.
    MAX_CGROUP_LEVELS: u32 = 16;
    /// [`State::session_levels`] when a session's level is not known: every
    /// level is looked up.
    SESSION_LEVELS_ALL: u32 = 0xffff_ffff;
    /// [`map_names::HOLD`] slot: the hold anchor's thread-group id (0: no hold).
    HOLD_SLOT_ANCHOR: u32 = 0;
    /// [`map_names::HOLD`] slot: 1 when the loader attached the held `file_open`.
    HOLD_SLOT_HELD_ATTACHED: u32 = 1;
    /// [`map_names::HOLD`] slot: where the held thread's xattr read lands (never read).
    HOLD_SLOT_SCRATCH: u32 = 2;
    /// [`map_names::HOLD`] slot: how many threads of one session may wait in a hold at
    /// once; a miss beyond it is denied at once (0: no hold).
    HOLD_SLOT_PER_SESSION: u32 = 3;
    /// Entries of [`map_names::HOLD`].
    HOLD_SLOTS: u32 = 4;
    /// After a hold whose hook keeps a lock ends denied, the session's next such misses are
    /// denied at once, not held, for this many times its wait ([`SessionValue::locked_quiet_until`]),
    /// at least [`LOCKED_QUIET_MIN_MS`] and at most [`LOCKED_QUIET_MAX_MS`].
    LOCKED_QUIET_FACTOR: u32 = 10;
    /// The shortest quiet time after a denied hold whose hook keeps a lock (ms).
    LOCKED_QUIET_MIN_MS: u32 = 1000;
    /// The longest quiet time after a denied hold whose hook keeps a lock (ms).
    LOCKED_QUIET_MAX_MS: u32 = 60000;
    /// How many threads may wait in a hold at once, over every session (the
    /// size of [`map_names::HELD`]); a miss beyond it is denied at once.
    HOLD_MAX: u32 = 4096;
    /// [`MissEvent::record`]: a file access denied (`pincer.bpf.c`). Every record of the
    /// ring buffer starts with its kind, so the reader tells them apart before it reads on.
    EVENT_RECORD_MISS: u32 = 1;
    /// [`ReachEvent::record`](reach::ReachEvent::record): a reach denial (`reach.bpf.c`).
    EVENT_RECORD_REACH: u32 = 2;
    /// Bytes of [`MissEvent::name`] and [`ReachEvent::name`](reach::ReachEvent::name).
    EVENT_NAME_LEN: usize = 256;
    /// Bytes of [`MissEvent::path`].
    EVENT_PATH_LEN: usize = 1024;
    /// Bytes of [`NameKey::name`]: never-grantable names are shorter than this.
    NEVER_NAME_LEN: usize = 64;
    /// [`NameKey::dev`] of a never pattern's name entry: the entry `name` in any
    /// directory (a `**/` rule, matched on the name the access reaches, at access
    /// time). Its value packs [`NEVER_PATTERN_BITS`] (never bits of the entry and
    /// everything beneath it), the name's own word id ([`NEVER_PATTERN_WORD_SHIFT`]:
    /// it is a directory that pair entries name) and the words of the directories
    /// whose pair entries name it ([`NEVER_PATTERN_MASK_SHIFT`], bit `W - 1` for word
    /// `W`). `ino` is 0.
    NEVER_PATTERN_DEV: u32 = u32::MAX;
    /// [`NameKey::dev`] of a never pattern's pair entry: the entry `name` in any
    /// directory whose name has word id `ino` (`**/.git/hooks`); its value is never
    /// bits.
    NEVER_PAIR_DEV: u32 = u32::MAX - 1;
    /// [`NameKey::dev`] of a template's name entry: the entry `name` of the directory
    /// that a `mkdir` of a reserved name ([`NEVER_RESERVED`]) makes, where `ino` is the
    /// template's id; its value is what the name's entry in the new directory gets.
    NEVER_CARRY_DEV: u32 = u32::MAX - 2;
    /// Bits of a name entry's value that are never bits (and [`NEVER_PATTERN_PINNED`]).
    NEVER_PATTERN_BITS: u32 = 0xff;
    /// Name entry value bit: an entry so named (a directory word such as `.git`) may not
    /// itself be removed or renamed, so a session cannot move it away, fill the place
    /// under another name and move it back. Nothing beneath it is pinned.
    NEVER_PATTERN_PINNED: u32 = 1 << 7;
    /// Shift of a name entry's word id (1 to [`NEVER_PATTERN_WORDS`]; 0: none).
    NEVER_PATTERN_WORD_SHIFT: u32 = 8;
    /// Shift of a name entry's mask of directory words.
    NEVER_PATTERN_MASK_SHIFT: u32 = 16;
    /// Directory words never patterns may use.
    NEVER_PATTERN_WORDS: u32 = 16;
}

/// Every access bit a grant may carry.
pub const ACCESS_ALL: u32 = ACCESS_READ | ACCESS_WRITE | ACCESS_CREATE | ACCESS_DELETE | ACCESS_LIST;

/// Map names, written once: the C program names its maps with the macros
/// (`MAP_SESSIONS`, ...) that `pincer-ebpf`'s build script generates from
/// [`map_names::C_MACROS`].
pub mod map_names {
    /// `HASH` [`SessionKey`](super::SessionKey) → [`SessionValue`](super::SessionValue).
    pub const SESSIONS: &str = "pincer_sessions";
    /// `HASH` [`ObjectKey`](super::ObjectKey) → `u32` (non-zero): protected roots.
    pub const ROOTS: &str = "pincer_roots";
    /// `HASH` [`GrantKey`](super::GrantKey) → `u32` access bits (exact object).
    pub const EXACT: &str = "pincer_exact";
    /// `HASH` [`GrantKey`](super::GrantKey) → `u32` access bits (directory subtree).
    pub const SUBTREE: &str = "pincer_subtree";
    /// `HASH` [`ObjectKey`](super::ObjectKey) → `u32` access bits granted to every
    /// session on the object and (for a directory) everything beneath it.
    pub const OPEN: &str = "pincer_open";
    /// `HASH` [`ObjectKey`](super::ObjectKey) → `u32` access bits no session may
    /// ever have on the object and everything beneath it.
    pub const NEVER: &str = "pincer_never";
    /// `HASH` [`NameKey`](super::NameKey) → `u32` access bits no session may ever
    /// have on the entry of that name in that directory (existing or not yet).
    pub const NEVER_NAMES: &str = "pincer_never_names";
    /// `ARRAY` of one [`State`](super::State).
    pub const STATE: &str = "pincer_state";
    /// `HASH` [`ObjectKey`](super::ObjectKey) → `u32` (non-zero: how many names):
    /// the directories that hold never-grantable names, so the walk reads an
    /// entry's name only where a name can match.
    pub const NEVER_DIRS: &str = "pincer_never_dirs";
    /// `ARRAY` of one [`Generation`](super::Generation): what the kernel's walk
    /// cache is checked against.
    pub const GENERATION: &str = "pincer_generation";
    /// `INODE_STORAGE` of the kernel's walk cache (read and written only by the
    /// program: what the walk from a directory, or a file's own entries, gave).
    pub const WALK_CACHE: &str = "pincer_walk_cache";
    /// `RINGBUF` of [`MissEvent`](super::MissEvent).
    pub const EVENTS: &str = "pincer_events";
    /// `PERCPU_ARRAY` of one `u64`: events dropped because the ring buffer was full.
    pub const DROPS: &str = "pincer_drops";
    /// `ARRAY` of `HOLD_SLOTS` `u32`: the thread-group id of the hold anchor, a
    /// process whose executable lies on the daemon's FUSE mount (0: misses are
    /// not held), and whether the held `file_open` is attached.
    pub const HOLD: &str = "pincer_hold";
    /// `HASH` `u32` thread id → `u32` hold id: the threads waiting in a hold.
    pub const HELD: &str = "pincer_held";
    /// `HASH` [`NameKey`](super::NameKey) → `u64` template id: the reserved names
    /// ([`NEVER_RESERVED`](super::NEVER_RESERVED)) a `mkdir` may make, and the template
    /// ([`NEVER_CARRY_DEV`](super::NEVER_CARRY_DEV) entries of the never names, and of
    /// this map) whose names the new directory gets.
    pub const NEVER_CARRY: &str = "pincer_never_carry";
    /// `HASH` [`VacatedKey`](super::VacatedKey) → `u64`, the inode number of what left:
    /// the names where a directory or symlink of the user's stood until the session
    /// removed or moved it away; under the empty name, a directory of the user's moved to
    /// such a name (the user's place, value `u64::MAX`). Written by the kernel only; a
    /// session's entries go with its grants.
    pub const VACATED: &str = "pincer_vacated";
    /// `HASH` [`CreateNameKey`](super::CreateNameKey) → `u32` (1): the single names a
    /// session may create in a directory whose exact grant carries
    /// [`ACCESS_NAMED_CREATE`](super::ACCESS_NAMED_CREATE) (what the daemon inserts when
    /// the twin allows a new entry there). Written by userspace only; a session's
    /// entries go with its grants.
    pub const CREATE_NAMES: &str = "pincer_create_names";
    /// `TASK_STORAGE` of one [`CreateNameKey`](super::CreateNameKey) per task: where the
    /// program builds a named-create key (read and written only by the program; the key
    /// does not fit on its stack beside the walk).
    pub const CREATE_KEY: &str = "pincer_create_key";
    /// `INODE_STORAGE` of the never patterns' cache (read and written only by the
    /// program: per directory and session, what the patterns match from it to the top).
    pub const PATTERN_CACHE: &str = "pincer_pattern_cache";
    /// Every map, in a fixed order.
    pub const ALL: [&str; 20] = [
        SESSIONS, ROOTS, EXACT, SUBTREE, OPEN, NEVER, NEVER_NAMES, NEVER_DIRS, STATE, GENERATION, WALK_CACHE, EVENTS, DROPS,
        HOLD, HELD, NEVER_CARRY, VACATED, CREATE_NAMES, CREATE_KEY, PATTERN_CACHE,
    ];
    /// The C macro naming each map (`#define MAP_SESSIONS pincer_sessions`).
    pub const C_MACROS: [(&str, &str); 20] = [
        ("MAP_SESSIONS", SESSIONS),
        ("MAP_ROOTS", ROOTS),
        ("MAP_EXACT", EXACT),
        ("MAP_SUBTREE", SUBTREE),
        ("MAP_OPEN", OPEN),
        ("MAP_NEVER", NEVER),
        ("MAP_NEVER_NAMES", NEVER_NAMES),
        ("MAP_NEVER_DIRS", NEVER_DIRS),
        ("MAP_STATE", STATE),
        ("MAP_GENERATION", GENERATION),
        ("MAP_WALK_CACHE", WALK_CACHE),
        ("MAP_EVENTS", EVENTS),
        ("MAP_DROPS", DROPS),
        ("MAP_HOLD", HOLD),
        ("MAP_HELD", HELD),
        ("MAP_NEVER_CARRY", NEVER_CARRY),
        ("MAP_VACATED", VACATED),
        ("MAP_CREATE_NAMES", CREATE_NAMES),
        ("MAP_CREATE_KEY", CREATE_KEY),
        ("MAP_PATTERN_CACHE", PATTERN_CACHE),
    ];
}

/// Converts a userspace `(major, minor)` device pair to the kernel's internal
/// `dev_t` that the BPF program sees in `super_block.s_dev`.
pub const fn kernel_dev(major: u32, minor: u32) -> u32 {
    (major << 20) | (minor & 0xfffff)
}

/// One field of a layout shared with C.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The field's name (the same in Rust and C).
    pub name: &'static str,
    /// Byte offset in the struct.
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
}

/// A `repr(C)` type shared with the C program: the C struct it must match
/// byte for byte, its size and every field (taken from the Rust definition
/// itself, so none can be left out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Name of the C struct in `pincer.h`.
    pub c_name: &'static str,
    /// `size_of` the Rust type.
    pub size: usize,
    /// Every field, in declaration order.
    pub fields: &'static [Field],
}

/// Defines a `repr(C)` struct shared with C and its [`Layout`] (`T::LAYOUT`).
macro_rules! shared_struct {
    ($(#[$m:meta])* pub struct $name:ident as $c:literal { $($(#[$fm:meta])* pub $f:ident : $t:ty,)* }) => {
        $(#[$m])*
        #[repr(C)]
        pub struct $name { $($(#[$fm])* pub $f: $t,)* }
        impl $name {
            /// The layout the C struct of the same role must have (checked when
            /// `pincer-ebpf` compiles the program).
            pub const LAYOUT: Layout = Layout {
                c_name: $c,
                size: core::mem::size_of::<$name>(),
                fields: &[$(Field {
                    name: stringify!($f),
                    offset: core::mem::offset_of!($name, $f),
                    size: core::mem::size_of::<$t>(),
                },)*],
            };
        }
    };
}

pub mod reach;

shared_struct! {
    /// Key of the session map: a cgroup v2 id (the cgroup directory's inode number).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct SessionKey as "session_key" {
        /// The cgroup id.
        pub cgroup_id: u64,
    }
}

shared_struct! {
    /// Value of the session map.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct SessionValue as "session_value" {
        /// Non-zero while the session is active.
        pub active: u32,
        /// `SESSION_FLAG_*` bits.
        pub flags: u32,
        /// The session's threads waiting in a hold, counted by the kernel (bounded by the
        /// [`HOLD_SLOT_PER_SESSION`] slot); kept when the daemon rewrites the entry.
        pub held: u32,
        /// Of those, the threads whose hook keeps a folder or the object locked (at most
        /// one per session), counted by the kernel; kept when the daemon rewrites the entry.
        pub held_locked: u32,
        /// Until when (`bpf_ktime_get_ns`) a miss whose hook keeps a lock is not held but
        /// denied at once: set by the kernel when such a hold ends denied, to
        /// [`LOCKED_QUIET_FACTOR`] times its wait (1 s to 60 s); kept when the daemon rewrites
        /// the entry.
        pub locked_quiet_until: u64,
        /// The entries the kernel wrote for the session in [`map_names::VACATED`], counted by
        /// the kernel and bounded by [`VACATED_PER_SESSION`]; kept when the daemon rewrites
        /// the entry.
        pub vacated: u32,
        /// The objects the session made in shared places that the kernel records
        /// (`MAP_SHARED_MADE` of the reach block), counted by the kernel and bounded by
        /// [`SHARED_MADE_PER_SESSION`](reach::SHARED_MADE_PER_SESSION); kept when the
        /// daemon rewrites the entry.
        pub shared_made: u32,
    }
}

shared_struct! {
    /// Key of the global per-object maps (protected roots, open paths,
    /// never-grantable objects): a filesystem object by device and inode.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct ObjectKey as "object_key" {
        /// Inode number.
        pub ino: u64,
        /// Kernel-internal device number (see [`kernel_dev`]).
        pub dev: u32,
        /// Explicit padding, always zero.
        pub _pad: u32,
    }
}

/// The key of the protected-root map (the same key as every global per-object map).
pub type RootKey = ObjectKey;

shared_struct! {
    /// Key of the never-grantable name map: the entry `name` in directory `(dev, ino)`,
    /// whether it exists yet or not.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct NameKey as "name_key" {
        /// Inode number of the directory.
        pub ino: u64,
        /// Kernel-internal device number of the directory.
        pub dev: u32,
        /// Explicit padding, always zero.
        pub _pad: u32,
        /// The entry's name, NUL-padded (shorter than [`NEVER_NAME_LEN`]).
        pub name: [u8; NEVER_NAME_LEN],
    }
}

shared_struct! {
    /// Key of the vacated-name map: the entry `name` of directory `(dev, ino)` where a
    /// directory or symlink of the user's stood until session `session` removed or moved
    /// it away.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct VacatedKey as "vacated_key" {
        /// The session's cgroup id.
        pub session: u64,
        /// Inode number of the directory.
        pub ino: u64,
        /// Kernel-internal device number of the directory.
        pub dev: u32,
        /// Explicit padding, always zero.
        pub _pad: u32,
        /// The entry's name, NUL-padded; a longer name is kept as its first
        /// `NEVER_NAME_LEN - 1` bytes (two such names are one entry: stricter only).
        pub name: [u8; NEVER_NAME_LEN],
    }
}

shared_struct! {
    /// Key of the named-create map: the single name `name` session `session` may create
    /// in directory `(dev, ino)`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct CreateNameKey as "create_name_key" {
        /// The session's cgroup id.
        pub session: u64,
        /// Inode number of the directory.
        pub ino: u64,
        /// Kernel-internal device number of the directory.
        pub dev: u32,
        /// Explicit padding, always zero.
        pub _pad: u32,
        /// The entry's name, NUL-padded (shorter than [`CREATE_NAME_LEN`]: every name a
        /// filesystem allows).
        pub name: [u8; CREATE_NAME_LEN],
    }
}

shared_struct! {
    /// The single entry of the state map, kept by userspace so the kernel walk
    /// can skip work that cannot matter.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct State as "pincer_state" {
        /// Entries in the never-grantable object map (0: the walk may stop early).
        pub never_objects: u32,
        /// Entries in the never-grantable name map.
        pub never_names: u32,
        /// Bit `L`: a session cgroup may be at cgroup level `L` (the root is 0);
        /// [`SESSION_LEVELS_ALL`]: at any level. 0: no session was registered,
        /// so no task is gated. Set before a session is registered, so a hook
        /// looks up only the ancestors at those levels.
        pub session_levels: u32,
        /// The access bits some never pattern ([`NEVER_PATTERN_DEV`] and
        /// [`NEVER_PAIR_DEV`] entries) has (`delete` too where one pins a name): a
        /// check that needs one of them walks the names from the object to the top.
        pub never_patterns: u32,
    }
}

shared_struct! {
    /// The single entry of the generation map, written only by userspace. A
    /// walk result the kernel cached is used only while all three stamps it was
    /// computed under are unchanged; with an address of 0 nothing is cached.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Generation as "pincer_generation" {
        /// A fresh random value after every change that can narrow what the
        /// walk allows: a grant removed, a root, open path or never entry
        /// added, changed or removed. Grants added need no new value:
        /// the cache can only allow, and a miss walks the live maps.
        pub policy: u64,
        /// Kernel address of `rename_lock` (its sequence moves on every
        /// dentry move), from `/proc/kallsyms`; 0 if unknown.
        pub rename_seq_addr: u64,
        /// Kernel address of `mount_lock` (its sequence moves on every mount
        /// made, moved, unmounted or freed), from `/proc/kallsyms`; 0 if unknown.
        pub mount_seq_addr: u64,
    }
}

shared_struct! {
    /// Key of the exact and subtree grant maps: `(session, dev, ino)`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct GrantKey as "grant_key" {
        /// The session's cgroup id.
        pub session: u64,
        /// Inode number of the object (exact) or of the directory (subtree).
        pub ino: u64,
        /// Kernel-internal device number (see [`kernel_dev`]).
        pub dev: u32,
        /// Explicit padding, always zero.
        pub _pad: u32,
    }
}

shared_struct! {
    /// One denied access, as pushed by the kernel on the ring buffer.
    ///
    /// `path` holds the components from the object up to (not including) the
    /// protected root, **in reverse order**, each terminated by a NUL byte
    /// (`"file\0dir\0"` for `<root>/dir/file`). For creation hooks the first
    /// component is the new name. Userspace reverses it to get the path relative
    /// to the root identified by `root_dev`/`root_ino`. For objects outside every
    /// root (never-grantable ones) the components run up to the filesystem
    /// namespace's root, so the reversed path is absolute without its leading `/`.
    #[derive(Clone, Copy)]
    pub struct MissEvent as "miss_event" {
        /// [`EVENT_RECORD_MISS`]: which record of the ring buffer this is.
        pub record: u32,
        /// Which hook denied (`HOOK_*`).
        pub hook: u32,
        /// The session's cgroup id.
        pub session: u64,
        /// Inode of the object (0 when it does not exist yet, e.g. on create).
        pub ino: u64,
        /// Inode of the object's parent directory.
        pub parent_ino: u64,
        /// Inode of the protected root the object lies under (0 if none or the walk ran out).
        pub root_ino: u64,
        /// Thread-group id (process id) of the task.
        pub pid: u32,
        /// Real uid of the task.
        pub uid: u32,
        /// Device of the object.
        pub dev: u32,
        /// Device of the parent directory.
        pub parent_dev: u32,
        /// Device of the protected root.
        pub root_dev: u32,
        /// The missing (or never-grantable) access bits (`ACCESS_*`).
        pub access: u32,
        /// `EVENT_FLAG_*` bits.
        pub flags: u32,
        /// Number of components written into `path`.
        pub depth: u32,
        /// The hold the denied thread waits in ([`EVENT_FLAG_HELD`]), or 0.
        pub hold: u32,
        /// Explicit padding, always zero.
        pub _pad: u32,
        /// The object's own name (NUL-terminated).
        pub name: [u8; EVENT_NAME_LEN],
        /// Reverse NUL-separated components up to the root (see the type docs).
        pub path: [u8; EVENT_PATH_LEN],
    }
}

/// Every layout shared with C; `pincer-ebpf`'s build script asserts each one
/// against `pincer.h` (`_Static_assert` on size, and offset and size of every field).
pub const LAYOUTS: [Layout; 10] = [
    SessionKey::LAYOUT,
    SessionValue::LAYOUT,
    ObjectKey::LAYOUT,
    NameKey::LAYOUT,
    VacatedKey::LAYOUT,
    CreateNameKey::LAYOUT,
    State::LAYOUT,
    Generation::LAYOUT,
    GrantKey::LAYOUT,
    MissEvent::LAYOUT,
];

/// Panics (at compile time, in a `const`) if a layout has implicit padding:
/// the fields of every shared layout must cover it exactly.
pub(crate) const fn assert_no_padding(layouts: &[Layout]) {
    let mut i = 0;
    while i < layouts.len() {
        let l = &layouts[i];
        let mut end = 0;
        let mut j = 0;
        while j < l.fields.len() {
            assert!(l.fields[j].offset == end, "implicit padding in a shared layout");
            end += l.fields[j].size;
            j += 1;
        }
        assert!(end == l.size, "implicit tail padding in a shared layout");
        i += 1;
    }
}

const _: () = assert_no_padding(&LAYOUTS);

#[cfg(feature = "user")]
mod pod {
    // SAFETY: all types are `repr(C)`, made only of integers and byte arrays,
    // with explicit padding fields, so every bit pattern is valid.
    unsafe impl aya::Pod for super::SessionKey {}
    unsafe impl aya::Pod for super::SessionValue {}
    unsafe impl aya::Pod for super::ObjectKey {}
    unsafe impl aya::Pod for super::NameKey {}
    unsafe impl aya::Pod for super::VacatedKey {}
    unsafe impl aya::Pod for super::CreateNameKey {}
    unsafe impl aya::Pod for super::State {}
    unsafe impl aya::Pod for super::Generation {}
    unsafe impl aya::Pod for super::GrantKey {}
    unsafe impl aya::Pod for super::MissEvent {}
}
