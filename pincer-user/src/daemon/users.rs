//! User accounts: names and ids from the password database.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// A user account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Login name (or `uid<N>` for an id with no entry).
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Home directory (`/` if unknown).
    pub home: PathBuf,
    /// Login shell (empty if the entry names none, or the account has no entry).
    pub shell: PathBuf,
}

/// Errors looking up a user.
#[derive(Debug, thiserror::Error)]
pub enum UserError {
    /// No user of that name, and the name is not a number.
    #[error("no user named {0:?} (give a user name from /etc/passwd or a numeric uid)")]
    Unknown(String),
}

fn from_passwd(pw: &libc::passwd) -> Account {
    // SAFETY: getpw*_r filled `pw` with pointers into the caller's buffer, valid here.
    let name = unsafe { CStr::from_ptr(pw.pw_name) }.to_string_lossy().into_owned();
    // SAFETY: as above.
    let home = unsafe { CStr::from_ptr(pw.pw_dir) }.to_string_lossy().into_owned();
    // SAFETY: as above (`pw_shell` may be null on some systems).
    let shell = if pw.pw_shell.is_null() { PathBuf::new() } else { PathBuf::from(std::ffi::OsStr::from_bytes(unsafe { CStr::from_ptr(pw.pw_shell) }.to_bytes())) };
    Account { name, uid: pw.pw_uid, gid: pw.pw_gid, home: PathBuf::from(home), shell }
}

/// The account of `uid` (a synthetic `uid<N>` one, gid = uid, if it has no entry).
pub fn by_uid(uid: u32) -> Account {
    let mut buf = vec![0 as libc::c_char; 16384];
    // SAFETY: zeroed passwd is a valid out-parameter.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the call; buf outlives the use of pw.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) };
    if rc == 0 && !out.is_null() {
        return from_passwd(&pw);
    }
    Account { name: format!("uid{uid}"), uid, gid: uid, home: PathBuf::from("/"), shell: PathBuf::new() }
}

/// The account named `name`, or a numeric uid.
pub fn by_name(name: &str) -> Result<Account, UserError> {
    if let Ok(uid) = name.parse::<u32>() {
        return Ok(by_uid(uid));
    }
    let c = CString::new(name).map_err(|_| UserError::Unknown(name.into()))?;
    let mut buf = vec![0 as libc::c_char; 16384];
    // SAFETY: zeroed passwd is a valid out-parameter.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the call.
    let rc = unsafe { libc::getpwnam_r(c.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) };
    if rc == 0 && !out.is_null() {
        Ok(from_passwd(&pw))
    } else {
        Err(UserError::Unknown(name.into()))
    }
}

/// Who a host's accounts are in its store: on one host (SQLite) a user is their login
/// name; in a fleet's shared store a user is the fleet identity the host's configuration
/// maps their login name to (`[store.users]`), and an account not mapped is `name@host`,
/// known on this host only. So two hosts share a user's trusted state, questions and audit
/// rows only when both map their accounts to the same identity: the same login name on
/// another host is not enough.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Identities {
    /// This host's name (`None`: one host, the login name is the identity).
    host: Option<String>,
    /// Login name → fleet identity.
    map: std::collections::BTreeMap<String, String>,
}

impl Identities {
    /// One host's: the login name.
    pub fn local() -> Self {
        Identities::default()
    }

    /// Host `host`'s in a fleet, with its accounts mapped by `map`.
    pub fn fleet(host: String, map: std::collections::BTreeMap<String, String>) -> Self {
        Identities { host: Some(host), map }
    }

    /// This host's name in a fleet.
    pub fn host(&self) -> Option<&str> {
        self.host.as_deref()
    }

    /// The identity of the account named `name`.
    pub fn of_name(&self, name: &str) -> String {
        match (&self.host, self.map.get(name)) {
            (None, _) => name.to_string(),
            (Some(_), Some(id)) => id.clone(),
            (Some(host), None) => format!("{name}@{host}"),
        }
    }

    /// The identity of the account of `uid`.
    pub fn of_uid(&self, uid: u32) -> String {
        self.of_name(&by_uid(uid).name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_numbers_resolve() {
        assert_eq!(by_uid(0).uid, 0);
        assert_eq!(by_name("4242").unwrap().uid, 4242);
        assert!(by_name("no-such-user-pincer").is_err());
    }

    #[test]
    fn a_fleet_identity_is_the_mapped_one_and_an_unmapped_account_is_the_hosts_own() {
        let map = [("ann".to_string(), "ann@example.org".to_string())].into_iter().collect();
        let ids = Identities::fleet("host-a".into(), map);
        assert_eq!(ids.of_name("ann"), "ann@example.org");
        assert_eq!(ids.of_name("bob"), "bob@host-a");
        assert_eq!(Identities::local().of_name("bob"), "bob");
    }
}
