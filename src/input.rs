//! Image inputs: from a file, bytes or a URL, to the string a request field
//! takes.
//!
//! Fields take raw base64 (never a `data:` URL); some also take an http(s)
//! URL. The format is recognised from the file's first bytes, not its name, so
//! a mislabelled file is caught before it costs a request.

use std::path::Path;

use base64::Engine as _;

use crate::error::{Error, Result};

/// Largest image file read as an input: 32 MiB, far more than a 4 MP image
/// takes in any format the service reads.
const MAX_IMAGE_FILE_BYTES: u64 = 32 * 1024 * 1024;

/// Image encodings the service reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageFormat {
    /// JPEG.
    Jpeg,
    /// PNG.
    Png,
    /// WebP.
    Webp,
    /// GIF.
    Gif,
}

impl ImageFormat {
    /// Recognises an encoding from its magic bytes.
    pub fn sniff(bytes: &[u8]) -> Option<ImageFormat> {
        match bytes {
            [0xFF, 0xD8, 0xFF, ..] => Some(ImageFormat::Jpeg),
            [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, ..] => Some(ImageFormat::Png),
            [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => Some(ImageFormat::Webp),
            [b'G', b'I', b'F', b'8', b'7' | b'9', b'a', ..] => Some(ImageFormat::Gif),
            _ => None,
        }
    }

    /// The usual file extension.
    pub fn extension(self) -> &'static str {
        match self {
            ImageFormat::Jpeg => "jpg",
            ImageFormat::Png => "png",
            ImageFormat::Webp => "webp",
            ImageFormat::Gif => "gif",
        }
    }
}

/// Width and height read from an image's header, without decoding pixels.
/// `None` when the header is not there or not understood.
pub(crate) fn dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    let be16 = |at: usize| bytes.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]) as u32);
    let le16 = |at: usize| bytes.get(at..at + 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as u32);
    let le24 = |at: usize| bytes.get(at..at + 3).map(|b| u32::from_le_bytes([b[0], b[1], b[2], 0]));
    match ImageFormat::sniff(bytes)? {
        ImageFormat::Png => {
            // The size is in the header chunk, which must come first.
            if bytes.get(12..16)? != b"IHDR" {
                return None;
            }
            let w = bytes.get(16..20)?;
            let h = bytes.get(20..24)?;
            Some((
                u32::from_be_bytes(w.try_into().ok()?),
                u32::from_be_bytes(h.try_into().ok()?),
            ))
        }
        ImageFormat::Gif => Some((le16(6)?, le16(8)?)),
        ImageFormat::Webp => match bytes.get(12..16)? {
            b"VP8 " => Some((le16(26)? & 0x3FFF, le16(28)? & 0x3FFF)),
            b"VP8L" => {
                let b = bytes.get(21..25)?;
                let bits = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                Some(((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1))
            }
            b"VP8X" => Some((le24(24)? + 1, le24(27)? + 1)),
            _ => None,
        },
        ImageFormat::Jpeg => {
            // Walk the segments to the first start-of-frame marker.
            let mut at = 2;
            loop {
                if *bytes.get(at)? != 0xFF {
                    return None;
                }
                let marker = *bytes.get(at + 1)?;
                if marker == 0xFF {
                    at += 1;
                    continue;
                }
                let length = be16(at + 2)? as usize;
                let is_frame = matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
                if is_frame {
                    return Some((be16(at + 7)?, be16(at + 5)?));
                }
                at += 2 + length;
            }
        }
    }
}

/// An image to put into a request.
///
/// A file must be a regular file (not a pipe, a device or a directory) of at
/// most 32 MiB; anything else is refused before it is read.
///
/// ```no_run
/// # async fn demo() -> genapi::Result<()> {
/// use genapi::ImageInput;
/// let from_file = ImageInput::path("cat.png").to_base64().await?;
/// let from_url = ImageInput::url("https://example.com/cat.png").to_field(true).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub enum ImageInput {
    /// A file on disk.
    Path(std::path::PathBuf),
    /// Encoded image bytes (PNG, JPEG, WebP or GIF).
    Bytes(Vec<u8>),
    /// A public http(s) address, passed through for fields that take URLs.
    Url(String),
}

