//! Reading a picture: the format from its first bytes, what decoding it
//! takes from its header (see `peak`), and the samples only when that fits.
//!
//! Metadata is not decoded: a PNG's text and ICC chunks (which inflate, a
//! kilobyte to hundreds of megabytes) are skipped unread, and what else a
//! PNG decoder keeps is held to a small allowance.

use std::io::Cursor;

use crate::peak::{self, Cost};
use crate::shrink::shrunk;
use crate::{Picture, PictureError};

/// The formats read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Png,
    Jpeg,
    WebP,
}

fn format_of(bytes: &[u8]) -> Result<Format, PictureError> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Ok(Format::Png)
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Ok(Format::Jpeg)
    } else if bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WEBP") {
        Ok(Format::WebP)
    } else {
        Err(PictureError::Format)
    }
}

fn codec(error: impl std::fmt::Display) -> PictureError {
    PictureError::Codec(error.to_string())
}

/// Width and height, from the header alone.
///
/// ```
/// let png = genapi_pixels::Picture::from_fn(30, 20, |_, _| [0, 0, 0]).to_png()?;
/// assert_eq!(genapi_pixels::dimensions(&png)?, (30, 20));
/// # Ok::<(), genapi_pixels::PictureError>(())
/// ```
pub fn dimensions(bytes: &[u8]) -> Result<(u32, u32), PictureError> {
    cost(bytes).map(|cost| (cost.width, cost.height))
}

/// What decoding `bytes` takes, from the header alone.
pub(crate) fn cost(bytes: &[u8]) -> Result<Cost, PictureError> {
    match format_of(bytes)? {
        Format::Png => png_cost(&mut png_decoder(bytes)),
        Format::Jpeg => jpeg_cost(&mut jpeg_decoder(bytes), bytes.len()),
        Format::WebP => webp_cost(&mut webp_decoder(bytes)?, bytes),
    }
}

/// Refuses what takes more than `limit` bytes: `needs`, for an image of
/// `cost`'s size.
fn within(cost: &Cost, needs: u64, limit: u64) -> Result<(), PictureError> {
    if needs > limit {
        return Err(PictureError::TooLarge {
            width: cost.width,
            height: cost.height,
            needs,
            limit,
        });
    }
    Ok(())
}

impl Picture {
    /// The picture in `bytes` (PNG, JPEG or WebP), when decoding it takes
    /// at most `limit` bytes. What it takes is estimated from the header
    /// before anything is decoded, and counts what the codec holds beside
    /// the pixels (a progressive JPEG's coefficients, a 16-bit PNG's rows,
    /// a WebP's planes and a lossless one's prefix codes, read from its
    /// stream) as well as the picture made from them, so an image
    /// claiming enormous dimensions is refused, not decoded. Metadata (a
    /// PNG's text and ICC profile) is not decoded. Transparency is dropped
    /// (alpha is ignored) and grey becomes RGB.
    pub fn decode(bytes: &[u8], limit: u64) -> Result<Picture, PictureError> {
        let picture = |cost: &Cost| cost.with_picture_of(Cost::pixels(cost.width, cost.height));
        let samples = samples(bytes, |cost| within(cost, picture(cost), limit))?;
        if samples.channels == 3 {
            let Samples {
                width, height, data, ..
            } = samples;
            return Ok(Picture::from_rgb(width, height, data));
        }
        Ok(Picture::from_fn(samples.width, samples.height, |x, y| {
            samples.rgb(x, y)
        }))
    }

    /// The picture in `bytes` made to fit within `side` × `side`, as
    /// [`Picture::fit_within`] makes it, when decoding takes at most `limit`
    /// bytes: what the codec holds (as for [`Picture::decode`]) and the
    /// small picture, never a full-size one, so a thumbnail is made within
    /// less than a full decode of the same image takes.
    pub fn thumbnail(bytes: &[u8], side: u32, limit: u64) -> Result<Picture, PictureError> {
        let small = Cost::pixels(side.max(1), side.max(1));
        let samples = samples(bytes, |cost| within(cost, cost.with_picture_of(small), limit))?;
        Ok(shrunk(samples.width, samples.height, side, |x, y| samples.rgb(x, y)))
    }
}

/// Decoded samples, `channels` a pixel (grey, grey and alpha, RGB or RGBA),
/// rows top to bottom.
pub(crate) struct Samples {
    pub(crate) width: u32,
    pub(crate) height: u32,
    pub(crate) channels: usize,
    pub(crate) data: Vec<u8>,
}

impl Samples {
    /// The pixel at `(x, y)` as RGB (grey repeated, alpha ignored).
    pub(crate) fn rgb(&self, x: u32, y: u32) -> [u8; 3] {
        let at = (y as usize * self.width as usize + x as usize) * self.channels;
        match (self.channels, self.data.get(at..at + self.channels)) {
            (1 | 2, Some(pixel)) => [pixel[0]; 3],
            (_, Some(pixel)) => [pixel[0], pixel[1], pixel[2]],
            (_, None) => [0, 0, 0],
        }
    }
}

