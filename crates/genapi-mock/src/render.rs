//! The mock's output images: deterministic for (seed, prompt, size, input),
//! in the requested format, visibly marked "MOCK" so nobody mistakes one for
//! a real generation, and captioned with their seed and prompt so two tiles
//! of a gallery can be told apart. An edit's image shows its input, small,
//! in a framed box at its top left, and says EDIT: it visibly used what it
//! was given.

use genapi_pixels::Picture;

/// 5x7 glyphs: capital letters, digits and a few signs; anything else is
/// drawn as a space.
const GLYPHS: [(char, [u8; 7]); 40] = [
    ('A', [0b01110, 0b10001, 0b10001, 0b11111, 0b10001, 0b10001, 0b10001]),
    ('B', [0b11110, 0b10001, 0b10001, 0b11110, 0b10001, 0b10001, 0b11110]),
    ('C', [0b01110, 0b10001, 0b10000, 0b10000, 0b10000, 0b10001, 0b01110]),
    ('D', [0b11110, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b11110]),
    ('E', [0b11111, 0b10000, 0b10000, 0b11110, 0b10000, 0b10000, 0b11111]),
    ('F', [0b11111, 0b10000, 0b10000, 0b11110, 0b10000, 0b10000, 0b10000]),
    ('G', [0b01110, 0b10001, 0b10000, 0b10111, 0b10001, 0b10001, 0b01111]),
    ('H', [0b10001, 0b10001, 0b10001, 0b11111, 0b10001, 0b10001, 0b10001]),
    ('I', [0b01110, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110]),
    ('J', [0b00111, 0b00010, 0b00010, 0b00010, 0b00010, 0b10010, 0b01100]),
    ('K', [0b10001, 0b10010, 0b10100, 0b11000, 0b10100, 0b10010, 0b10001]),
    ('L', [0b10000, 0b10000, 0b10000, 0b10000, 0b10000, 0b10000, 0b11111]),
    ('M', [0b10001, 0b11011, 0b10101, 0b10101, 0b10001, 0b10001, 0b10001]),
    ('N', [0b10001, 0b10001, 0b11001, 0b10101, 0b10011, 0b10001, 0b10001]),
    ('O', [0b01110, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01110]),
    ('P', [0b11110, 0b10001, 0b10001, 0b11110, 0b10000, 0b10000, 0b10000]),
    ('Q', [0b01110, 0b10001, 0b10001, 0b10001, 0b10101, 0b10010, 0b01101]),
    ('R', [0b11110, 0b10001, 0b10001, 0b11110, 0b10100, 0b10010, 0b10001]),
    ('S', [0b01111, 0b10000, 0b10000, 0b01110, 0b00001, 0b00001, 0b11110]),
    ('T', [0b11111, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100]),
    ('U', [0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01110]),
    ('V', [0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01010, 0b00100]),
    ('W', [0b10001, 0b10001, 0b10001, 0b10101, 0b10101, 0b10101, 0b01010]),
    ('X', [0b10001, 0b10001, 0b01010, 0b00100, 0b01010, 0b10001, 0b10001]),
    ('Y', [0b10001, 0b10001, 0b01010, 0b00100, 0b00100, 0b00100, 0b00100]),
    ('Z', [0b11111, 0b00001, 0b00010, 0b00100, 0b01000, 0b10000, 0b11111]),
    ('0', [0b01110, 0b10001, 0b10011, 0b10101, 0b11001, 0b10001, 0b01110]),
    ('1', [0b00100, 0b01100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110]),
    ('2', [0b01110, 0b10001, 0b00001, 0b00010, 0b00100, 0b01000, 0b11111]),
    ('3', [0b11111, 0b00010, 0b00100, 0b00010, 0b00001, 0b10001, 0b01110]),
    ('4', [0b00010, 0b00110, 0b01010, 0b10010, 0b11111, 0b00010, 0b00010]),
    ('5', [0b11111, 0b10000, 0b11110, 0b00001, 0b00001, 0b10001, 0b01110]),
    ('6', [0b00110, 0b01000, 0b10000, 0b11110, 0b10001, 0b10001, 0b01110]),
    ('7', [0b11111, 0b00001, 0b00010, 0b00100, 0b01000, 0b01000, 0b01000]),
    ('8', [0b01110, 0b10001, 0b10001, 0b01110, 0b10001, 0b10001, 0b01110]),
    ('9', [0b01110, 0b10001, 0b10001, 0b01111, 0b00001, 0b00010, 0b01100]),
    ('-', [0b00000, 0b00000, 0b00000, 0b11111, 0b00000, 0b00000, 0b00000]),
    (':', [0b00000, 0b00100, 0b00100, 0b00000, 0b00100, 0b00100, 0b00000]),
    ('.', [0b00000, 0b00000, 0b00000, 0b00000, 0b00000, 0b01100, 0b01100]),
    (',', [0b00000, 0b00000, 0b00000, 0b00000, 0b01100, 0b00100, 0b01000]),
];

