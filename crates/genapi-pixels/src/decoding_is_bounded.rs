//! Decoding holds what its estimate says and no more: files crafted to cost
//! a decoder far more than their size are refused from their headers, or
//! decoded without their metadata, and real images of every kind take at
//! most their estimates.

use crate::counting::peak_of;
use crate::decode::cost;
use crate::hostile::{
    chunk, jpeg_claiming, lossless_stream_of_groups, lossless_stream_of_silent_pixels, png_of_16_bit_zeros,
    png_with_inflating, webp_of,
};
use crate::webp_codes::lossless_codes;
use crate::{Picture, PictureError, THUMBNAIL_BYTES};

const MIB: u64 = 1 << 20;

/// The bound a full decode had before it counted the codecs' buffers, which
/// each of these files passed, taking 366 to 427 MiB.
const OLD_BOUND: u64 = 256 * MIB;

#[test]
fn headers_claiming_enormous_images_are_refused_before_anything_is_decoded() {
    for (kind, bytes) in [
        ("baseline JPEG", jpeg_claiming(8000, 8000, false)),
        ("progressive JPEG", jpeg_claiming(8000, 8000, true)),
        ("16-bit PNG", png_of_16_bit_zeros(8000, 8000)),
    ] {
        let (full, full_peak) = peak_of(|| Picture::decode(&bytes, OLD_BOUND));
        let (thumbnail, thumbnail_peak) = peak_of(|| Picture::thumbnail(&bytes, 192, THUMBNAIL_BYTES));
        for (result, limit) in [(full, OLD_BOUND), (thumbnail, THUMBNAIL_BYTES)] {
            let Err(PictureError::TooLarge {
                width: 8000,
                height: 8000,
                needs,
                limit: said,
            }) = result
            else {
                panic!("{kind} of {} bytes: {result:?}", bytes.len());
            };
            assert!(needs > limit && said == limit, "{kind}: {needs} {said}");
        }
        // The file is already in memory: refusing it costs its header.
        assert!(
            full_peak < MIB && thumbnail_peak < MIB,
            "{kind}: {full_peak} {thumbnail_peak}"
        );
    }
    let message = Picture::decode(&jpeg_claiming(8000, 8000, true), OLD_BOUND)
        .unwrap_err()
        .to_string();
    assert_eq!(
        message,
        "a 8000×8000 image takes 745 MiB to decode, more than the 256 MiB allowed"
    );
}

#[test]
fn compressed_metadata_is_never_inflated() {
    for chunk in [png::chunk::iCCP, png::chunk::zTXt, png::chunk::iTXt] {
        // 255 MiB once inflated, in a file of 1.6 MB.
        let bytes = png_with_inflating(chunk, 255 << 20);
        let (picture, peak) = peak_of(|| Picture::decode(&bytes, MIB));
        let picture = picture.unwrap_or_else(|e| panic!("{chunk:?}: {e}"));
        assert_eq!(picture.get(0, 0), [10, 20, 30]);
        assert!(peak < MIB, "{chunk:?}: {peak} bytes held");
    }
}

/// Images as encoders write them, a few hundred thousand pixels each (so
/// the pixels outweigh what a codec holds whatever the size).
fn real_images() -> Vec<(&'static str, Vec<u8>)> {
    let (width, height) = (640, 480);
    let picture = Picture::from_fn(width, height, |x, y| [(x * 3) as u8, (y * 5) as u8, (x ^ y) as u8]);
    let jpeg = |sampling, progressive, colour: jpeg_encoder::ColorType| {
        let mut out = Vec::new();
        let mut encoder = jpeg_encoder::Encoder::new(&mut out, 90);
        encoder.set_sampling_factor(sampling);
        encoder.set_progressive(progressive);
        let samples = match colour {
            jpeg_encoder::ColorType::Luma => picture.as_rgb().iter().step_by(3).copied().collect(),
            _ => picture.as_rgb().to_vec(),
        };
        encoder.encode(&samples, width as u16, height as u16, colour).unwrap();
        out
    };
    let png = |colour, depth, bytes_a_row: usize| {
        let mut out = Vec::new();
        let mut encoder = png::Encoder::new(&mut out, width, height);
        encoder.set_color(colour);
        encoder.set_depth(depth);
        let mut writer = encoder.write_header().unwrap();
        let samples: Vec<u8> = (0..bytes_a_row * height as usize)
            .map(|at| (at * 7 % 253) as u8)
            .collect();
        writer.write_image_data(&samples).unwrap();
        writer.finish().unwrap();
        out
    };
    let webp_rgba = {
        let mut out = Vec::new();
        let samples: Vec<u8> = (0..width * height * 4).map(|at| (at % 251) as u8).collect();
        image_webp::WebPEncoder::new(&mut out)
            .encode(&samples, width, height, image_webp::ColorType::Rgba8)
            .unwrap();
        out
    };
    use jpeg_encoder::{ColorType, SamplingFactor};
    vec![
        (
            "baseline JPEG 4:2:0",
            jpeg(SamplingFactor::F_2_2, false, ColorType::Rgb),
        ),
        (
            "baseline JPEG 4:4:4",
            jpeg(SamplingFactor::F_1_1, false, ColorType::Rgb),
        ),
        (
            "progressive JPEG 4:2:0",
            jpeg(SamplingFactor::F_2_2, true, ColorType::Rgb),
        ),
        (
            "progressive JPEG 4:4:4",
            jpeg(SamplingFactor::F_1_1, true, ColorType::Rgb),
        ),
        ("grey JPEG", jpeg(SamplingFactor::F_1_1, false, ColorType::Luma)),
        ("8-bit RGB PNG", picture.to_png().unwrap()),
        (
            "16-bit RGBA PNG",
            png(png::ColorType::Rgba, png::BitDepth::Sixteen, 640 * 8),
        ),
        (
            "16-bit grey PNG",
            png(png::ColorType::Grayscale, png::BitDepth::Sixteen, 640 * 2),
        ),
        (
            "1-bit grey PNG",
            png(png::ColorType::Grayscale, png::BitDepth::One, 640 / 8),
        ),
        ("lossless WebP", picture.to_webp().unwrap()),
        ("lossless WebP with alpha", webp_rgba),
    ]
}

