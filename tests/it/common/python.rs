//! The tests' `python ARGS...`, through a fork server
//! (tests/servers/pyfork.py).
//!
//! About a hundred calls a run compute expected values or write fixtures
//! with zarr-python, netCDF4-python, h5py, icechunk-python...; most of what
//! each cost was the interpreter's start and those imports (0.5 to 2 s of
//! CPU a call, a third of the suite's Python). The server imports them once
//! and forks for each call, which runs the script as a spawned interpreter
//! would: its arguments, environment, working directory, standard output
//! and error, and exit status (a signal included). What a fork cannot
//! honour (an option other than `-W`, `-c` and `-m`, or a start-up variable
//! such as `PYTHONPATH` or `HDF5_PLUGIN_PATH` set for the call) the server
//! runs in a real interpreter instead.
//!
//! `SLABFS_PYFORK=0` spawns every call instead, as does a server that
//! cannot start (the reason is printed once), and so are the calls made
//! before it is ready. Servers the tests keep
//! running (moto, range_http.py, fault_proxy.py) are spawned as before:
//! this is for calls that run to their end.

#![allow(dead_code)]

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Output, Stdio};
use std::sync::{Mutex, Once, OnceLock};

/// `python ARGS...` of the test venv ([`super::python`]), built like a
/// [`Command`] and run by [`Python::output`].
#[derive(Debug, Default)]
pub struct Python {
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    cwd: Option<PathBuf>,
}

impl Python {
    pub fn new() -> Python {
        Python::default()
    }

    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Python {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<I, S>(&mut self, args: I) -> &mut Python
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Python {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Python {
        self.cwd = Some(dir.as_ref().to_owned());
        self
    }

    /// Run it to its end: as [`Command::output`] (standard input empty,
    /// output and error captured).
    pub fn output(&mut self) -> std::io::Result<Output> {
        if let Some(server) = server()
            && let Some(request) = self.request()
            && let Ok(out) = server.call(&request)
        {
            return Ok(out);
        }
        self.command().output()
    }

    /// [`Python::output`], which must succeed: panics with the call, its
    /// status, output and error if not.
    pub fn run(&mut self) -> Output {
        let out = self.output().unwrap_or_else(|e| panic!("{self:?}: {e}"));
        assert!(
            out.status.success(),
            "{self:?} exited with {}:\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// The same call as a spawned process.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(super::python());
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
        cmd
    }

    /// The server's request line, or None if something in it is not
    /// UTF-8 (then the call is spawned).
    fn request(&self) -> Option<Vec<u8>> {
        let text = |s: &OsStr| s.to_str().map(str::to_owned);
        let argv: Option<Vec<String>> = self.args.iter().map(|a| text(a)).collect();
        let mut env = serde_json::Map::new();
        for (k, v) in std::env::vars_os().chain(self.env.iter().cloned()) {
            env.insert(text(&k)?, serde_json::Value::String(text(&v)?));
        }
        let cwd = match &self.cwd {
            Some(dir) => std::env::current_dir().ok()?.join(dir),
            None => std::env::current_dir().ok()?,
        };
        let mut line = serde_json::to_vec(&serde_json::json!({
            "argv": argv?,
            "cwd": text(cwd.as_os_str())?,
            "env": env,
        }))
        .ok()?;
        line.push(b'\n');
        Some(line)
    }
}

/// The running fork server.
struct Server {
    socket: PathBuf,
    /// Its standard input: the server exits when this closes, that is
    /// when the test process ends.
    _stdin: Mutex<ChildStdin>,
    _child: Mutex<Child>,
}

impl Server {
    fn start() -> Result<Server, String> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/pyfork.py");
        // In a directory of its own, mode 0700: whoever can connect runs
        // code as this user, with this environment (the tests' keys).
        let dir = tempfile::Builder::new()
            .prefix("slabfs-pyfork-")
            .tempdir()
            .map_err(|e| format!("a directory for its socket: {e}"))?
            .keep();
        let socket = dir.join("socket");
        let mut child = Command::new(super::python())
            .arg(&script)
            .arg(&socket)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{}: {e}", script.display()))?;
        let mut line = String::new();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let _ = stdout.read_line(&mut line);
        if line.trim() != "ready" {
            let _ = child.kill();
            let mut err = String::new();
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            let _ = child.wait();
            return Err(format!("{} did not start: {err}", script.display()));
        }
        // Nothing more is read from it: its imports' warnings go nowhere.
        drop(child.stderr.take());
        let stdin = child.stdin.take().unwrap();
        Ok(Server {
            socket,
            _stdin: Mutex::new(stdin),
            _child: Mutex::new(child),
        })
    }

    fn call(&self, request: &[u8]) -> std::io::Result<Output> {
        let mut conn = UnixStream::connect(&self.socket)?;
        conn.write_all(request)?;
        let mut status = [0u8; 4];
        conn.read_exact(&mut status)?;
        let mut part = || -> std::io::Result<Vec<u8>> {
            let mut len = [0u8; 8];
            conn.read_exact(&mut len)?;
            let mut bytes = vec![0u8; u64::from_le_bytes(len) as usize];
            conn.read_exact(&mut bytes)?;
            Ok(bytes)
        };
        let stdout = part()?;
        let stderr = part()?;
        Ok(Output {
            status: ExitStatus::from_raw(i32::from_le_bytes(status)),
            stdout,
            stderr,
        })
    }
}

/// The fork server once it is ready. The first call starts it in the
/// background and is spawned, as are the calls made while its imports run
/// (about 5 s): nobody waits for it. None when `SLABFS_PYFORK=0` or it
/// could not start.
fn server() -> Option<&'static Server> {
    static SERVER: OnceLock<Option<Server>> = OnceLock::new();
    static STARTED: Once = Once::new();
    if std::env::var_os("SLABFS_PYFORK").is_some_and(|v| v == "0") {
        return None;
    }
    STARTED.call_once(|| {
        // The venv first, on this thread: the call needs it anyway.
        super::python();
        std::thread::spawn(|| {
            let _ = SERVER.set(
                Server::start()
                    .map_err(|e| {
                        eprintln!("the Python fork server is off, each call spawns: {e}");
                    })
                    .ok(),
            );
        });
    });
    SERVER.get().and_then(Option::as_ref)
}
