//! What a lossless WebP's prefix codes take to decode, read from its
//! bitstream before it is decoded.
//!
//! A lossless stream may name up to 65,536 groups of five prefix codes (by
//! an "entropy image" of as little as one pixel), and the decoder builds
//! each code as a table and a tree of up to some 80 KB, from ten bytes of
//! the file or so: a file of 700 KB claiming one pixel takes 4 GiB. The
//! number of groups and every code's lengths come in the stream before its
//! pixels, so they are read here (as the format says, and as image-webp 0.2
//! reads them) and the tables and trees that decoder builds are counted.
//! Pixels are read only to skip them, and the entropy image's only to find
//! the highest group it names: a copy or a cached colour repeats a group
//! named before, so literals alone can name a new one.

use crate::PictureError;

/// The order in which the lengths of the code-length code come.
const CODE_LENGTH_ORDER: [usize; 19] = [17, 18, 0, 1, 2, 3, 4, 5, 16, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];

/// The alphabets of a group's five codes: green (with lengths of copies,
/// and the colour cache's entries after), red, blue, alpha, distance.
const ALPHABETS: [usize; 5] = [256 + 24, 256, 256, 256, 40];

/// The most bits a code's table is indexed by; longer codes go on in a tree.
const TABLE_BITS: usize = 10;

/// A tree node of the decoder's (an enum of a `usize`, with its tag).
const NODE_BYTES: u64 = 16;

/// A group of five codes as the decoder keeps it, 280 bytes, in a list
/// that grows by doubling (the old list beside the new for a moment).
const GROUP_BYTES: u64 = 900;

/// What reading one code holds for a moment: its lengths, two bytes a
/// symbol, and the code of its lengths.
const READING_BYTES: u64 = 8 << 10;

fn corrupt() -> PictureError {
    PictureError::Codec("the lossless WebP stream is not one this reads".into())
}

/// Bits of a stream, the first in the lowest place of its byte.
struct Bits<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Bits<'_> {
    fn read(&mut self, count: usize) -> Result<usize, PictureError> {
        let mut value = 0;
        for shift in 0..count {
            let byte = self.bytes.get(self.at / 8).ok_or_else(corrupt)?;
            value |= usize::from((byte >> (self.at % 8)) & 1) << shift;
            self.at += 1;
        }
        Ok(value)
    }
}

/// A prefix code, by the length of each symbol's code (0: not used).
struct Code {
    /// How many codes each length has.
    counts: [usize; 16],
    /// The symbols used, by length and then by value.
    symbols: Vec<usize>,
    /// What the decoder holds for it: a table of up to 2¹⁰ entries of four
    /// bytes and, for longer codes, a tree of two nodes each (none for a
    /// code of one symbol, which takes no bit to read).
    held: u64,
}

impl Code {
    /// The code of `lengths`: complete, as the decoder requires, or of one
    /// symbol.
    fn of(lengths: &[usize]) -> Result<Code, PictureError> {
        let mut counts = [0; 16];
        for &length in lengths.iter().filter(|&&length| length > 0) {
            counts[length.min(15)] += 1;
        }
        let mut symbols: Vec<usize> = (0..lengths.len()).filter(|&s| lengths[s] > 0).collect();
        symbols.sort_by_key(|&symbol| lengths[symbol]);
        let mut left: i64 = 1;
        for count in &counts[1..] {
            left = 2 * left - *count as i64;
        }
        if symbols.is_empty() || (symbols.len() > 1 && left != 0) {
            return Err(corrupt());
        }
        let longest = (1..16).rev().find(|&length| counts[length] > 0).unwrap_or(1);
        let beyond: usize = counts[TABLE_BITS + 1..].iter().sum();
        let held = match symbols.len() {
            1 => 0,
            _ => (4 << longest.min(TABLE_BITS)) + 2 * beyond as u64 * NODE_BYTES,
        };
        Ok(Code { counts, symbols, held })
    }

    /// A code of two symbols, a bit each, given in the stream as they are:
    /// the decoder holds a table of two entries and a tree of three nodes.
    fn pair(zero: usize, one: usize) -> Code {
        let mut counts = [0; 16];
        counts[1] = 2;
        Code {
            counts,
            symbols: vec![zero, one],
            held: 8 + 3 * NODE_BYTES,
        }
    }