/// Longest caption line drawn, in characters.
const CAPTION_CHARS: usize = 32;

fn hash(seed: &str, prompt: &str) -> u64 {
    // FNV-1a over the seed as written and the prompt: stable across runs and
    // platforms, and any integer seed (up to 2^64−1 or negative) works.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in seed.as_bytes().iter().chain(&[0]).chain(prompt.as_bytes()) {
        h ^= *byte as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Renders the image and encodes it as `format` (`jpeg`, `png` or `webp`).
/// Sizes beyond the mock's output limits are refused, whatever was asked.
pub(crate) fn render(
    width: u32,
    height: u32,
    seed: &str,
    prompt: &str,
    format: &str,
    input: Option<&Picture>,
) -> Result<Vec<u8>, String> {
    if clamp_size(width as u64, height as u64) != (width.max(1), height.max(1)) {
        return Err(format!(
            "the mock does not render {width}x{height}: above its output limits"
        ));
    }
    let h = hash(seed, prompt);
    let a = [(h >> 8) as u8, (h >> 16) as u8, (h >> 24) as u8];
    let b = [(h >> 32) as u8, (h >> 40) as u8, (h >> 48) as u8];
    let (w, ht) = (width.max(1), height.max(1));
    let span = (w + ht) as f32;
    let mut img = Picture::from_fn(w, ht, |x, y| {
        let t = (x + y) as f32 / span;
        [0, 1, 2].map(|i| (a[i] as f32 * (1.0 - t) + b[i] as f32 * t) as u8)
    });
    draw_mark(&mut img);
    let first_line = match input {
        Some(input) => {
            draw_input(&mut img, input);
            format!("EDIT SEED {seed}")
        }
        None => format!("SEED {seed}"),
    };
    draw_caption(&mut img, &first_line, &prompt.to_uppercase());
    let encoded = match format {
        "png" => img.to_png(),
        "webp" => img.to_webp(),
        _ => img.to_jpeg(85),
    };
    encoded.map_err(|e| format!("cannot encode the mock image: {e}"))
}

/// The longest side of the copy of an input an edit's task keeps.
pub(crate) const INPUT_SIDE: u32 = 96;

/// The most memory decoding one input may take.
const INPUT_DECODE_BYTES: u64 = 64 << 20;

/// A small copy of an input image (at most [`INPUT_SIDE`] a side), from
/// its bytes: what an edit's result shows. `None` when it does not decode
/// within bounds (the task goes on, its image without the box).
pub(crate) fn input_copy(bytes: &[u8]) -> Option<Picture> {
    Some(Picture::decode(bytes, INPUT_DECODE_BYTES).ok()?.fit_within(INPUT_SIDE))
}

/// `input` scaled into a framed box at the top left, a third of the
/// shorter side across.
fn draw_input(img: &mut Picture, input: &Picture) {
    let (w, h) = img.dimensions();
    let (iw, ih) = input.dimensions();
    if iw == 0 || ih == 0 {
        return;
    }
    let side = (w.min(h) / 3).max(4);
    let scale = side as f32 / iw.max(ih) as f32;
    let (bw, bh) = (((iw as f32 * scale) as u32).max(1), ((ih as f32 * scale) as u32).max(1));
    let (left, top) = (side / 12 + 2, side / 12 + 2);
    let frame = 2;
    for y in top.saturating_sub(frame)..(top + bh + frame).min(h) {
        for x in left.saturating_sub(frame)..(left + bw + frame).min(w) {
            let inside = x >= left && x < left + bw && y >= top && y < top + bh;
            let pixel = if inside {
                let (sx, sy) = (((x - left) as f32 / scale) as u32, ((y - top) as f32 / scale) as u32);
                input.get(sx.min(iw - 1), sy.min(ih - 1))
            } else {
                [255, 255, 255]
            };
            img.put(x, y, pixel);
        }
    }
}

/// White "MOCK" on a dark band across the middle.
fn draw_mark(img: &mut Picture) {
    let (w, h) = img.dimensions();
    let scale = (w / 40).min(h / 12).max(1);
    let text_h = 7 * scale;
    dark_band(img, (h / 2).saturating_sub(text_h), h / 2 + text_h);
    draw_text(img, "MOCK", (h / 2).saturating_sub(text_h / 2), scale);
}

/// The seed, then the start of the prompt, in small letters on a dark band
/// near the bottom.
fn draw_caption(img: &mut Picture, seed: &str, prompt: &str) {
    let (w, h) = img.dimensions();
    // As large as the longest line allows, and smaller than the mark.
    let scale = (w / (CAPTION_CHARS as u32 * 6 + 4)).min(h / 40).max(1);
    let line = 9 * scale;
    let top = h.saturating_sub(3 * line);
    dark_band(img, top, h);
    draw_text(img, seed, top + scale, scale);
    let shown: String = prompt.chars().take(CAPTION_CHARS).collect();
    draw_text(img, &shown, top + line + scale, scale);
}

/// Rows `top..bottom` painted dark, across the whole width.
fn dark_band(img: &mut Picture, top: u32, bottom: u32) {
    let (w, h) = img.dimensions();
    for y in top..bottom.min(h) {
        for x in 0..w {
            img.put(x, y, [20, 20, 20]);
        }
    }
}

/// `text` in white, centred, its top at `top`, each dot `scale` pixels.
fn draw_text(img: &mut Picture, text: &str, top: u32, scale: u32) {
    let (w, h) = img.dimensions();
    let left = w.saturating_sub(text.chars().count() as u32 * 6 * scale) / 2;
    for (i, c) in text.chars().enumerate() {
        let Some((_, rows)) = GLYPHS.iter().find(|(glyph, _)| *glyph == c) else {
            continue;
        };
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
                            img.put(x, y, [255, 255, 255]);
                        }
                    }
                }
            }
        }
    }
}

