//! Files made to cost a decoder far more than their size, built byte by
//! byte for the tests: headers claiming enormous images, and compressed
//! streams of zeros that inflate a thousand times.

/// Bits written as deflate packs them: the first bit in the lowest place.
#[derive(Default)]
struct Bits {
    bytes: Vec<u8>,
    used: u32,
}

impl Bits {
    /// `count` bits of `value`, lowest first (deflate's numbers).
    fn number(&mut self, value: u32, count: u32) {
        for at in 0..count {
            self.bit((value >> at) & 1);
        }
    }

    /// `count` bits of `code`, highest first (deflate's Huffman codes).
    fn code(&mut self, code: u32, count: u32) {
        for at in (0..count).rev() {
            self.bit((code >> at) & 1);
        }
    }

    fn bit(&mut self, bit: u32) {
        if self.used.is_multiple_of(8) {
            self.bytes.push(0);
        }
        if let Some(last) = self.bytes.last_mut() {
            *last |= (bit as u8) << (self.used % 8);
        }
        self.used += 1;
    }
}

/// A zlib stream of `count` zero bytes: one block of deflate's fixed codes,
/// a zero and then copies of 258 bytes from one back (13 bits each).
pub(crate) fn zeros_zlib(count: usize) -> Vec<u8> {
    let mut bits = Bits::default();
    bits.number(1, 1); // The last block,
    bits.number(1, 2); // of fixed codes.
    if count > 0 {
        let (copies, rest) = ((count - 1) / 258, (count - 1) % 258);
        bits.code(0x30, 8); // A literal zero.
        for _ in 0..copies {
            bits.code(0xC5, 8); // Length 258,
            bits.code(0, 5); // distance 1.
        }
        for _ in 0..rest {
            bits.code(0x30, 8);
        }
    }
    bits.code(0, 7); // The block's end.
    let adler = ((count % 65521) as u32) << 16 | 1;
    let mut stream = vec![0x78, 0x01];
    stream.extend_from_slice(&bits.bytes);
    stream.extend_from_slice(&adler.to_be_bytes());
    stream
}

/// A PNG whose header says `width` × `height` of 16-bit RGBA, with image
/// data of zeros enough for all of it: about 3 MB for 8000 × 8000, which
/// is 512 MB of samples.
pub(crate) fn png_of_16_bit_zeros(width: u32, height: u32) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(png::ColorType::Rgba);
    encoder.set_depth(png::BitDepth::Sixteen);
    let mut writer = encoder.write_header().expect("a header");
    let row = 1 + width as usize * 8;
    let data = zeros_zlib(row * height as usize);
    writer.write_chunk(png::chunk::IDAT, &data).expect("the data");
    // Dropping the writer ends the file.
    drop(writer);
    out
}

/// A 1 × 1 PNG with a `chunk` (iCCP, zTXt or iTXt) whose compressed part
/// inflates to `inflated` zero bytes.
pub(crate) fn png_with_inflating(chunk: png::chunk::ChunkType, inflated: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, 1, 1);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().expect("a header");
    // A name, then (iTXt: compressed, empty language and translation) the
    // compression method.
    let mut data = match chunk {
        png::chunk::iTXt => b"note\0\x01\0\0\0".to_vec(),
        _ => b"note\0\0".to_vec(),
    };
    data.extend_from_slice(&zeros_zlib(inflated));
    writer.write_chunk(chunk, &data).expect("the chunk");
    writer.write_image_data(&[10, 20, 30]).expect("the pixel");
    writer.finish().expect("the end");
    out
}

/// A JPEG of a few hundred bytes whose frame header claims `width` ×
/// `height`: a real 16 × 16 one, its size rewritten. Decoding it runs out
/// of data at once, and a decoder that trusts the header fills the rest.
pub(crate) fn jpeg_claiming(width: u16, height: u16, progressive: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = jpeg_encoder::Encoder::new(&mut out, 80);
    encoder.set_progressive(progressive);
    // Full-size colour planes: the most a decoder holds.
    encoder.set_sampling_factor(jpeg_encoder::SamplingFactor::F_1_1);
    let pixels: Vec<u8> = (0..16 * 16 * 3).map(|at| (at * 7 % 251) as u8).collect();
    encoder
        .encode(&pixels, 16, 16, jpeg_encoder::ColorType::Rgb)
        .expect("a small JPEG");
    let frame = if progressive { 0xC2 } else { 0xC0 };
    let at = out
        .windows(2)
        .position(|marker| marker == [0xFF, frame])
        .expect("a frame header");
    // Marker, length, precision, then height and width.
    out[at + 5..at + 7].copy_from_slice(&height.to_be_bytes());
    out[at + 7..at + 9].copy_from_slice(&width.to_be_bytes());
    out
}
