//! The size an image input claims in its header, as the service reads it to
//! check limits and bill input megapixels.
//!
//! Only the header is read: the service's limits (4 MP, same-size masks) are
//! about the size an image says it has, and tests send headers alone to
//! probe them. This reader is the mock's own, kept apart from the client's:
//! a misread shared by both would let every test pass.

/// Enough of the start of base64 text for any header the formats put first
/// (a multiple of four characters, so a cut needs no padding); the whole
/// image is never decoded for its size. `None` when it is not base64.
pub(crate) fn head(text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    const HEAD_CHARS: usize = 256 * 1024;
    let start: String = text
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .take(HEAD_CHARS)
        .collect();
    base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(start.trim_end_matches('='))
        .ok()
}

/// Whether bytes start as a PNG, JPEG, WebP or GIF image does.
pub(crate) fn is_image(head: &[u8]) -> bool {
    head.starts_with(b"\x89PNG\r\n\x1a\n")
        || head.starts_with(&[0xff, 0xd8, 0xff])
        || head.starts_with(b"GIF87a")
        || head.starts_with(b"GIF89a")
        || (head.starts_with(b"RIFF") && head.get(8..12) == Some(b"WEBP"))
}

/// Width and height from the start of a PNG, JPEG, WebP or GIF image.
pub(crate) fn of(head: &[u8]) -> Option<(u32, u32)> {
    let u16_be = |at: usize| Some(u16::from_be_bytes(head.get(at..at + 2)?.try_into().ok()?) as u32);
    let u16_le = |at: usize| Some(u16::from_le_bytes(head.get(at..at + 2)?.try_into().ok()?) as u32);
    let u32_be = |at: usize| Some(u32::from_be_bytes(head.get(at..at + 4)?.try_into().ok()?));
    let u24_le = |at: usize| {
        let b = head.get(at..at + 3)?;
        Some(b[0] as u32 | (b[1] as u32) << 8 | (b[2] as u32) << 16)
    };
    if head.starts_with(b"\x89PNG\r\n\x1a\n") && head.get(12..16) == Some(b"IHDR") {
        return Some((u32_be(16)?, u32_be(20)?));
    }
    if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        return Some((u16_le(6)?, u16_le(8)?));
    }
    if head.starts_with(b"RIFF") && head.get(8..12) == Some(b"WEBP") {
        return match head.get(12..16)? {
            b"VP8 " => Some((u16_le(26)? & 0x3fff, u16_le(28)? & 0x3fff)),
            b"VP8L" => {
                let bits = u16_le(21)? | u16_le(23)? << 16;
                Some((1 + (bits & 0x3fff), 1 + (bits >> 14 & 0x3fff)))
            }
            b"VP8X" => Some((1 + u24_le(24)?, 1 + u24_le(27)?)),
            _ => None,
        };
    }
    if head.starts_with(&[0xff, 0xd8]) {
        // Segments follow the start marker, each `FF xx` and a length that
        // counts itself; the first start-of-frame holds height then width.
        let mut at = 2;
        while head.get(at) == Some(&0xff) {
            let marker = *head.get(at + 1)?;
            if marker == 0xff {
                at += 1;
                continue;
            }
            let start_of_frame = (0xc0..=0xcf).contains(&marker) && ![0xc4, 0xc8, 0xcc].contains(&marker);
            if start_of_frame {
                return Some((u16_be(at + 7)?, u16_be(at + 5)?));
            }
            at += 2 + u16_be(at + 2)? as usize;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use image::ImageEncoder;

    /// Each format as the `image` crate writes it.
    fn encoded(format: image::ImageFormat, width: u32, height: u32) -> Vec<u8> {
        let pixels = vec![128u8; (width * height * 3) as usize];
        let mut out = Vec::new();
        let cursor = std::io::Cursor::new(&mut out);
        match format {
            image::ImageFormat::Png => image::codecs::png::PngEncoder::new(cursor).write_image(
                &pixels,
                width,
                height,
                image::ExtendedColorType::Rgb8,
            ),
            image::ImageFormat::Jpeg => image::codecs::jpeg::JpegEncoder::new(cursor).write_image(
                &pixels,
                width,
                height,
                image::ExtendedColorType::Rgb8,
            ),
            _ => image::codecs::webp::WebPEncoder::new_lossless(cursor).write_image(
                &pixels,
                width,
                height,
                image::ExtendedColorType::Rgb8,
            ),
        }
        .unwrap();
        out
    }

    #[test]
    fn reads_the_size_each_format_writes() {
        for format in [
            image::ImageFormat::Png,
            image::ImageFormat::Jpeg,
            image::ImageFormat::WebP,
        ] {
            assert_eq!(super::of(&encoded(format, 33, 17)), Some((33, 17)), "{format:?}");
        }
        assert_eq!(super::of(b"GIF89a\x05\x00\x07\x00"), Some((5, 7)));
        assert_eq!(super::of(b"not an image"), None);
        assert_eq!(super::of(&[0xff, 0xd8, 0xff]), None, "a cut JPEG");
    }
}
