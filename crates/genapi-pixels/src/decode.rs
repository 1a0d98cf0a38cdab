//! Reading a picture: the format from its first bytes, the size from its
//! header, and the pixels only when they fit the bound given.

use std::io::Cursor;

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
    match format_of(bytes)? {
        Format::Png => {
            let reader = png::Decoder::new(Cursor::new(bytes)).read_info().map_err(codec)?;
            Ok((reader.info().width, reader.info().height))
        }
        Format::Jpeg => {
            let mut decoder = zune_jpeg::JpegDecoder::new(Cursor::new(bytes));
            decoder.decode_headers().map_err(codec)?;
            let (width, height) = decoder.dimensions().ok_or(PictureError::Format)?;
            Ok((width as u32, height as u32))
        }
        Format::WebP => {
            let decoder = image_webp::WebPDecoder::new(Cursor::new(bytes)).map_err(codec)?;
            Ok(decoder.dimensions())
        }
    }
}

/// Refuses a picture whose pixels would take more than `limit` bytes
/// (four a pixel, the most any decoder here writes).
fn within(width: u32, height: u32, limit: u64) -> Result<(), PictureError> {
    if width as u64 * height as u64 * 4 > limit {
        return Err(PictureError::TooLarge { width, height, limit });
    }
    Ok(())
}

impl Picture {
    /// The picture in `bytes` (PNG, JPEG or WebP), when decoding it takes
    /// at most `limit` bytes: the size its header claims is checked first,
    /// so an image claiming enormous dimensions is refused, not decoded.
    /// Transparency is dropped (alpha is ignored) and grey becomes RGB.
    pub fn decode(bytes: &[u8], limit: u64) -> Result<Picture, PictureError> {
        let (width, height) = dimensions(bytes)?;
        within(width, height, limit)?;
        let (samples, channels) = match format_of(bytes)? {
            Format::Png => {
                let mut decoder = png::Decoder::new_with_limits(
                    Cursor::new(bytes),
                    png::Limits {
                        bytes: usize::try_from(limit).unwrap_or(usize::MAX),
                    },
                );
                decoder.set_transformations(png::Transformations::normalize_to_color8());
                let mut reader = decoder.read_info().map_err(codec)?;
                let size = reader.output_buffer_size().ok_or(PictureError::Format)?;
                let mut buffer = vec![0; size];
                let frame = reader.next_frame(&mut buffer).map_err(codec)?;
                buffer.truncate(frame.buffer_size());
                (buffer, frame.color_type.samples())
            }
            Format::Jpeg => {
                let options = zune_core::options::DecoderOptions::default()
                    .jpeg_set_out_colorspace(zune_core::colorspace::ColorSpace::RGB);
                let mut decoder = zune_jpeg::JpegDecoder::new_with_options(Cursor::new(bytes), options);
                (decoder.decode().map_err(codec)?, 3)
            }
            Format::WebP => {
                let mut decoder = image_webp::WebPDecoder::new(Cursor::new(bytes)).map_err(codec)?;
                let channels = if decoder.has_alpha() { 4 } else { 3 };
                let size = decoder.output_buffer_size().ok_or(PictureError::Format)?;
                let mut buffer = vec![0; size];
                decoder.read_image(&mut buffer).map_err(codec)?;
                (buffer, channels)
            }
        };
        let pixels = width as usize * height as usize;
        if channels == 0 || samples.len() < pixels * channels {
            return Err(PictureError::Codec(
                "the image has fewer pixels than its header says".into(),
            ));
        }
        Ok(Picture::from_fn(width, height, |x, y| {
            let at = (y as usize * width as usize + x as usize) * channels;
            match channels {
                // Grey, with or without alpha.
                1 | 2 => [samples[at]; 3],
                _ => [samples[at], samples[at + 1], samples[at + 2]],
            }
        }))
    }
}