/// A minimal valid MP4 file (an `ftyp` box, a `moov` box with a movie header
/// and no tracks, and a `free` box saying it is a mock): what the mock serves
/// as a video result.
pub(crate) fn mp4() -> Vec<u8> {
    fn boxed(kind: &[u8; 4], payload: &[u8]) -> Vec<u8> {
        let mut out = ((payload.len() + 8) as u32).to_be_bytes().to_vec();
        out.extend_from_slice(kind);
        out.extend_from_slice(payload);
        out
    }
    let mut ftyp = b"isom".to_vec();
    ftyp.extend_from_slice(&512u32.to_be_bytes());
    ftyp.extend_from_slice(b"isomiso2mp41");
    // Movie header, version 0: times, timescale 1000, duration 5 s, rate 1.0,
    // volume 1.0, the identity matrix, next track id 1.
    let mut mvhd = vec![0u8; 4];
    mvhd.extend_from_slice(&[0; 8]);
    mvhd.extend_from_slice(&1000u32.to_be_bytes());
    mvhd.extend_from_slice(&5000u32.to_be_bytes());
    mvhd.extend_from_slice(&0x0001_0000u32.to_be_bytes());
    mvhd.extend_from_slice(&0x0100u16.to_be_bytes());
    mvhd.extend_from_slice(&[0; 10]);
    for value in [0x0001_0000u32, 0, 0, 0, 0x0001_0000, 0, 0, 0, 0x4000_0000] {
        mvhd.extend_from_slice(&value.to_be_bytes());
    }
    mvhd.extend_from_slice(&[0; 24]);
    mvhd.extend_from_slice(&1u32.to_be_bytes());
    let mut out = boxed(b"ftyp", &ftyp);
    out.extend(boxed(b"moov", &boxed(b"mvhd", &mvhd)));
    out.extend(boxed(b"free", b"MOCK video from the genapi test double"));
    out
}