#[test]
fn real_images_of_every_kind_take_at_most_their_estimates() {
    for (kind, bytes) in real_images() {
        let estimate = cost(&bytes).unwrap();
        let pixels = estimate.width as u64 * estimate.height as u64;
        let (full, full_peak) = peak_of(|| Picture::decode(&bytes, u64::MAX));
        assert_eq!(full.unwrap().dimensions(), (640, 480), "{kind}");
        let full_estimate = estimate.with_picture_of(pixels);
        let (small, small_peak) = peak_of(|| Picture::thumbnail(&bytes, 192, u64::MAX));
        assert_eq!(small.unwrap().dimensions(), (192, 144), "{kind}");
        let small_estimate = estimate.with_picture_of(192 * 192);
        assert!(full_peak <= full_estimate, "{kind}: {full_peak} > {full_estimate}");
        assert!(small_peak <= small_estimate, "{kind}: {small_peak} > {small_estimate}");
    }
}

#[test]
fn a_thumbnail_of_four_megapixels_is_made_within_its_bound_in_every_format() {
    let flat = Picture::from_fn(2048, 2048, |_, _| [40, 90, 160]);
    for (kind, bytes) in [
        ("baseline JPEG", jpeg_claiming(2048, 2048, false)),
        ("progressive JPEG", jpeg_claiming(2048, 2048, true)),
        ("16-bit RGBA PNG", png_of_16_bit_zeros(2048, 2048)),
        ("lossless WebP", flat.to_webp().unwrap()),
    ] {
        let (small, peak) = peak_of(|| Picture::thumbnail(&bytes, 192, THUMBNAIL_BYTES));
        assert_eq!(small.unwrap().dimensions(), (192, 192), "{kind}");
        assert!(peak <= THUMBNAIL_BYTES, "{kind}: {peak}");
    }
}

#[test]
fn a_lossless_webp_naming_thousands_of_code_groups_is_refused_from_its_codes() {
    // 672 KB claiming one pixel, whose codes took 4.3 GiB to build.
    let bomb = webp_of(&[chunk(b"VP8L", &lossless_stream_of_groups(65_536, true))]);
    let (refused, peak) = peak_of(|| Picture::thumbnail(&bomb, 192, THUMBNAIL_BYTES));
    let Err(PictureError::TooLarge {
        width: 1,
        height: 1,
        needs,
        ..
    }) = refused
    else {
        panic!("{refused:?}");
    };
    assert!(needs > 4 << 30, "{needs}");
    assert!(peak < MIB, "reading the codes holds little: {peak}");

    // Fewer groups are decoded within the estimate.
    let smaller = webp_of(&[chunk(b"VP8L", &lossless_stream_of_groups(1024, true))]);
    let estimate = cost(&smaller).unwrap().with_picture_of(1);
    let (decoded, peak) = peak_of(|| Picture::decode(&smaller, estimate));
    assert_eq!(decoded.unwrap().dimensions(), (1, 1));
    assert!(peak <= estimate && peak > 64 * MIB, "{peak} of {estimate}");

    // The same codes in an alpha plane, or in a frame of an animation.
    let stream = lossless_stream_of_groups(65_536, false);
    let alpha = webp_of(&[chunk(b"ALPH", &[&[1][..], &stream].concat())]);
    let mut frame = vec![0; 16];
    frame.extend_from_slice(&chunk(b"ALPH", &[&[1][..], &stream].concat()));
    let animated = webp_of(&[chunk(b"ANMF", &frame)]);
    for file in [alpha, animated] {
        assert!(lossless_codes(&file, (1, 1)).unwrap() > 4 << 30);
    }
}

#[test]
fn a_lossless_webp_of_pixels_that_take_no_bit_is_read_at_once() {
    // An alpha plane of 2²⁴ × 2²⁴ pixels (as a canvas may claim), whose
    // predictor's image is 2⁴⁴ copies that take no bit: the codes are read
    // past them at once, and the stream ends there.
    let stream = lossless_stream_of_silent_pixels();
    let file = webp_of(&[chunk(b"ALPH", &[&[1][..], &stream].concat())]);
    let started = std::time::Instant::now();
    let read = lossless_codes(&file, (1 << 24, 1 << 24));
    // A hang detector, not a figure: read pixel by pixel, 2⁴⁴ pixels take
    // days; read past at once, milliseconds, on a tenth of a core as well.
    assert!(started.elapsed() < std::time::Duration::from_secs(120));
    assert!(read.is_err(), "{read:?}");
}
