//! User accounts: names and ids from the password database.

use std::ffi::{CStr, CString};
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
    Account { name, uid: pw.pw_uid, gid: pw.pw_gid, home: PathBuf::from(home) }
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
    Account { name: format!("uid{uid}"), uid, gid: uid, home: PathBuf::from("/") }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_numbers_resolve() {
        assert_eq!(by_uid(0).uid, 0);
        assert_eq!(by_name("4242").unwrap().uid, 4242);
        assert!(by_name("no-such-user-pincer").is_err());
    }
}
