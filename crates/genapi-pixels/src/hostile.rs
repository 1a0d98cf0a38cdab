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

/// A lossless WebP stream of 1 × 1 pixel (with its header, or without it
/// as an alpha plane's) whose pixel names the last of `groups` groups of
/// prefix codes, each group's first code 2,048 symbols of 11 bits: a dozen
/// bytes to write (one code-length symbol, read without a bit), a table of
/// 4 KiB and a tree of 4,096 nodes to decode.
pub(crate) fn lossless_stream_of_groups(groups: u32, header: bool) -> Vec<u8> {
    let mut bits = Bits::default();
    if header {
        bits.number(0x2f, 8); // Signature,
        bits.number(0, 14); // width 1,
        bits.number(0, 14); // height 1,
        bits.number(0, 4); // no alpha, version 0.
    }
    bits.number(0, 1); // No transform.
    bits.number(1, 1); // A colour cache,
    bits.number(11, 4); // of 2,048 colours (green's alphabet is 2,328).
    bits.number(1, 1); // Groups of codes, by an entropy image
    bits.number(0, 3); // of blocks of 4 × 4: one pixel,
    bits.number(0, 1); // (no colour cache) whose codes are one symbol each:
    let last = groups - 1;
    for symbol in [last & 0xFF, last >> 8, 0, 0, 0] {
        // green and red, the group; blue, alpha, distance.
        bits.number(1, 1);
        bits.number(0, 1);
        bits.number(1, 1);
        bits.number(symbol, 8);
    }
    for _ in 0..groups {
        // Green: 2,048 code lengths of 11, by a code of one length (the
        // 15th in the order of code lengths).
        bits.number(0, 1);
        bits.number(15 - 4, 4);
        for order in 0..15 {
            bits.number(u32::from(order == 14), 3);
        }
        bits.number(1, 1); // The last symbol, in 12 bits.
        bits.number(5, 3);
        bits.number(2048 - 2, 12);
        for _ in 0..4 {
            // Red, blue, alpha, distance: one symbol each.
            bits.number(0b0001, 4);
        }
    }
    bits.number(0, 11); // The pixel: green's symbol 0,
    bits.number(0, 32); // and room to spare.
    bits.bytes
}

/// A lossless stream without a header (an alpha plane's) whose first
/// transform's image is pixels that take no bit each: copies of one pixel
/// back, by a green code of one symbol (256) and a distance code of one
/// symbol. It ends there.
pub(crate) fn lossless_stream_of_silent_pixels() -> Vec<u8> {
    let mut bits = Bits::default();
    bits.number(1, 1); // A transform,
    bits.number(0, 2); // the predictor's,
    bits.number(0, 3); // of blocks of 4 × 4, whose image has
    bits.number(0, 1); // no colour cache.
                       // Green: symbols 0 to 255 of no code and 256 of one, by a code of code
                       // lengths of two symbols (1 and 18, a bit each: 1 is 0, 18 is 1).
    bits.number(0, 1);
    bits.number(0, 4); // Four code lengths, for 17, 18, 0 and 1:
    for length in [0, 1, 0, 1] {
        bits.number(length, 3);
    }
    bits.number(1, 1); // Three of them read:
    bits.number(0, 3);
    bits.number(1, 2);
    bits.code(1, 1); // 138 zeros,
    bits.number(127, 7);
    bits.code(1, 1); // 118 zeros,
    bits.number(107, 7);
    bits.code(0, 1); // then 1.
    for _ in 0..4 {
        // Red, blue, alpha, distance: one symbol each (0).
        bits.number(0b0001, 4);
    }
    bits.bytes
}

/// A chunk as RIFF lays it out: its kind, its length, its data (and a byte
/// more when that is odd).
pub(crate) fn chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut out = kind.to_vec();
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(data);
    if data.len() % 2 == 1 {
        out.push(0);
    }
    out
}

/// A WebP file of `chunks`.
pub(crate) fn webp_of(chunks: &[Vec<u8>]) -> Vec<u8> {
    let body: Vec<u8> = chunks.concat();
    let mut file = b"RIFF".to_vec();
    file.extend_from_slice(&(4 + body.len() as u32).to_le_bytes());
    file.extend_from_slice(b"WEBP");
    file.extend_from_slice(&body);
    file
}
