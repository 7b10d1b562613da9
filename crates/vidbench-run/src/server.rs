//! Starting a web server for one run: its configuration rendered from a
//! template, the process inside the run's cgroup (under the shim when the
//! configuration uses Libception), and a readiness check over HTTP.
//!
//! Each kind runs in the foreground so that the driver owns it: nginx with
//! `daemon off` (`-p RUN_DIR -e RUN_DIR/error.log`), Apache with `-DFOREGROUND`,
//! lighttpd with `-D`, laio-httpd as it always runs. SIGTERM stops all four, and
//! their workers exit through `exit()`, so the shim's track-mode stats are written.

use crate::cgroup::{Role, RunCgroup};
use crate::experiment::ServerKind;
use crate::interrupt::{self, Interrupted};
use crate::process::{tail, Child, Spawn};
use crate::template::Template;
use anyhow::{bail, Context};
use libception::launch::{self, Readiness};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Everything needed to start one server.
pub struct ServerSetup<'a> {
    pub kind: ServerKind,
    pub template: &'a Path,
    pub binary: &'a Path,
    pub run_dir: &'a Path,
    pub docroot: &'a Path,
    pub port: u16,
    pub workers: u32,
    pub threads_per_worker: u32,
    pub user: &'a str,
    pub knobs: &'a BTreeMap<String, String>,
    /// Environment for the server (the shim's variables).
    pub env: Vec<(String, String)>,
}

/// A started server.
pub struct RunningServer {
    pub child: Child,
    pub error_log: PathBuf,
    pub config_path: PathBuf,
    /// The knob values the configuration used (defaults included).
    pub knobs: BTreeMap<String, String>,
}

/// The primary group of `user`.
pub fn primary_group(user: &str) -> anyhow::Result<String> {
    let c = std::ffi::CString::new(user).context("user name contains a NUL byte")?;
    unsafe {
        let pw = libc::getpwnam(c.as_ptr());
        if pw.is_null() {
            bail!("user {user:?} does not exist on this machine (set run.user)");
        }
        let gr = libc::getgrgid((*pw).pw_gid);
        if gr.is_null() {
            bail!("the primary group {} of user {user:?} does not exist", (*pw).pw_gid);
        }
        Ok(std::ffi::CStr::from_ptr((*gr).gr_name).to_string_lossy().into_owned())
    }
}

/// The uid and primary gid of `user`.
pub fn user_ids(user: &str) -> anyhow::Result<(u32, u32)> {
    let c = std::ffi::CString::new(user).context("user name contains a NUL byte")?;
    let pw = unsafe { libc::getpwnam(c.as_ptr()) };
    if pw.is_null() {
        bail!("user {user:?} does not exist on this machine (set run.user)");
    }
    Ok(unsafe { ((*pw).pw_uid, (*pw).pw_gid) })
}

fn variables(s: &ServerSetup<'_>, group: &str) -> BTreeMap<String, String> {
    let mut v = BTreeMap::new();
    v.insert("port".into(), s.port.to_string());
    v.insert("docroot".into(), s.docroot.display().to_string());
    v.insert("workers".into(), s.workers.to_string());
    v.insert("threads_per_worker".into(), s.threads_per_worker.to_string());
    v.insert("max_request_workers".into(), (s.workers * s.threads_per_worker).to_string());
    v.insert("user".into(), s.user.to_string());
    v.insert("group".into(), group.to_string());
    v.insert("run_dir".into(), s.run_dir.display().to_string());
    v
}

/// Renders `template` once with example driver variables and `knobs`: an
/// experiment's check finds an undeclared knob or a placeholder without a
/// value before any run, not when the configuration's server starts.
pub fn check_template(template: &Path, knobs: &BTreeMap<String, String>) -> anyhow::Result<()> {
    Template::load(template)?.render(&example_variables(), knobs).map(drop).map_err(|e| anyhow::anyhow!("server template {}: {e}", template.display()))
}

/// The driver's variables with example values.
pub fn example_variables() -> BTreeMap<String, String> {
    let knobs = BTreeMap::new();
    let s = ServerSetup {
        kind: ServerKind::Nginx,
        template: Path::new("/t"),
        binary: Path::new("/b"),
        run_dir: Path::new("/r"),
        docroot: Path::new("/d"),
        port: 8089,
        workers: 4,
        threads_per_worker: 64,
        user: "www-data",
        knobs: &knobs,
        env: vec![],
    };
    variables(&s, "www-data")
}