/// The samples of `bytes`, decoded when `allowed` accepts what that takes.
pub(crate) fn samples(
    bytes: &[u8],
    allowed: impl FnOnce(&Cost) -> Result<(), PictureError>,
) -> Result<Samples, PictureError> {
    let samples = match format_of(bytes)? {
        Format::Png => png_samples(bytes, allowed)?,
        Format::Jpeg => jpeg_samples(bytes, allowed)?,
        Format::WebP => webp_samples(bytes, allowed)?,
    };
    let pixels = samples.width as usize * samples.height as usize;
    if !(1..=4).contains(&samples.channels) || samples.data.len() < pixels * samples.channels {
        return Err(PictureError::Codec(
            "the image has fewer pixels than its header says".into(),
        ));
    }
    Ok(samples)
}

/// A PNG decoder that skips text and ICC chunks, keeps other chunks within
/// [`peak::PNG_METADATA_BYTES`] and gives 8-bit samples.
fn png_decoder(bytes: &[u8]) -> png::Decoder<Cursor<&[u8]>> {
    let allowance = png::Limits {
        bytes: usize::try_from(peak::PNG_METADATA_BYTES).unwrap_or(usize::MAX),
    };
    let mut decoder = png::Decoder::new_with_limits(Cursor::new(bytes), allowance);
    decoder.set_ignore_text_chunk(true);
    decoder.set_ignore_iccp_chunk(true);
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    decoder
}

fn png_cost(decoder: &mut png::Decoder<Cursor<&[u8]>>) -> Result<Cost, PictureError> {
    decoder.read_header_info().map(peak::png).map_err(codec)
}

fn png_samples(bytes: &[u8], allowed: impl FnOnce(&Cost) -> Result<(), PictureError>) -> Result<Samples, PictureError> {
    let mut decoder = png_decoder(bytes);
    let cost = png_cost(&mut decoder)?;
    allowed(&cost)?;
    // The allowance had no room for the output row until the size was known.
    decoder.set_limits(png::Limits {
        bytes: usize::try_from(peak::PNG_METADATA_BYTES + cost.width as u64 * 8).unwrap_or(usize::MAX),
    });
    let mut reader = decoder.read_info().map_err(codec)?;
    let size = reader.output_buffer_size().ok_or(PictureError::Format)?;
    let mut data = vec![0; size];
    let frame = reader.next_frame(&mut data).map_err(codec)?;
    data.truncate(frame.buffer_size());
    Ok(Samples {
        width: frame.width,
        height: frame.height,
        channels: frame.color_type.samples(),
        data,
    })
}

fn jpeg_decoder(bytes: &[u8]) -> zune_jpeg::JpegDecoder<Cursor<&[u8]>> {
    let options =
        zune_core::options::DecoderOptions::default().jpeg_set_out_colorspace(zune_core::colorspace::ColorSpace::RGB);
    zune_jpeg::JpegDecoder::new_with_options(Cursor::new(bytes), options)
}

fn jpeg_cost(decoder: &mut zune_jpeg::JpegDecoder<Cursor<&[u8]>>, file: usize) -> Result<Cost, PictureError> {
    decoder.decode_headers().map_err(codec)?;
    let info = decoder.info().ok_or(PictureError::Format)?;
    Ok(peak::jpeg(&info, file))
}

fn jpeg_samples(
    bytes: &[u8],
    allowed: impl FnOnce(&Cost) -> Result<(), PictureError>,
) -> Result<Samples, PictureError> {
    let mut decoder = jpeg_decoder(bytes);
    let cost = jpeg_cost(&mut decoder, bytes.len())?;
    allowed(&cost)?;
    Ok(Samples {
        width: cost.width,
        height: cost.height,
        channels: 3,
        data: decoder.decode().map_err(codec)?,
    })
}

fn webp_decoder(bytes: &[u8]) -> Result<image_webp::WebPDecoder<Cursor<&[u8]>>, PictureError> {
    image_webp::WebPDecoder::new(Cursor::new(bytes)).map_err(codec)
}

fn webp_cost(decoder: &mut image_webp::WebPDecoder<Cursor<&[u8]>>, bytes: &[u8]) -> Result<Cost, PictureError> {
    let (width, height) = decoder.dimensions();
    let kind = peak::WebPKind {
        lossy: decoder.is_lossy(),
        alpha: decoder.has_alpha(),
        animated: decoder.is_animated(),
    };
    let codes = crate::webp_codes::lossless_codes(bytes, (width, height))?;
    Ok(peak::webp(width, height, kind, bytes.len(), codes))
}

fn webp_samples(
    bytes: &[u8],
    allowed: impl FnOnce(&Cost) -> Result<(), PictureError>,
) -> Result<Samples, PictureError> {
    let mut decoder = webp_decoder(bytes)?;
    let cost = webp_cost(&mut decoder, bytes)?;
    allowed(&cost)?;
    let size = decoder.output_buffer_size().ok_or(PictureError::Format)?;
    let mut data = vec![0; size];
    decoder.read_image(&mut data).map_err(codec)?;
    Ok(Samples {
        width: cost.width,
        height: cost.height,
        channels: if decoder.has_alpha() { 4 } else { 3 },
        data,
    })
}
