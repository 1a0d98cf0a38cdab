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
//! show, anything outside it. Reading is bounded: an image file of at most
//! 48 MiB, decoded within `genapi_pixels::THUMBNAIL_BYTES` (48 MiB: the
//! codec's buffers and the thumbnail, never a full-size picture), which a
//! result of the service's 4 MP fits in any format; an image crafted to
//! claim enormous dimensions is refused from its header.
//!
//! Every thumbnail carries a JPEG comment saying the gallery made it, and
//! only such a file is reused or replaced (by the file policy of
//! `genapi-files`): a file of the user's own in `thumbs/` is left as it
//! is, and its tile says so.

use std::io::Read;
use std::path::{Path, PathBuf};

use genapi_pixels::Picture;

/// The longest side of a thumbnail, in pixels.
pub const THUMBNAIL_SIDE: u32 = 192;

/// JPEG quality of thumbnails: small files, still judged at a glance.
const QUALITY: u8 = 70;

/// The largest image file read for a thumbnail: above what a result of
/// the service's 4 MP outputs takes in any format (33.6 MB as an
/// uncompressed 16-bit RGBA PNG).
const IMAGE_BYTES: u64 = 48 << 20;

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
/// made when missing or older than the image. It is named after the
/// image's stem (`fox.png` has `thumbs/fox.jpg`): a batch's lines have
/// stems of their own, whatever their images' formats.
pub(crate) fn thumbnail(dir: &Path, thumbs: &str, image: &Path, name: &str) -> Result<Thumbnail, String> {
    let stem = Path::new(name)
        .file_stem()
        .and_then(|stem| stem.to_str())
        .unwrap_or(name);
    let relative = format!("{thumbs}/{stem}.jpg");
    let target = dir.join(&relative);
    if let Some(size) = fresh(&target, image) {
        return Ok(Thumbnail {
            image: name.to_string(),
            path: relative,
            width: size.0,
            height: size.1,
        });
    }
    let bytes = genapi_files::read(image, IMAGE_BYTES).map_err(|refused| refused.reason())?;
    // An image already within a thumbnail's size is kept as it is: scaling
    // it up would only cost time and bytes.
    let small =
        Picture::thumbnail(&bytes, THUMBNAIL_SIDE, genapi_pixels::THUMBNAIL_BYTES).map_err(|e| e.to_string())?;
    let folder = dir.join(thumbs);
    match std::fs::symlink_metadata(&folder) {
        Ok(metadata) if metadata.file_type().is_dir() => {}
        // A link (or anything else) in its place would take the writes
        // somewhere else.
        Ok(_) => return Err(format!("{} is not a folder of its own", folder.display())),
        Err(_) => std::fs::create_dir(&folder).map_err(|e| e.to_string())?,
    }
    let jpeg = small.to_jpeg(QUALITY).map_err(|e| e.to_string())?;
    let ours = genapi_files::Existing::ReplaceOurs {
        writer: "the gallery",
        ours: is_ours,
    };
    genapi_files::write_whole(&target, &marked(jpeg), ours)
        .map_err(|refused| format!("{relative}: {}", refused.reason()))?;
    Ok(Thumbnail {
        image: name.to_string(),
        path: relative,
        width: small.dimensions().0,
        height: small.dimensions().1,
    })
}

/// The size of a thumbnail the gallery made that is newer than its image.
fn fresh(thumbnail: &Path, image: &Path) -> Option<(u32, u32)> {
    let made = std::fs::symlink_metadata(thumbnail).ok()?;
    if !made.file_type().is_file() || made.modified().ok()? < std::fs::metadata(image).ok()?.modified().ok()? {
        return None;
    }
    let mut head = Vec::new();
    genapi_files::open(thumbnail, THUMBNAIL_BYTES)
        .ok()?
        .take(MARK.len() as u64 + 6)
        .read_to_end(&mut head)
        .ok()?;
    if !is_ours(&head) {
        return None;
    }
    let bytes = genapi_files::read(thumbnail, THUMBNAIL_BYTES).ok()?;
    genapi_pixels::dimensions(&bytes).ok()
}

/// The comment every thumbnail carries right after the JPEG's start.
const MARK: &[u8] = b"made by genapi-gallery";

/// The largest thumbnail reused: far above what one of at most
/// [`THUMBNAIL_SIDE`] pixels a side takes.
const THUMBNAIL_BYTES: u64 = 4 << 20;

/// A JPEG with the gallery's comment (a COM segment) after its start.
fn marked(jpeg: Vec<u8>) -> Vec<u8> {
    let length = (MARK.len() + 2) as u16;
    let mut out = Vec::with_capacity(jpeg.len() + MARK.len() + 4);
    out.extend_from_slice(&jpeg[..2.min(jpeg.len())]);
    out.extend_from_slice(&[0xFF, 0xFE]);
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(MARK);
    out.extend_from_slice(jpeg.get(2..).unwrap_or_default());
    out
}

/// Whether the first bytes of a file show a thumbnail the gallery made.
fn is_ours(head: &[u8]) -> bool {
    head.len() >= MARK.len() + 6
        && head[..2] == [0xFF, 0xD8]
        && head[2..4] == [0xFF, 0xFE]
        && &head[6..6 + MARK.len()] == MARK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marked_thumbnail_is_still_a_jpeg_and_known_as_ours() {
        let jpeg = Picture::from_fn(8, 4, |_, _| [200, 10, 10]).to_jpeg(QUALITY).unwrap();
        assert!(!is_ours(&jpeg));
        let marked = marked(jpeg);
        assert!(is_ours(&marked));
        let decoded = image::load_from_memory(&marked).unwrap();
        assert_eq!((decoded.width(), decoded.height()), (8, 4));
    }
}