impl ImageInput {
    /// An image file.
    pub fn path(path: impl AsRef<Path>) -> Self {
        ImageInput::Path(path.as_ref().to_path_buf())
    }
    /// Encoded image bytes.
    pub fn bytes(bytes: impl Into<Vec<u8>>) -> Self {
        ImageInput::Bytes(bytes.into())
    }
    /// A public http(s) URL.
    pub fn url(url: impl Into<String>) -> Self {
        ImageInput::Url(url.into())
    }

    fn name(&self) -> String {
        match self {
            // A path may be an address of another scheme (`s3://…`), or a
            // mistyped one: shown by the address rule all the same.
            ImageInput::Path(path) => genapi_text::addresses_shown(&path.display().to_string()),
            ImageInput::Bytes(_) => "bytes".to_string(),
            // A presigned address's query is a credential: shown without it.
            ImageInput::Url(url) => genapi_text::shown_address(url),
        }
    }

    /// Raw base64 of the image (no `data:` prefix); a URL is refused.
    pub async fn to_base64(&self) -> Result<String> {
        self.to_field(false).await
    }

    /// What a user wrote for an image: an http(s) URL, or a file path
    /// (relative to `base_dir`, such as the directory of a job file).
    ///
    /// ```
    /// use genapi::ImageInput;
    /// assert!(matches!(ImageInput::from_source("https://example.com/a.png", "."), ImageInput::Url(_)));
    /// assert!(matches!(ImageInput::from_source("a.png", "jobs"), ImageInput::Path(p) if p.ends_with("jobs/a.png")));
    /// ```
    pub fn from_source(source: &str, base_dir: impl AsRef<Path>) -> Self {
        // A scheme is read as URLs read it: whatever its case, after any
        // leading space.
        let trimmed = source.trim_start();
        let scheme = trimmed.split_once("://").map(|(scheme, _)| scheme.to_ascii_lowercase());
        if matches!(scheme.as_deref(), Some("http" | "https")) {
            ImageInput::url(trimmed)
        } else {
            ImageInput::path(base_dir.as_ref().join(source))
        }
    }

    /// The value for a field: base64, or the URL itself when `accepts_url`.
    pub async fn to_field(&self, accepts_url: bool) -> Result<String> {
        match self {
            ImageInput::Url(url) => self.url_field(url, accepts_url),
            ImageInput::Bytes(bytes) => self.encoded(bytes),
            ImageInput::Path(path) => {
                let (input, path) = (self.clone(), path.clone());
                let bytes = tokio::task::spawn_blocking(move || input.read_file(&path))
                    .await
                    .map_err(|e| self.refused(format!("the file could not be read ({e})")))??;
                self.encoded(&bytes)
            }
        }
    }

    /// [`ImageInput::to_field`], reading a file with blocking I/O (for
    /// code that reads its inputs before any runtime runs, or off it).
    pub fn to_field_blocking(&self, accepts_url: bool) -> Result<String> {
        match self {
            ImageInput::Url(url) => self.url_field(url, accepts_url),
            ImageInput::Bytes(bytes) => self.encoded(bytes),
            ImageInput::Path(path) => self.encoded(&self.read_file(path)?),
        }
    }

    /// The bytes of an image file, by the file policy of `genapi-files`: a
    /// regular file (opened without blocking, so a named pipe cannot hang the
    /// read) of at most [`MAX_IMAGE_FILE_BYTES`], read no further than that.
    fn read_file(&self, path: &Path) -> Result<Vec<u8>> {
        genapi_files::read(path, MAX_IMAGE_FILE_BYTES).map_err(|refused| match refused {
            genapi_files::FileError::Io { source, .. } => self.cannot_read(source),
            other => self.refused(other.reason()),
        })
    }

    fn refused(&self, message: String) -> Error {
        Error::Input {
            source_name: self.name(),
            message,
        }
    }

    fn cannot_read(&self, error: std::io::Error) -> Error {
        self.refused(format!("cannot read the file ({error})"))
    }

