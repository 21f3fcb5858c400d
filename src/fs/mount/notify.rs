//! systemd readiness notification (`sd_notify`), without libsystemd.
//!
//! A `Type=notify` service is "started" only when its main process sends
//! `READY=1` to the datagram socket named by `$NOTIFY_SOCKET`; until then
//! units ordered after it wait. slabfs sends it once the kernel has
//! accepted the mount (see [`super::Readiness`]), so `After=slabfs@x.service`
//! really means "after the files are there", and `STOPPING=1` when it
//! begins to unmount.
//!
//! The protocol is one datagram of newline-separated `KEY=value`
//! assignments (sd_notify(3)). `$NOTIFY_SOCKET` is either a filesystem path
//! (`/run/systemd/notify`) or, starting with `@`, a Linux abstract socket
//! name (the `@` stands for the leading NUL byte). Other forms (`vsock:`)
//! are not supported and are reported, not guessed at.
//!
//! The variable is read once at startup and never removed from the
//! environment: slabfs starts no children that speak the protocol, and
//! removing variables is unsafe in a threaded process.

use std::ffi::OsStr;
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// A connection to the service manager's notification socket.
#[derive(Debug)]
pub struct SdNotify {
    sock: UnixDatagram,
    addr: SocketAddr,
    /// `$NOTIFY_SOCKET` as given, for messages.
    name: String,
}

impl SdNotify {
    /// The socket named by `$NOTIFY_SOCKET`: `None` when the variable is
    /// unset or empty (not run by systemd), an error when it is malformed.
    pub fn from_env() -> Option<io::Result<SdNotify>> {
        let value = std::env::var_os("NOTIFY_SOCKET")?;
        if value.is_empty() {
            return None;
        }
        Some(SdNotify::new(&value))
    }

    /// A notifier for the socket `value` (a path or an `@abstract` name).
    pub fn new(value: &OsStr) -> io::Result<SdNotify> {
        let name = value.to_string_lossy().into_owned();
        let bytes = value.as_bytes();
        let addr = match bytes.first() {
            Some(b'/') => SocketAddr::from_pathname(value)?,
            Some(b'@') => SocketAddr::from_abstract_name(&bytes[1..])?,
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "NOTIFY_SOCKET={name:?}: only socket paths and @abstract names are \
                         supported"
                    ),
                ));
            }
        };
        Ok(SdNotify {
            sock: UnixDatagram::unbound()?,
            addr,
            name,
        })
    }

    /// Send one notification: newline-separated `KEY=value` lines, e.g.
    /// `"READY=1\nSTATUS=serving"`.
    pub fn send(&self, state: &str) -> io::Result<()> {
        let n = self.sock.send_to_addr(state.as_bytes(), &self.addr)?;
        if n != state.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!(
                    "short datagram to {} ({n} of {} bytes)",
                    self.name,
                    state.len()
                ),
            ));
        }
        Ok(())
    }

    /// `$NOTIFY_SOCKET` as given.
    pub fn name(&self) -> &str {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_socket_receives_the_state() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let server = UnixDatagram::bind(&path).unwrap();
        let n = SdNotify::new(path.as_os_str()).unwrap();
        n.send("READY=1\nSTATUS=serving").unwrap();
        let mut buf = [0u8; 64];
        let len = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"READY=1\nSTATUS=serving");
        assert_eq!(n.name(), path.to_str().unwrap());
    }

    #[test]
    fn abstract_socket_receives_the_state() {
        let name = format!("slabfs-notify-test-{}", std::process::id());
        let server =
            UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap())
                .unwrap();
        let n = SdNotify::new(OsStr::new(&format!("@{name}"))).unwrap();
        n.send("STOPPING=1").unwrap();
        let mut buf = [0u8; 64];
        let len = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"STOPPING=1");
    }

    #[test]
    fn unsupported_and_missing_sockets_are_errors() {
        let err = SdNotify::new(OsStr::new("vsock:2:1234")).unwrap_err();
        assert!(err.to_string().contains("only socket paths"), "{err}");
        assert!(SdNotify::new(OsStr::new("relative/path")).is_err());
        // Nobody listening: the send fails, it does not hang or panic.
        let dir = tempfile::tempdir().unwrap();
        let n = SdNotify::new(dir.path().join("absent").as_os_str()).unwrap();
        assert!(n.send("READY=1").is_err());
    }
}
