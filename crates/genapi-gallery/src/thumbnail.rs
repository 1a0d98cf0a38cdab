//! Thumbnails: a small JPEG of each saved image, in `thumbs/`.
//!
//! A page of thousands of full-size results would load hundreds of
//! megabytes; a thumbnail of at most [`THUMBNAIL_SIDE`] pixels a side at a
//! modest JPEG quality is a few kilobytes. A thumbnail is made once and kept
//! while it is newer than its image, so rebuilding a gallery (or keeping
//! one current during a run) decodes each image once.
//!
//! Only files directly inside the output folder are read, and only regular
//! files (never through a link), whatever a results file names: a gallery
//! rebuilt from a folder someone else wrote cannot be made to read, or
//! show, anything outside it. Decoding is bounded, so an image crafted to
//! claim enormous dimensions fails instead of exhausting memory.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use image::codecs::jpeg::JpegEncoder;
use image::{ImageReader, Limits};

/// The longest side of a thumbnail, in pixels.
pub const THUMBNAIL_SIDE: u32 = 192;

/// JPEG quality of thumbnails: small files, still judged at a glance.
const QUALITY: u8 = 70;

/// The most memory one image may take to decode.
const DECODE_BYTES: u64 = 256 << 20;

/// A thumbnail on disk: its path relative to the output folder, and its
/// size in pixels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Thumbnail {
    /// The image, by its name in the output folder (what a tile links to:
    /// the page is in that folder too).
    pub(crate) image: String,
    pub(crate) path: String,
    pub(crate) width: u32,
    pub(crate) height: u32,
}

/// The image a result names, when it is a regular file directly in `dir`.
pub(crate) fn image_in(dir: &Path, file: &str) -> Option<(PathBuf, String)> {
    let name = Path::new(file).file_name()?.to_str()?.to_string();
    let path = dir.join(&name);
    let metadata = std::fs::symlink_metadata(&path).ok()?;
    metadata.file_type().is_file().then_some((path, name))
}

/// The thumbnail of `image` (named `name` in the output folder `dir`),
/// made when missing or older than the image.
pub(crate) fn thumbnail(dir: &Path, thumbs: &str, image: &Path, name: &str) -> Result<Thumbnail, String> {
    let relative = format!("{thumbs}/{name}.jpg");
    let target = dir.join(&relative);
    if let Some(size) = fresh(&target, image) {
        return Ok(Thumbnail {
            image: name.to_string(),
            path: relative,
            width: size.0,
            height: size.1,
        });
    }
    let mut reader = ImageReader::new(BufReader::new(File::open(image).map_err(|e| e.to_string())?))
        .with_guessed_format()
        .map_err(|e| e.to_string())?;
    let mut limits = Limits::default();
    limits.max_alloc = Some(DECODE_BYTES);
    reader.limits(limits);
    let decoded = reader.decode().map_err(|e| e.to_string())?;
    let small = decoded.thumbnail(THUMBNAIL_SIDE, THUMBNAIL_SIDE).to_rgb8();
    let folder = dir.join(thumbs);
    match std::fs::symlink_metadata(&folder) {
        Ok(metadata) if metadata.file_type().is_dir() => {}
        // A link (or anything else) in its place would take the writes
        // somewhere else.
        Ok(_) => return Err(format!("{} is not a folder of its own", folder.display())),
        Err(_) => std::fs::create_dir(&folder).map_err(|e| e.to_string())?,
    }
    let partial = folder.join(crate::gallery::partial_name(&format!("{name}.jpg")));
    let file = genapi::files::create_temporary(&partial).map_err(|e| e.to_string())?;
    let written = (|| {
        let mut out = BufWriter::new(file);
        JpegEncoder::new_with_quality(&mut out, QUALITY)
            .encode_image(&small)
            .map_err(|e| e.to_string())?;
        out.flush().map_err(|e| e.to_string())?;
        drop(out);
        std::fs::rename(&partial, &target).map_err(|e| e.to_string())
    })();
    if let Err(error) = written {
        // Each write has a name of its own: a failed one is not reused.
        let _ = std::fs::remove_file(&partial);
        return Err(error);
    }
    Ok(Thumbnail {
        image: name.to_string(),
        path: relative,
        width: small.width(),
        height: small.height(),
    })
}

/// The size of a thumbnail that is newer than its image.
fn fresh(thumbnail: &Path, image: &Path) -> Option<(u32, u32)> {
    let made = std::fs::symlink_metadata(thumbnail).ok()?;
    if !made.file_type().is_file() || made.modified().ok()? < std::fs::metadata(image).ok()?.modified().ok()? {
        return None;
    }
    image::image_dimensions(thumbnail).ok()
}
