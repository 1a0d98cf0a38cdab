//! The pictures genapi makes and reads: the mock service's images and the
//! gallery's thumbnails.
//!
//! Both need little: an 8-bit RGB picture ([`Picture`]), read from PNG,
//! JPEG or WebP within a bound on what decoding may take, made smaller
//! ([`Picture::fit_within`], or while reading: [`Picture::thumbnail`]), and
//! written as PNG, JPEG or lossless WebP.
//!
//! A header may claim any size, and a decoder holds more than the pixels
//! it returns (a progressive JPEG's coefficients, a 16-bit PNG's rows, a
//! WebP's planes, and a lossless WebP's prefix codes, which its header
//! does not say and a file of 700 KB may make take 4 GiB): the bound counts
//! all of it, estimated before anything is decoded, so a file of a few
//! hundred bytes claiming 8000 × 8000 pixels is refused at once
//! ([`PictureError::TooLarge`]). Metadata is not decoded: a PNG's text and
//! ICC chunks, which may inflate a thousand times, are skipped unread. The codecs are the ones the `image` crate
//! wraps (`png`, `zune-jpeg`, `image-webp`) and `jpeg-encoder`; `image`
//! itself, with its colour management and other formats, is left out,
//! which keeps the command's first build about 20 s of CPU shorter.
//!
//! ```
//! use genapi_pixels::Picture;
//! let red = Picture::from_fn(400, 200, |_, _| [250, 0, 0]);
//! let png = red.to_png()?;
//! let read = Picture::decode(&png, 1 << 20)?;
//! assert_eq!(read.fit_within(100).dimensions(), (100, 50));
//! assert_eq!(Picture::thumbnail(&png, 100, 1 << 20)?, read.fit_within(100));
//! # Ok::<(), genapi_pixels::PictureError>(())
//! ```

mod decode;
mod encode;
mod peak;
mod shrink;
mod webp_codes;

#[cfg(test)]
mod counting;
#[cfg(test)]
mod decoding_is_bounded;
#[cfg(test)]
mod hostile;

pub use decode::dimensions;

/// A bound on what making a thumbnail takes ([`Picture::thumbnail`]) that
/// an image of up to 4 MP fits in any format read (a 2048 × 2048 JPEG,
/// progressive or not, is estimated at about 42 MB; a 16-bit RGBA PNG, 18):
/// the service's results, and no image claiming much more.
pub const THUMBNAIL_BYTES: u64 = 48 << 20;

// `{:?}` (what `?` in `main` prints) says what to do first, then the causes.
genapi_text::debug_as_report!(PictureError);

/// Why a picture cannot be read or written.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum PictureError {
    /// Not a PNG, JPEG or WebP image.
    #[error("not a PNG, JPEG or WebP image")]
    Format,
    /// Decoding it would take more memory than allowed: what its header
    /// claims is refused before anything is decoded.
    #[error("a {width}×{height} image takes {} to decode, more than the {} allowed", mebibytes(*.needs), mebibytes(*.limit))]
    TooLarge {
        /// Its width, as its header says.
        width: u32,
        /// Its height.
        height: u32,
        /// What decoding it would take, in bytes: the codec's own buffers
        /// as well as the pixels (see [`Picture::decode`]).
        needs: u64,
        /// The bound, in bytes.
        limit: u64,
    },
    /// The codec refused it.
    #[error("{0}")]
    Codec(String),
}

/// An 8-bit RGB picture, rows top to bottom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Picture {
    width: u32,
    height: u32,
    rgb: Vec<u8>,
}

impl Picture {
    /// A picture of `width` × `height` (each at least 1) whose pixel at
    /// `(x, y)` is `colour(x, y)`.
    pub fn from_fn(width: u32, height: u32, mut colour: impl FnMut(u32, u32) -> [u8; 3]) -> Picture {
        let (width, height) = (width.max(1), height.max(1));
        let mut rgb = Vec::with_capacity(width as usize * height as usize * 3);
        for y in 0..height {
            for x in 0..width {
                rgb.extend_from_slice(&colour(x, y));
            }
        }
        Picture { width, height, rgb }
    }