    fn read(&self, bits: &mut Bits<'_>) -> Result<usize, PictureError> {
        if let [only] = self.symbols[..] {
            return Ok(only);
        }
        let (mut code, mut first, mut index) = (0, 0, 0);
        for count in &self.counts[1..] {
            code |= bits.read(1)?;
            if code - first < *count {
                return Ok(self.symbols[index + code - first]);
            }
            index += count;
            first = (first + count) << 1;
            code <<= 1;
        }
        Err(corrupt())
    }
}

/// Reads a prefix code of `alphabet` symbols.
fn code(bits: &mut Bits<'_>, alphabet: usize) -> Result<Code, PictureError> {
    if bits.read(1)? == 1 {
        let count = bits.read(1)? + 1;
        let wide = bits.read(1)?;
        let first = bits.read(1 + 7 * wide)?;
        let second = if count == 2 { bits.read(8)? } else { first };
        if first >= alphabet || second >= alphabet {
            return Err(corrupt());
        }
        return Ok(match count {
            1 => Code {
                counts: [0; 16],
                symbols: vec![first],
                held: 0,
            },
            _ => Code::pair(first, second),
        });
    }
    let mut length_lengths = [0; 19];
    for &symbol in &CODE_LENGTH_ORDER[..4 + bits.read(4)?] {
        length_lengths[symbol] = bits.read(3)?;
    }
    let lengths_code = Code::of(&length_lengths)?;
    let mut most = alphabet;
    if bits.read(1)? == 1 {
        let width = 2 + 2 * bits.read(3)?;
        most = 2 + bits.read(width)?;
        if most > alphabet {
            return Err(corrupt());
        }
    }
    let (mut lengths, mut previous) = (vec![0; alphabet], 8);
    let mut symbol = 0;
    while symbol < alphabet && most > 0 {
        most -= 1;
        let length = lengths_code.read(bits)?;
        let (repeat, value) = match length {
            0..=15 => (1, length),
            16 => (3 + bits.read(2)?, previous),
            17 => (3 + bits.read(3)?, 0),
            _ => (11 + bits.read(7)?, 0),
        };
        if symbol + repeat > alphabet {
            return Err(corrupt());
        }
        lengths[symbol..symbol + repeat].fill(value);
        symbol += repeat;
        if length > 0 && length < 16 {
            previous = length;
        }
    }
    Code::of(&lengths)
}

/// Reads a group's five codes, with `cache` entries after green's.
fn group(bits: &mut Bits<'_>, cache: usize) -> Result<Vec<Code>, PictureError> {
    let extra = [cache, 0, 0, 0, 0];
    (0..5).map(|at| code(bits, ALPHABETS[at] + extra[at])).collect()
}

/// The size of a colour cache, from the stream.
fn cache(bits: &mut Bits<'_>) -> Result<usize, PictureError> {
    match bits.read(1)? {
        0 => Ok(0),
        _ => match bits.read(4)? {
            size @ 1..=11 => Ok(1 << size),
            _ => Err(corrupt()),
        },
    }
}

fn copy_length(bits: &mut Bits<'_>, prefix: usize) -> Result<usize, PictureError> {
    if prefix < 4 {
        return Ok(prefix + 1);
    }
    let extra = (prefix - 2) >> 1;
    Ok(((2 + (prefix & 1)) << extra) + bits.read(extra)? + 1)
}

/// Reads an image of `pixels` pixels with one group of codes (a transform's
/// or the entropy image), and returns what its codes take and the highest
/// group its literals name (red × 256 + green).
fn small_image(bits: &mut Bits<'_>, pixels: usize) -> Result<(u64, usize), PictureError> {
    let cache = cache(bits)?;
    let codes = group(bits, cache)?;
    let held = 4 * cache as u64 + codes.iter().map(|code| code.held).sum::<u64>();
    let (mut at, mut highest) = (0, 0);
    let all_single = codes[..4].iter().all(|code| code.symbols.len() == 1);
    while at < pixels {
        let before = bits.at;
        let green = codes[0].read(bits)?;
        if green < 256 {
            let red = codes[1].read(bits)?;
            codes[2].read(bits)?;
            codes[3].read(bits)?;
            highest = highest.max(red << 8 | green);
            // Codes of one symbol each are the same pixel to the end.
            at = if all_single { pixels } else { at + 1 };
        } else if green < 256 + 24 {
            let length = copy_length(bits, green - 256)?;
            let distance = codes[4].read(bits)?;
            copy_length(bits, distance)?;
            at += length;
        } else {
            at += 1;
        }
        if bits.at == before {
            // A pixel of no bit (green of one symbol, a copy or a cached
            // colour): every pixel left is the same, and reads nothing.
            break;
        }
    }
    Ok((held, highest))
}