/// Renders the configuration into the run directory and starts the server in the cgroup.
pub fn start(s: &ServerSetup<'_>, cgroup: &RunCgroup) -> anyhow::Result<RunningServer> {
    let group = primary_group(s.user)?;
    let template = Template::load(s.template)?;
    let (text, knobs) = template
        .render(&variables(s, &group), s.knobs)
        .map_err(|e| anyhow::anyhow!("server template {}: {e}", s.template.display()))?;
    let config_path = s.run_dir.join(format!("{}.conf", s.kind.name()));
    std::fs::write(&config_path, text).with_context(|| format!("cannot write {}", config_path.display()))?;
    let error_log = s.run_dir.join("error.log");
    // Some servers (lighttpd) open their error log after dropping privileges.
    std::fs::File::create(&error_log).with_context(|| format!("cannot create {}", error_log.display()))?;
    let (uid, gid) = user_ids(s.user)?;
    std::os::unix::fs::chown(&error_log, Some(uid), Some(gid)).with_context(|| format!("cannot give {} to {}", error_log.display(), s.user))?;
    let mut command = Command::new(s.binary);
    match s.kind {
        ServerKind::Nginx => {
            command.arg("-c").arg(&config_path).arg("-p").arg(format!("{}/", s.run_dir.display())).arg("-e").arg(&error_log);
        }
        ServerKind::Apache => {
            command.arg("-f").arg(&config_path).arg("-DFOREGROUND");
        }
        ServerKind::Lighttpd => {
            command.arg("-D").arg("-f").arg(&config_path);
        }
        ServerKind::Laio => {
            command.arg("-f").arg(&config_path);
        }
    }
    let out = std::fs::File::create(s.run_dir.join("server.out")).context("cannot create server.out")?;
    command.stdin(Stdio::null()).stdout(out.try_clone()?).stderr(out);
    command.current_dir(s.run_dir);
    for (k, v) in &s.env {
        command.env(k, v);
    }
    let child = Child::spawn(Spawn {
        name: s.kind.name(),
        command,
        attach: Some(cgroup.attach(Role::Server)?),
        stop_signal: libc::SIGTERM,
        death_signal: libc::SIGKILL,
    })?;
    Ok(RunningServer { child, error_log, config_path, knobs })
}

/// Waits until the server answers an HTTP request on 127.0.0.1:`port`.
pub fn wait_ready(server: &mut RunningServer, port: u16, timeout: Duration) -> anyhow::Result<()> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut last_error = String::new();
    let child = &mut server.child;
    let readiness = launch::wait_ready(timeout, Duration::from_millis(100), || child.exited(), || {
        interrupt::check()?;
        Ok::<_, Interrupted>(probe(addr).map_err(|e| last_error = e.to_string()).is_ok())
    })?;
    match readiness {
        Readiness::Ready => Ok(()),
        Readiness::Exited(status) => {
            let out = server.config_path.with_file_name("server.out");
            bail!(
                "{} exited during start-up ({status}); error log {}:\n{}\n{}",
                server.child.name,
                server.error_log.display(),
                tail(&server.error_log, 15),
                tail(&out, 15)
            )
        }
        Readiness::TimedOut => bail!(
            "{} did not answer on {addr} within {:.0} s (last error: {last_error}); error log {}:\n{}",
            server.child.name,
            timeout.as_secs_f64(),
            server.error_log.display(),
            tail(&server.error_log, 15)
        ),
    }
}

/// One HTTP request for a path that does not exist: any HTTP answer means ready.
fn probe(addr: SocketAddr) -> std::io::Result<()> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.write_all(b"GET /vidbench-ready-probe HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")?;
    let mut buf = [0u8; 16];
    let mut got = 0;
    while got < 8 {
        let n = s.read(&mut buf[got..])?;
        if n == 0 {
            break;
        }
        got += n;
    }
    if buf[..got].starts_with(b"HTTP/1.") {
        Ok(())
    } else {
        Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "not an HTTP answer"))
    }
}
