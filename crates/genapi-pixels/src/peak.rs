//! What decoding an image takes: the most memory each codec holds at once,
//! estimated from the image's header alone, before anything is decoded.
//!
//! A header may claim any size, and what a codec holds is not only the
//! pixels it returns: a progressive JPEG keeps every coefficient of every
//! component (two bytes each) until its last scan, a 16-bit PNG unfilters
//! rows of two bytes a sample, a lossy WebP keeps its planes beside its
//! output. Each estimate counts those buffers, rounded up, so an image
//! whose estimate fits a bound is decoded within it. The figures follow
//! the codecs' own allocations (png 0.18, zune-jpeg 0.5, image-webp 0.2);
//! the tests measure them against the estimates.

/// What decoding an image takes, from its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cost {
    /// The width the header claims.
    pub(crate) width: u32,
    /// The height.
    pub(crate) height: u32,
    /// The most bytes the codec holds at once, its output included.
    pub(crate) decoder: u64,
}

impl Cost {
    /// Pixels of a `width` × `height` image.
    pub(crate) fn pixels(width: u32, height: u32) -> u64 {
        width as u64 * height as u64
    }

    /// Also holding a picture of `pixels` pixels (three bytes each) beside
    /// the decoder's output.
    pub(crate) fn with_picture_of(&self, pixels: u64) -> u64 {
        self.decoder.saturating_add(pixels.saturating_mul(3))
    }
}

/// The room a PNG's decoder may use for the chunks it keeps whole (a
/// palette, EXIF data) beside one output row; the text and ICC chunks,
/// which inflate, are skipped unread (see `decode`).
pub(crate) const PNG_METADATA_BYTES: u64 = 256 << 10;

/// A PNG, from its header: the output at 8 bits a sample (transparency may
/// add a channel), and the rows the decoder unfilters at the image's own
/// depth (inflated data of a few rows or at least 128 KiB of them, as much
/// again of inflate's window and room to grow, and rows beside it for the
/// row before and the row converted).
pub(crate) fn png(info: &png::Info<'_>) -> Cost {
    let (width, height) = (info.width, info.height);
    let channels: u64 = match info.color_type {
        png::ColorType::Grayscale | png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb | png::ColorType::Rgba | png::ColorType::Indexed => 4,
    };
    let bits = info.color_type.samples() as u64 * info.bit_depth as u64;
    // A header may say up to 2³¹ a side: the products saturate.
    let row = (width as u64 * bits).div_ceil(8) + 1;
    let output = Cost::pixels(width, height).saturating_mul(channels);
    let inflated = row
        .saturating_mul(height as u64)
        .min((4 * row).max(128 << 10) + (64 << 10));
    let rows = inflated + 4 * row;
    let metadata = PNG_METADATA_BYTES + width as u64 * 8;
    Cost {
        width,
        height,
        decoder: output.saturating_add(rows + metadata),
    }
}

/// A JPEG, from its frame header: the RGB output; every coefficient of
/// every component, two bytes each, padded to whole blocks, when the image
/// is progressive or has more than one component (a baseline image whose
/// components come in separate scans is held whole too, and which one is
/// not known before its first scan); a few rows of blocks per component
/// for upsampling; and the file again, for the metadata segments the
/// decoder copies.
pub(crate) fn jpeg(info: &zune_jpeg::ImageInfo, file: usize) -> Cost {
    let (width, height) = (u32::from(info.width), u32::from(info.height));
    let components = u64::from(info.components.max(1));
    let padded = (width as u64).next_multiple_of(32) * (height as u64).next_multiple_of(32);
    let whole = info.sof.is_progressive() || components > 1;
    let coefficients = if whole { components * padded * 2 } else { 0 };
    let rows = components * (width as u64).next_multiple_of(32) * 512;
    Cost {
        width,
        height,
        decoder: Cost::pixels(width, height) * 3 + coefficients + rows + file as u64,
    }
}

/// What kind of WebP image a header announces.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WebPKind {
    /// VP8 (lossy) rather than VP8L (lossless).
    pub(crate) lossy: bool,
    /// With an alpha channel (output of four bytes a pixel).
    pub(crate) alpha: bool,
    /// Animated (frames composed on a canvas).
    pub(crate) animated: bool,
}

/// A WebP, from its header: the output; a lossy frame's planes (a byte a
/// pixel of luma and half of chroma, in whole 16 × 16 blocks) and its
/// alpha plane (a lossless stream decoded as RGBA, then kept as one byte a
/// pixel); a lossless stream's RGBA and its smaller images; an animation's
/// canvas and frame beside them; the file twice, as its data is read and
/// copied into partitions; and `codes`, what its lossless streams' prefix
/// codes take (see `webp_codes`), which its header does not say.
pub(crate) fn webp(width: u32, height: u32, kind: WebPKind, file: usize, codes: u64) -> Cost {
    let pixels = Cost::pixels(width, height);
    let padded = (width as u64).next_multiple_of(16) * (height as u64).next_multiple_of(16);
    // A lossless stream's smaller images, by blocks of 4 × 4 pixels at the
    // finest: a predictor's and a colour transform's (four bytes a block),
    // the entropy image (six), and a palette.
    let blocks = (width as u64).div_ceil(4) * (height as u64).div_ceil(4);
    let small_images = blocks * 14 + 1024;
    let output = pixels * if kind.alpha { 4 } else { 3 };
    let lossy = padded * 3 / 2 + if kind.alpha { pixels * 5 + small_images } else { 0 };
    let lossless = pixels * 4 + small_images;
    let frame = if kind.animated {
        // Canvas and frame, and either kind of frame.
        pixels * 8 + lossy.max(lossless)
    } else if kind.lossy {
        lossy
    } else {
        lossless
    };
    Cost {
        width,
        height,
        decoder: (output + frame + 2 * file as u64).saturating_add(codes),
    }
}
