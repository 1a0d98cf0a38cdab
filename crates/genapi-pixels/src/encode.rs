//! Writing a picture as PNG, JPEG or lossless WebP.

use crate::{Picture, PictureError};

fn codec(error: impl std::fmt::Display) -> PictureError {
    PictureError::Codec(error.to_string())
}

impl Picture {
    /// The picture as PNG.
    pub fn to_png(&self) -> Result<Vec<u8>, PictureError> {
        let mut out = Vec::new();
        let mut encoder = png::Encoder::new(&mut out, self.width, self.height);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().map_err(codec)?;
        writer.write_image_data(&self.rgb).map_err(codec)?;
        writer.finish().map_err(codec)?;
        Ok(out)
    }

    /// The picture as JPEG of `quality` (1 to 100); at most 65,535 pixels
    /// a side, as JPEG allows.
    pub fn to_jpeg(&self, quality: u8) -> Result<Vec<u8>, PictureError> {
        let side = |n: u32| u16::try_from(n).map_err(|_| PictureError::Codec(format!("{n} pixels: too wide for JPEG")));
        let (width, height) = (side(self.width)?, side(self.height)?);
        let mut out = Vec::new();
        jpeg_encoder::Encoder::new(&mut out, quality.clamp(1, 100))
            .encode(&self.rgb, width, height, jpeg_encoder::ColorType::Rgb)
            .map_err(codec)?;
        Ok(out)
    }

    /// The picture as lossless WebP.
    pub fn to_webp(&self) -> Result<Vec<u8>, PictureError> {
        let mut out = Vec::new();
        image_webp::WebPEncoder::new(&mut out)
            .encode(&self.rgb, self.width, self.height, image_webp::ColorType::Rgb8)
            .map_err(codec)?;
        Ok(out)
    }
}