    /// A URL, passed on as it is where the field takes one.
    fn url_field(&self, url: &str, accepts_url: bool) -> Result<String> {
        let parsed = reqwest::Url::parse(url).map_err(|e| self.refused(format!("not a valid URL ({e})")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(self.refused("only http and https URLs are accepted".into()));
        }
        if !accepts_url {
            return Err(self.refused(
                "this field takes a file, not a URL; download the image and pass the file or its bytes".into(),
            ));
        }
        // The parser drops tabs and line breaks the text still has, and
        // the text is what is sent.
        if url.chars().any(char::is_control) {
            return Err(self.refused("the URL has control characters (a tab or a line break?)".into()));
        }
        Ok(url.to_string())
    }

    /// Raw base64 of image bytes, checked by their first bytes.
    fn encoded(&self, bytes: &[u8]) -> Result<String> {
        if ImageFormat::sniff(bytes).is_none() {
            return Err(self.refused("not a PNG, JPEG, WebP or GIF image (checked by its first bytes)".into()));
        }
        Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
    }
}

/// Why a base64 field value is not an image.
pub(crate) fn base64_problem(value: &str) -> Option<&'static str> {
    if value.starts_with("data:") {
        return Some("remove the `data:…;base64,` prefix: the field takes raw base64");
    }
    if value.is_empty() {
        return Some("the image is empty");
    }
    let valid_alphabet = value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'\n' | b'\r'));
    if !valid_alphabet {
        return Some("not valid base64");
    }
    let Some(head) = decode_head(value) else {
        return Some("not valid base64");
    };
    if ImageFormat::sniff(&head).is_none() {
        return Some("the data is not a PNG, JPEG, WebP or GIF image");
    }
    None
}

/// Width and height of a base64 image, as an image field holds it, read
/// from its header; `None` when it is not base64 of a known format.
pub(crate) fn base64_dimensions(value: &str) -> Option<(u32, u32)> {
    dimensions(&decode_head(value)?)
}

/// Decodes the start of a base64 value (enough for the header), or `None`
/// when it is not base64.
pub(crate) fn decode_head(value: &str) -> Option<Vec<u8>> {
    const HEAD: usize = 256 * 1024;
    let clean: String = value.chars().filter(|c| !c.is_ascii_whitespace()).take(HEAD).collect();
    let engine = &base64::engine::general_purpose::STANDARD;
    if clean.len() < HEAD {
        return engine.decode(clean.as_bytes()).ok().or_else(|| {
            base64::engine::general_purpose::STANDARD_NO_PAD
                .decode(clean.trim_end_matches('='))
                .ok()
        });
    }
    engine.decode(&clean.as_bytes()[..HEAD]).ok()
}

/// The extension of a result's format from its first bytes: `jpg`, `png`,
/// `webp`, `gif` or `mp4`; `None` for bytes in no image or video format.
pub(crate) fn extension_of(head: &[u8]) -> Option<&'static str> {
    if let Some(format) = ImageFormat::sniff(head) {
        return Some(format.extension());
    }
    (head.get(4..8) == Some(b"ftyp")).then_some("mp4")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn videos_and_images_are_recognised() {
        assert_eq!(extension_of(b"\0\0\0\x18ftypmp42"), Some("mp4"));
        assert_eq!(extension_of(&[0xFF, 0xD8, 0xFF, 0xE0]), Some("jpg"));
        assert_eq!(extension_of(b"text"), None);
    }

    #[test]
    fn sizes_are_read_from_headers_and_a_cut_header_is_no_size() {
        let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
        assert_eq!(base64_dimensions(png), Some((1, 1)));
        assert_eq!(base64_dimensions("not an image"), None);
        assert_eq!(dimensions(b"GIF89a\x40\x01\xf0\x00"), Some((320, 240)));
        assert_eq!(
            dimensions(&[0xFF, 0xD8, 0xFF]),
            None,
            "a truncated header is no size, not a panic"
        );
    }

    /// An address is one whatever the case of its scheme or a space before
    /// it, and a path shaped like another scheme's address is shown by the
    /// address rule: its password and signature never reach an error.
    #[test]
    fn an_address_written_unusually_never_shows_its_secrets() {
        let secret = "user:Pa55w0rd-x@files.example.com/in.png?X-Amz-Signature=SIGSECRETXYZ";
        for source in [
            format!("HTTPS://{secret}"),
            format!(" https://{secret}"),
            format!("Http://{secret}"),
        ] {
            let input = ImageInput::from_source(&source, "jobs");
            assert!(matches!(input, ImageInput::Url(_)), "{source}");
            let name = input.name();
            assert!(!name.contains("Pa55w0rd") && !name.contains("SIGSECRET"), "{name}");
        }
        for source in [format!("s3://{secret}"), format!("ftp://{secret}")] {
            let name = ImageInput::from_source(&source, "jobs").name();
            assert!(!name.contains("Pa55w0rd") && !name.contains("SIGSECRET"), "{name}");
        }
    }
}