fn subsample(size: usize, bits: usize) -> usize {
    (size + (1 << bits) - 1) >> bits
}

/// What the lossless streams of the WebP `file` (whose canvas is
/// `canvas`) hold in prefix codes while decoded, the most of one: its
/// lossless image, its alpha plane when compressed losslessly, and those
/// of its frames.
pub(crate) fn lossless_codes(file: &[u8], canvas: (u32, u32)) -> Result<u64, PictureError> {
    let mut most = 0;
    for (kind, data) in chunks(file.get(12..).unwrap_or_default()) {
        let held = match kind {
            b"VP8L" => codes_bytes(data, None)?,
            b"ALPH" => alpha_codes(data, canvas)?,
            b"ANMF" => {
                // A frame: where, how large, how long, then its chunks.
                let side = |at: usize| {
                    data.get(at..at + 3)
                        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], 0]) + 1)
                };
                let frame = side(6).zip(side(9)).ok_or_else(corrupt)?;
                let mut most = 0;
                for (kind, data) in chunks(data.get(16..).unwrap_or_default()) {
                    most = most.max(match kind {
                        b"VP8L" => codes_bytes(data, None)?,
                        b"ALPH" => alpha_codes(data, frame)?,
                        _ => 0,
                    });
                }
                most
            }
            _ => 0,
        };
        most = most.max(held);
    }
    Ok(most)
}

/// An alpha plane's codes: a lossless stream without a header, after a
/// byte saying how the plane is compressed (1: losslessly).
fn alpha_codes(data: &[u8], size: (u32, u32)) -> Result<u64, PictureError> {
    match data.split_first() {
        Some((how, stream)) if how & 0b11 == 1 => codes_bytes(stream, Some(size)),
        _ => Ok(0),
    }
}

/// The chunks of a RIFF body: a kind, a length and the data (a byte more
/// when the length is odd); one cut short is what there is of it, and the
/// last.
fn chunks(mut body: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    std::iter::from_fn(move || {
        let kind = body.get(..4)?;
        let length = u32::from_le_bytes(body.get(4..8)?.try_into().ok()?) as usize;
        let end = length.saturating_add(8).min(body.len());
        let data = &body[8..end];
        body = body.get(end + length % 2..).unwrap_or_default();
        Some((kind, data))
    })
}

/// What decoding the lossless `stream` of an image of `size` (when the
/// stream has no header of its own: an alpha plane's) holds in prefix
/// codes at once.
fn codes_bytes(stream: &[u8], size: Option<(u32, u32)>) -> Result<u64, PictureError> {
    let mut bits = Bits { bytes: stream, at: 0 };
    let (width, height) = match size {
        Some((width, height)) => (width as usize, height as usize),
        None => {
            if bits.read(8)? != 0x2f {
                return Err(corrupt());
            }
            let (width, height) = (bits.read(14)? + 1, bits.read(14)? + 1);
            bits.read(4)?;
            (width, height)
        }
    };
    // Transforms, each with its own small image (and codes, for a while).
    let (mut xsize, mut passing, mut seen) = (width, 0, [false; 4]);
    while bits.read(1)? == 1 {
        let kind = bits.read(2)?;
        if std::mem::replace(&mut seen[kind], true) {
            return Err(corrupt());
        }
        let pixels = match kind {
            0 | 1 => {
                let size_bits = bits.read(3)? + 2;
                subsample(xsize, size_bits) * subsample(height, size_bits)
            }
            2 => continue,
            _ => {
                let colours = bits.read(8)? + 1;
                let packing = [3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1];
                xsize = subsample(xsize, packing.get(colours - 1).copied().unwrap_or(0));
                colours
            }
        };
        passing = passing.max(small_image(&mut bits, pixels)?.0);
    }
    // The image: its cache, and its groups of codes by an entropy image.
    let cache = cache(&mut bits)?;
    let mut groups = 1;
    if bits.read(1)? == 1 {
        let size_bits = bits.read(3)? + 2;
        let (held, highest) = small_image(&mut bits, subsample(xsize, size_bits) * subsample(height, size_bits))?;
        passing = passing.max(held);
        groups = highest + 1;
    }
    // The colour cache (four bytes an entry) and the groups.
    let mut held = 4 * cache as u64 + groups as u64 * GROUP_BYTES;
    for _ in 0..groups {
        held += group(&mut bits, cache)?.iter().map(|code| code.held).sum::<u64>();
    }
    Ok(held + passing + READING_BYTES)
}
