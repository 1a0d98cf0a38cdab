//! # genapi-files
//!
//! The one file policy of genapi's crates: every path a user gives (an
//! image, a prompt, a job file, a recording, a certificate, an output file
//! or folder) goes through this crate, reads and writes alike, so each rule
//! below holds everywhere and a new feature gets it by using the crate.
//!
//! **Reading** ([`read`], [`read_text`], [`open`], [`read_stoppable`]):
//!
//! - only a regular file is read (a link is followed to one); a named pipe,
//!   a device or a folder is refused at once, before a byte is read, and is
//!   opened without blocking, so a pipe with no writer cannot hang the
//!   reader;
//! - never past the limit the caller states, even when the file grows while
//!   it is read; the error names the size and the limit;
//! - where the caller has a deadline, [`read_stoppable`] reads on a blocking
//!   thread in chunks and stops at the next chunk once the caller has given
//!   up (a slow network file system cannot hold a command past it).
//!
//! **Files that steer a secret** ([`open_sensitive`],
//! [`read_sensitive_text`], [`read_sensitive_stoppable`], [`Sensitivity`]): a file that says where a
//! secret goes (a config file) must be the user's (or root's) and writable
//! by no one else; a file that holds one (a key file) readable by no one
//! else either. The file checked is the one opened, after links; a refusal
//! says what to run (`chmod`). Such a file is written by [`write_private`]:
//! its owner's alone from its creation, in a folder no one else may change:
//! one made for it is made its owner's alone, an existing one keeps its
//! mode, and one that is a link, another user's or writable by its group or
//! others is refused ([`may_write_private`] asks before anything is
//! written). A file a program keeps for itself that way (a cache's) is read
//! back by [`read_private`]: never through a link, and only when the file
//! opened is still the user's alone to change; a file the program has just
//! written elsewhere (a download, to read back) is opened by
//! [`open_written`], never through a link either.
//!
//! **Writing** ([`create`], [`stage`], [`publish`], [`write_whole`]):
//!
//! - a file already at the name is kept unless the caller says otherwise
//!   ([`Existing`]): `Keep` by default (the command's `--force` means
//!   `Replace`), and `ReplaceOurs` for files a program rewrites as it goes
//!   (a gallery's page), which replaces only a file whose first bytes show
//!   that program wrote it;
//! - a link at the name is never followed: it is replaced as a link when
//!   replacing is allowed, and otherwise makes the name taken;
//! - only regular files are written: a pipe, a device or a folder at the
//!   name, or a link to one (`/dev/stdout`), is refused even when replacing
//!   is allowed;
//! - a whole file is written beside its name under a temporary name of its
//!   writer's own, then published at once ([`stage`], [`publish`]): a
//!   reader never sees half a file, and writers sharing a folder never
//!   rename each other's work away.
//!
//! ```
//! use genapi_files::{Existing, FileError};
//!
//! let dir = std::env::temp_dir().join(format!("genapi-files-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let prompt = dir.join("prompt.txt");
//! genapi_files::write_whole(&prompt, b"a lighthouse at dusk", Existing::Keep)?;
//! assert_eq!(genapi_files::read_text(&prompt, 1024)?, "a lighthouse at dusk");
//! // Read within a limit, written without replacing.
//! assert!(matches!(genapi_files::read(&prompt, 4), Err(FileError::TooLarge { size: 20, .. })));
//! assert!(matches!(genapi_files::write_whole(&prompt, b"x", Existing::Keep), Err(FileError::Exists { .. })));
//! assert!(matches!(genapi_files::read(&dir, 1024), Err(FileError::NotRegular { .. })));
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod error;
mod read;
mod secret;
mod write;

pub use error::{shown_size, FileError};
pub use read::{open, read, read_sensitive_stoppable, read_stoppable, read_text, Bounded};
pub use secret::{
    append_private, made_owner_only, may_write_private, open_sensitive, open_written, owner_only, private_folder,
    read_private, read_sensitive_text, write_private, Appending, Exposure, Sensitivity,
};
pub use write::{
    create, create_temporary, is_taken, may_write, publish, stage, temporary_name, write_whole, Existing, Staged,
};
