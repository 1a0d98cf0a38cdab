//! The command run in a pseudo-terminal, as a user at a keyboard runs it:
//! its output is a terminal's, and Ctrl-C is the key, which the terminal
//! turns into SIGINT for the command's process group.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A command running in a terminal of its own.
pub struct Terminal {
    master: File,
    child: Child,
    seen: Arc<Mutex<Vec<u8>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Terminal {
    /// Starts `command` with a new terminal as its stdin, stdout and stderr,
    /// in a session of its own whose controlling terminal it is.
    pub fn spawn(mut command: Command) -> Terminal {
        // SAFETY: plain libc calls on descriptors this function owns.
        let (master, slave) = unsafe {
            let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
            assert!(master >= 0, "posix_openpt");
            assert_eq!(libc::grantpt(master), 0, "grantpt");
            assert_eq!(libc::unlockpt(master), 0, "unlockpt");
            let mut name = [0 as libc::c_char; 128];
            assert_eq!(libc::ptsname_r(master, name.as_mut_ptr(), name.len()), 0, "ptsname_r");
            let slave = libc::open(name.as_ptr(), libc::O_RDWR | libc::O_NOCTTY);
            assert!(slave >= 0, "open the terminal");
            let size = libc::winsize {
                ws_row: 40,
                ws_col: 160,
                ws_xpixel: 0,
                ws_ypixel: 0,
            };
            libc::ioctl(slave, libc::TIOCSWINSZ, &size);
            (File::from_raw_fd(master), File::from_raw_fd(slave))
        };
        command
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().unwrap();
        // The parent's ends of the terminal close with the command, so the
        // reader sees the end when the command is gone.
        drop(command);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut reading = master.try_clone().unwrap();
        let sink = seen.clone();
        let reader = std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(n) = reading.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buffer[..n]);
            }
        });
        Terminal {
            master,
            child,
            seen,
            reader: Some(reader),
        }
    }

    /// Everything shown so far, without the terminal's carriage returns.
    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock().unwrap()).replace('\r', "")
    }

    /// Waits until the screen shows `text` (panics, with the screen, after
    /// `within`).
    pub fn wait_for(&self, text: &str, within: Duration) {
        let until = Instant::now() + within;
        while !self.screen().contains(text) {
            assert!(
                Instant::now() < until,
                "{text:?} not shown; the screen:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until `done` holds (panics, with the screen, after `within`).
    pub fn wait_until(&self, what: &str, within: Duration, mut done: impl FnMut() -> bool) {
        let until = Instant::now() + within;
        while !done() {
            assert!(
                Instant::now() < until,
                "{what} did not happen; the screen:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Whether the terminal echoes what is typed (its settings are the
    /// pair's, read from this end).
    pub fn echoes(&self) -> bool {
        use std::os::fd::AsRawFd;
        // SAFETY: tcgetattr fills the struct it is given, on a descriptor
        // this value owns.
        let mut settings: libc::termios = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::tcgetattr(self.master.as_raw_fd(), &mut settings) }, 0);
        settings.c_lflag & libc::ECHO != 0
    }

    /// Presses Ctrl-C.
    pub fn ctrl_c(&mut self) {
        self.master.write_all(&[0x03]).unwrap();
        self.master.flush().unwrap();
    }

    /// Waits for the command to end: its exit code and the whole screen.
    pub fn finish(self, within: Duration) -> (Option<i32>, String) {
        let (code, screen, _) = self.finish_echoing(within);
        (code, screen)
    }

    /// [`Terminal::finish`], with whether the terminal echoes once the
    /// command has ended.
    pub fn finish_echoing(mut self, within: Duration) -> (Option<i32>, String, bool) {
        let until = Instant::now() + within;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > until {
                let _ = self.child.kill();
                panic!("the command did not end; the screen:\n{}", self.screen());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let echoing = self.echoes();
        // The terminal reports its end once the command's last output is read.
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        (status.code(), self.screen(), echoing)
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
