//! The mock's output images: deterministic for (seed, prompt, size), in the
//! requested format, and visibly marked "MOCK" so nobody mistakes one for a
//! real generation.

use image::{ImageEncoder, Rgb, RgbImage};

/// 5x7 glyphs of the letters used in the mark.
const GLYPHS: [(char, [u8; 7]); 4] = [
    ('M', [0b10001, 0b11011, 0b10101, 0b10101, 0b10001, 0b10001, 0b10001]),
    ('O', [0b01110, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01110]),
    ('C', [0b01110, 0b10001, 0b10000, 0b10000, 0b10000, 0b10001, 0b01110]),
    ('K', [0b10001, 0b10010, 0b10100, 0b11000, 0b10100, 0b10010, 0b10001]),
];

fn hash(seed: i64, prompt: &str) -> u64 {
    // FNV-1a: stable across runs and platforms.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in seed.to_le_bytes().iter().chain(prompt.as_bytes()) {
        h ^= *byte as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Renders the image and encodes it as `format` (`jpeg`, `png` or `webp`).
pub(crate) fn render(width: u32, height: u32, seed: i64, prompt: &str, format: &str) -> Result<Vec<u8>, String> {
    let h = hash(seed, prompt);
    let a = [(h >> 8) as u8, (h >> 16) as u8, (h >> 24) as u8];
    let b = [(h >> 32) as u8, (h >> 40) as u8, (h >> 48) as u8];
    let (w, ht) = (width.max(1), height.max(1));
    let span = (w + ht) as f32;
    let mut img = RgbImage::from_fn(w, ht, |x, y| {
        let t = (x + y) as f32 / span;
        Rgb([0, 1, 2].map(|i| (a[i] as f32 * (1.0 - t) + b[i] as f32 * t) as u8))
    });
    draw_mark(&mut img);
    let mut out = Vec::new();
    let result = match format {
        "png" => image::codecs::png::PngEncoder::new(&mut out).write_image(&img, w, ht, image::ExtendedColorType::Rgb8),
        "webp" => image::codecs::webp::WebPEncoder::new_lossless(&mut out).write_image(
            &img,
            w,
            ht,
            image::ExtendedColorType::Rgb8,
        ),
        _ => image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 85).write_image(
            &img,
            w,
            ht,
            image::ExtendedColorType::Rgb8,
        ),
    };
    result.map_err(|e| format!("cannot encode the mock image: {e}"))?;
    Ok(out)
}

/// White "MOCK" on a dark band across the middle.
fn draw_mark(img: &mut RgbImage) {
    let (w, h) = img.dimensions();
    let scale = (w / 40).min(h / 12).max(1);
    let text_w = 4 * 6 * scale;
    let text_h = 7 * scale;
    let band_top = (h / 2).saturating_sub(text_h);
    let band_bottom = (h / 2 + text_h).min(h);
    for y in band_top..band_bottom {
        for x in 0..w {
            img.put_pixel(x, y, Rgb([20, 20, 20]));
        }
    }
    let left = w.saturating_sub(text_w) / 2;
    let top = (h / 2).saturating_sub(text_h / 2);
    for (i, (_, rows)) in GLYPHS.iter().enumerate() {
        for (row, bits) in rows.iter().enumerate() {
            for col in 0..5u32 {
                if bits & (1 << (4 - col)) == 0 {
                    continue;
                }
                for dy in 0..scale {
                    for dx in 0..scale {
                        let x = left + (i as u32 * 6 + col) * scale + dx;
                        let y = top + row as u32 * scale + dy;
                        if x < w && y < h {
                            img.put_pixel(x, y, Rgb([255, 255, 255]));
                        }
                    }
                }
            }
        }
    }
}
