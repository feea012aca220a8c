//! Readiness for systemd (`Type=notify`): `READY=1` on the datagram socket named by
//! `NOTIFY_SOCKET` (a path, or an abstract name starting with `@`). Outside systemd
//! (no `NOTIFY_SOCKET`) nothing is sent.

use std::os::unix::net::UnixDatagram;

/// Errors telling systemd.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// The notification socket could not be reached.
    #[error("cannot notify systemd at {socket}")]
    Send {
        /// `NOTIFY_SOCKET`.
        socket: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// Sends `state` (e.g. `READY=1`) to `socket`.
pub fn notify_to(socket: &str, state: &str) -> Result<(), NotifyError> {
    let err = |source| NotifyError::Send { socket: socket.to_string(), source };
    let sock = UnixDatagram::unbound().map_err(err)?;
    if let Some(name) = socket.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).map_err(err)?;
        sock.send_to_addr(state.as_bytes(), &addr).map_err(err)?;
    } else {
        sock.send_to(state.as_bytes(), socket).map_err(err)?;
    }
    Ok(())
}

/// Tells systemd the daemon is ready, if it runs under systemd.
pub fn notify_ready() -> Result<(), NotifyError> {
    match std::env::var("NOTIFY_SOCKET") {
        Ok(s) if !s.is_empty() => notify_to(&s, "READY=1"),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_reaches_a_path_socket() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("notify");
        let listener = UnixDatagram::bind(&path).unwrap();
        notify_to(path.to_str().unwrap(), "READY=1").unwrap();
        let mut buf = [0u8; 32];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
        assert!(notify_to("/nonexistent/notify", "READY=1").is_err());
    }
}