    /// A picture of decoded samples, three a pixel (any beyond the
    /// picture's are dropped, any missing are black).
    pub(crate) fn from_rgb(width: u32, height: u32, mut rgb: Vec<u8>) -> Picture {
        rgb.resize(width as usize * height as usize * 3, 0);
        Picture { width, height, rgb }
    }

    /// Width and height.
    pub fn dimensions(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    /// The pixel at `(x, y)`; black outside the picture.
    pub fn get(&self, x: u32, y: u32) -> [u8; 3] {
        self.index(x, y)
            .map_or([0, 0, 0], |at| [self.rgb[at], self.rgb[at + 1], self.rgb[at + 2]])
    }

    /// Sets the pixel at `(x, y)`; nothing outside the picture.
    pub fn put(&mut self, x: u32, y: u32, colour: [u8; 3]) {
        if let Some(at) = self.index(x, y) {
            self.rgb[at..at + 3].copy_from_slice(&colour);
        }
    }

    /// The samples, three a pixel, rows top to bottom.
    pub fn as_rgb(&self) -> &[u8] {
        &self.rgb
    }

    fn index(&self, x: u32, y: u32) -> Option<usize> {
        (x < self.width && y < self.height).then(|| (y as usize * self.width as usize + x as usize) * 3)
    }
}

/// A number of bytes as people read it.
fn mebibytes(bytes: u64) -> String {
    match bytes {
        0..1_048_576 => format!("{bytes} bytes"),
        _ => format!("{} MiB", bytes.div_ceil(1 << 20)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_picture_that_cannot_be_read_says_so_first_when_printed_with_debug() {
        let error = Picture::decode(b"not a picture", 1 << 20).unwrap_err();
        assert_eq!(format!("{error:?}"), error.to_string());
    }

    #[test]
    fn a_picture_is_made_smaller_by_averaging_and_keeps_its_shape() {
        let stripes = Picture::from_fn(4, 2, |x, _| if x % 2 == 0 { [200, 0, 0] } else { [0, 0, 100] });
        let half = stripes.fit_within(2);
        assert_eq!(half.dimensions(), (2, 1));
        assert_eq!(half.get(0, 0), [100, 0, 50]);
        assert_eq!(stripes.fit_within(10), stripes, "already within");
        let tall = Picture::from_fn(30, 900, |_, _| [1, 2, 3]);
        assert_eq!(tall.fit_within(192).dimensions(), (6, 192));
        assert_eq!(tall.get(99, 0), [0, 0, 0], "outside is black");
    }

    #[test]
    fn every_format_is_written_and_read_back() {
        let picture = Picture::from_fn(64, 48, |x, y| [(x * 4) as u8, (y * 5) as u8, 90]);
        let png = picture.to_png().unwrap();
        assert_eq!(Picture::decode(&png, 1 << 20).unwrap(), picture, "PNG is lossless");
        let webp = picture.to_webp().unwrap();
        assert_eq!(Picture::decode(&webp, 1 << 20).unwrap(), picture, "so is this WebP");
        let jpeg = picture.to_jpeg(90).unwrap();
        let read = Picture::decode(&jpeg, 1 << 20).unwrap();
        assert_eq!(read.dimensions(), (64, 48));
        let close = |a: u8, b: u8| a.abs_diff(b) <= 12;
        let (p, q) = (picture.get(20, 20), read.get(20, 20));
        assert!((0..3).all(|c| close(p[c], q[c])), "{p:?} {q:?}");
        for bytes in [&png, &webp, &jpeg] {
            assert_eq!(dimensions(bytes).unwrap(), (64, 48));
        }
    }

    #[test]
    fn a_picture_too_large_to_decode_is_refused_before_decoding() {
        let picture = Picture::from_fn(300, 300, |_, _| [0, 0, 0]);
        for bytes in [
            picture.to_png().unwrap(),
            picture.to_jpeg(80).unwrap(),
            picture.to_webp().unwrap(),
        ] {
            assert!(matches!(
                Picture::decode(&bytes, 100_000),
                Err(PictureError::TooLarge {
                    width: 300,
                    height: 300,
                    ..
                })
            ));
        }
        assert!(matches!(
            Picture::decode(b"not an image", 1 << 20),
            Err(PictureError::Format)
        ));
        assert!(Picture::decode(&[0x89, b'P', b'N', b'G', 0, 0], 1 << 20).is_err());
    }
}