/// Scales a requested size down to the mock's limits, keeping its shape.
pub(super) fn clamp_size(width: u64, height: u64) -> (u32, u32) {
    let (mut w, mut h) = (width.clamp(1, u32::MAX as u64), height.clamp(1, u32::MAX as u64));
    let area = w as f64 * h as f64;
    if area > MAX_OUTPUT_PIXELS as f64 {
        let scale = (MAX_OUTPUT_PIXELS as f64 / area).sqrt();
        w = ((w as f64 * scale).floor() as u64).max(1);
        h = ((h as f64 * scale).floor() as u64).max(1);
    }
    (w.min(MAX_OUTPUT_SIDE) as u32, h.min(MAX_OUTPUT_SIDE) as u32)
}

/// Largest output area the mock renders: the contract's 4 MP.
pub(super) const MAX_OUTPUT_PIXELS: u64 = 4 * 1024 * 1024;
/// Longest output side the mock renders.
pub(super) const MAX_OUTPUT_SIDE: u64 = 8192;

#[cfg(test)]
mod tests {
    use super::*;

    /// The white dots of the caption's band of a rendered PNG.
    fn caption_dots(seed: &str, prompt: &str) -> Vec<bool> {
        let png = render(256, 256, seed, prompt, "png", None).unwrap();
        let img = image::load_from_memory(&png).unwrap().to_rgb8();
        let (w, h) = img.dimensions();
        (h - 40..h)
            .flat_map(|y| (0..w).map(move |x| (x, y)))
            .map(|(x, y)| img.get_pixel(x, y).0 == [255, 255, 255])
            .collect()
    }

    #[test]
    fn an_image_is_captioned_with_its_seed_and_prompt() {
        let fox = caption_dots("7", "a red fox");
        assert!(fox.iter().filter(|dot| **dot).count() > 100, "the caption is drawn");
        assert_eq!(fox, caption_dots("7", "a red fox"), "the same caption again");
        assert_ne!(fox, caption_dots("8", "a red fox"), "another seed reads otherwise");
        assert_ne!(fox, caption_dots("7", "a blue whale"), "another prompt reads otherwise");
    }

    #[test]
    fn an_edits_image_shows_its_input_in_a_framed_box() {
        let input = |colour| Picture::from_fn(40, 20, |_, _| colour);
        let decoded = |input: Option<&Picture>| {
            let png = render(300, 300, "7", "a red fox", "png", input).unwrap();
            image::load_from_memory(&png).unwrap().to_rgb8()
        };
        let red = decoded(Some(&input([250, 0, 0])));
        // The box starts at (10, 10): a third of 300 across, the input's
        // shape kept (100 × 50).
        assert_eq!(red.get_pixel(12, 12).0, [250, 0, 0]);
        assert_eq!(red.get_pixel(105, 55).0, [250, 0, 0]);
        assert_eq!(red.get_pixel(9, 30).0, [255, 255, 255], "framed");
        let blue = decoded(Some(&input([0, 0, 250])));
        assert_eq!(blue.get_pixel(50, 30).0, [0, 0, 250], "another input shows");
        let plain = decoded(None);
        assert_ne!(plain.get_pixel(50, 30).0, [250, 0, 0], "no input, no box");
        assert_ne!(plain, red);
        // A small copy is what a task keeps of its input.
        let mut png = Vec::new();
        image::RgbImage::from_pixel(400, 200, image::Rgb([9, 9, 9]))
            .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
            .unwrap();
        let copy = input_copy(&png).unwrap();
        assert_eq!(copy.dimensions(), (INPUT_SIDE, INPUT_SIDE / 2));
        assert!(input_copy(b"not an image").is_none());
    }
}
