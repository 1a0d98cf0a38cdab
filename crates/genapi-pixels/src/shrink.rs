//! Making a picture smaller: each pixel the average of those it covers.

use crate::Picture;

impl Picture {
    /// The picture made smaller to fit within `side` × `side`, its shape
    /// kept (each pixel the average of those it covers); unchanged when it
    /// fits already.
    pub fn fit_within(&self, side: u32) -> Picture {
        if self.width <= side.max(1) && self.height <= side.max(1) {
            return self.clone();
        }
        shrunk(self.width, self.height, side, |x, y| self.get(x, y))
    }
}

/// The pixels of a `width` × `height` picture, read by `pixel`, made to fit
/// within `side` × `side` as [`Picture::fit_within`] makes them, whatever
/// holds them.
pub(crate) fn shrunk(width: u32, height: u32, side: u32, pixel: impl Fn(u32, u32) -> [u8; 3]) -> Picture {
    let side = side.max(1);
    let scale = side as f64 / width.max(height).max(1) as f64;
    let (out_width, out_height) = if width <= side && height <= side {
        (width, height)
    } else {
        (
            ((width as f64 * scale).round() as u32).clamp(1, side),
            ((height as f64 * scale).round() as u32).clamp(1, side),
        )
    };
    let span = |out: u32, size: u32, of: u32| {
        let from = (out as u64 * of as u64 / size as u64) as u32;
        let to = (((out + 1) as u64 * of as u64).div_ceil(size as u64) as u32).max(from + 1);
        from..to.min(of)
    };
    Picture::from_fn(out_width, out_height, |x, y| {
        let (columns, rows) = (span(x, out_width, width), span(y, out_height, height));
        let mut sum = [0u64; 3];
        let mut count = 0u64;
        for sy in rows {
            for sx in columns.clone() {
                let colour = pixel(sx, sy);
                for channel in 0..3 {
                    sum[channel] += colour[channel] as u64;
                }
                count += 1;
            }
        }
        sum.map(|total| (total / count.max(1)) as u8)
    })
}
