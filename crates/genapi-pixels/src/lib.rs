//! The pictures genapi makes and reads: the mock service's images and the
//! gallery's thumbnails.
//!
//! Both need little: an 8-bit RGB picture ([`Picture`]), read from PNG,
//! JPEG or WebP within a bound on what decoding may take (a header may
//! claim any size), made smaller ([`Picture::fit_within`]), and written as
//! PNG, JPEG or lossless WebP. The codecs are the ones the `image` crate
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
//! # Ok::<(), genapi_pixels::PictureError>(())
//! ```

mod decode;
mod encode;

pub use decode::dimensions;

/// Why a picture cannot be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PictureError {
    /// Not a PNG, JPEG or WebP image.
    #[error("not a PNG, JPEG or WebP image")]
    Format,
    /// Decoding it would take more memory than allowed.
    #[error("a {width}×{height} image is more than the {limit} bytes allowed to decode it")]
    TooLarge {
        /// Its width, as its header says.
        width: u32,
        /// Its height.
        height: u32,
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

    /// The picture made smaller to fit within `side` × `side`, its shape
    /// kept (each pixel the average of those it covers); unchanged when it
    /// fits already.
    pub fn fit_within(&self, side: u32) -> Picture {
        let side = side.max(1);
        if self.width <= side && self.height <= side {
            return self.clone();
        }
        let scale = side as f64 / self.width.max(self.height) as f64;
        let width = ((self.width as f64 * scale).round() as u32).clamp(1, side);
        let height = ((self.height as f64 * scale).round() as u32).clamp(1, side);
        let span = |out: u32, size: u32, of: u32| {
            let from = (out as u64 * of as u64 / size as u64) as u32;
            let to = (((out + 1) as u64 * of as u64).div_ceil(size as u64) as u32).max(from + 1);
            from..to.min(of)
        };
        Picture::from_fn(width, height, |x, y| {
            let (columns, rows) = (span(x, width, self.width), span(y, height, self.height));
            let mut sum = [0u64; 3];
            let mut count = 0u64;
            for sy in rows {
                for sx in columns.clone() {
                    let pixel = self.get(sx, sy);
                    for channel in 0..3 {
                        sum[channel] += pixel[channel] as u64;
                    }
                    count += 1;
                }
            }
            sum.map(|total| (total / count.max(1)) as u8)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
