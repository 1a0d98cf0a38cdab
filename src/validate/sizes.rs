//! The output sizes a request schema accepts, and the accepted sizes nearest
//! to one it refuses.
//!
//! Read from the nodes the validator checks, and nowhere else: the `minimum`,
//! `maximum`, `multipleOf` and `x-zero-means-auto` of the `width` and
//! `height` fields, and the request's `x-max-pixels`. So a suggested size is
//! one the validator accepts, and a bound changed in the document changes
//! the suggestions with it.

use genapi_document::Field;
use serde_json::Value;

/// The `width × height` sizes one request schema accepts.
///
/// ```
/// let document = genapi::validate::Document::embedded();
/// let sizes = document.sizes("Gen2ProRequest").unwrap();
/// assert!(!sizes.accepts(1000, 768)); // not a multiple of 16
/// assert_eq!(sizes.nearest(1000, 768), [(992, 768), (1008, 768)]);
/// assert!(sizes.accepts(1024, 768));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    width: Side,
    height: Side,
    /// The most pixels `width × height` may have (`x-max-pixels`).
    max_pixels: Option<u64>,
}

/// The values one side accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Side {
    /// The smallest accepted value: `minimum`, raised to a multiple.
    least: u64,
    /// The largest: `maximum`, lowered to a multiple.
    most: Option<u64>,
    /// `multipleOf` (1 without one).
    step: u64,
    /// 0 is accepted too, meaning "the model chooses".
    zero_means_auto: bool,
}

impl Sizes {
    /// The sizes of a request whose `width` and `height` are `fields` and
    /// whose schema is `request`; `None` when it has no such pair.
    pub(crate) fn read(fields: &[Field], request: &Value) -> Option<Sizes> {
        let side = |name: &str| fields.iter().find(|field| field.name == name).and_then(Side::read);
        let rule = &request["x-max-pixels"];
        let limits_both = rule["fields"] == serde_json::json!(["width", "height"]);
        Some(Sizes {
            width: side("width")?,
            height: side("height")?,
            max_pixels: rule["max"].as_u64().filter(|_| limits_both),
        })
    }

    /// Whether the schema accepts `width × height`.
    pub fn accepts(&self, width: u32, height: u32) -> bool {
        let (width, height) = (u64::from(width), u64::from(height));
        self.width.accepts(width) && self.height.accepts(height) && self.fits(width, height)
    }

    /// The accepted sizes nearest to `width × height`, smallest first: one,
    /// or several as near as each other (`1000 × 768` with widths in steps
    /// of 16 is as near to `992 × 768` as to `1008 × 768`). Each side is
    /// brought to its nearest accepted value; where that is above the pixel
    /// limit, the nearest sizes within it in proportion. An accepted size is
    /// its own nearest. Empty only when the schema accepts no size at all.
    pub fn nearest(&self, width: u32, height: u32) -> Vec<(u32, u32)> {
        let (width, height) = (u64::from(width), u64::from(height));
        let mut found: Vec<(u64, u64)> = self
            .width
            .nearest(width)
            .into_iter()
            .flat_map(|w| self.height.nearest(height).into_iter().map(move |h| (w, h)))
            .filter(|(w, h)| self.fits(*w, *h))
            .collect();
        if found.is_empty() {
            found = self.nearest_within_area(width, height);
        }
        found.sort_unstable();
        found.dedup();
        found
            .into_iter()
            .filter_map(|(w, h)| Some((u32::try_from(w).ok()?, u32::try_from(h).ok()?)))
            .collect()
    }

    fn fits(&self, width: u64, height: u64) -> bool {
        self.max_pixels.is_none_or(|max| width.saturating_mul(height) <= max)
    }

    /// The nearest sizes when every size nearest side by side is above the
    /// pixel limit: of each accepted width with the tallest height within
    /// the limit (or the one asked, when lower), the sizes nearest in
    /// proportion, so a size far above the limit keeps its shape (8000 ×
    /// 8000 comes down to 2048 × 2048, not to a sliver as near by distance).
    fn nearest_within_area(&self, width: u64, height: u64) -> Vec<(u64, u64)> {
        let Some(max) = self.max_pixels else {
            return Vec::new();
        };
        let apart = |got: u64, asked: u64| (got as f64 / asked.max(1) as f64).ln().powi(2);
        let mut best: Vec<(u64, u64)> = Vec::new();
        let mut best_distance = f64::INFINITY;
        let widths = self
            .width
            .values()
            .take_while(|w| w.saturating_mul(self.height.least) <= max);
        for w in widths {
            let Some(tallest) = self.height.at_most(max / w) else {
                continue;
            };
            for h in self.height.nearest(height.min(tallest)) {
                let distance = apart(w, width) + apart(h, height);
                if distance < best_distance - TIE {
                    best.clear();
                    best_distance = distance;
                }
                if (distance - best_distance).abs() <= TIE {
                    best.push((w, h));
                }
            }
        }
        best
    }
}

/// Distances in proportion closer than this are as near as each other.
const TIE: f64 = 1e-12;

impl Side {
    /// `None` for a field that is no whole number of pixels.
    fn read(field: &Field) -> Option<Side> {
        if !field.kind.starts_with("integer") {
            return None;
        }
        let number = |keyword: &str| field.bound(keyword).and_then(Value::as_f64);
        let step = number("multipleOf")
            .filter(|s| *s >= 1.0 && s.fract() == 0.0)
            .unwrap_or(1.0) as u64;
        let minimum = number("minimum").map_or(1, |m| m.max(1.0).ceil() as u64);
        let most = number("maximum").map(|m| (m.max(0.0).floor() as u64) / step * step);
        Some(Side {
            least: minimum.div_ceil(step) * step,
            most,
            step,
            zero_means_auto: field.rule("x-zero-means-auto") == Some(&Value::Bool(true)),
        })
    }

    fn accepts(&self, value: u64) -> bool {
        (value == 0 && self.zero_means_auto)
            || (value >= self.least && self.most.is_none_or(|most| value <= most) && value.is_multiple_of(self.step))
    }

    /// The accepted values nearest to `value`: it, the multiples either side
    /// of it (both when as near), or the bound it is beyond.
    fn nearest(&self, value: u64) -> Vec<u64> {
        if self.accepts(value) {
            return vec![value];
        }
        let below = value / self.step * self.step;
        let clamp = |v: u64| self.most.map_or(v, |most| v.min(most)).max(self.least);
        let (below, above) = (clamp(below), clamp(below + self.step));
        let nearest = below.abs_diff(value).min(above.abs_diff(value));
        let mut values: Vec<u64> = [below, above]
            .into_iter()
            .filter(|v| v.abs_diff(value) == nearest)
            .collect();
        values.dedup();
        values
    }

    /// The largest accepted value not above `limit`.
    fn at_most(&self, limit: u64) -> Option<u64> {
        let capped = self.most.map_or(limit, |most| most.min(limit));
        Some(capped / self.step * self.step).filter(|v| *v >= self.least)
    }

    /// Every accepted value but 0, smallest first.
    fn values(&self) -> impl Iterator<Item = u64> + '_ {
        let step = usize::try_from(self.step).unwrap_or(usize::MAX);
        (self.least..=self.most.unwrap_or(u64::MAX)).step_by(step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(least: u64, most: Option<u64>, step: u64) -> Side {
        Side {
            least,
            most,
            step,
            zero_means_auto: false,
        }
    }

    /// 256 to 1440 in steps of 32, as the older models take.
    fn bounded() -> Sizes {
        Sizes {
            width: side(256, Some(1440), 32),
            height: side(256, Some(1440), 32),
            max_pixels: None,
        }
    }

    /// At least 64, in steps of 16, at most 4 MP, as the newer models take.
    fn by_area() -> Sizes {
        Sizes {
            width: side(64, None, 16),
            height: side(64, None, 16),
            max_pixels: Some(4 * 1_048_576),
        }
    }

    #[test]
    fn a_side_between_two_multiples_names_the_nearer_or_both_when_as_near() {
        assert_eq!(by_area().nearest(1000, 768), [(992, 768), (1008, 768)]);
        assert_eq!(by_area().nearest(1003, 768), [(1008, 768)]);
        assert_eq!(
            by_area().nearest(1000, 1000),
            [(992, 992), (992, 1008), (1008, 992), (1008, 1008)]
        );
    }

    #[test]
    fn an_accepted_size_is_its_own_nearest() {
        assert!(by_area().accepts(1024, 768));
        assert_eq!(by_area().nearest(1024, 768), [(1024, 768)]);
        assert_eq!(bounded().nearest(1440, 256), [(1440, 256)]);
    }

    #[test]
    fn below_the_minimum_the_minimum_is_nearest() {
        assert_eq!(by_area().nearest(5, 5), [(64, 64)]);
        assert_eq!(bounded().nearest(100, 512), [(256, 512)]);
        assert_eq!(bounded().nearest(0, 512), [(256, 512)]);
    }

    #[test]
    fn above_the_maximum_the_largest_multiple_is_nearest() {
        assert_eq!(bounded().nearest(2000, 1024), [(1440, 1024)]);
        // Bounds that are no multiples are brought inside to ones.
        let schema = serde_json::json!({"type": "integer", "minimum": 250, "maximum": 1424, "multipleOf": 32});
        let width = Field::read(&Value::Null, "width", &schema, false);
        let uneven = Sizes {
            width: Side::read(&width).unwrap(),
            ..bounded()
        };
        assert_eq!(uneven.nearest(1500, 512), [(1408, 512)]);
        assert_eq!(uneven.nearest(100, 512), [(256, 512)]);
    }

    #[test]
    fn above_the_pixel_limit_the_nearest_size_within_it_is_named() {
        let sizes = by_area();
        assert!(!sizes.accepts(2064, 2048), "a column of 16 too many");
        assert_eq!(sizes.nearest(2064, 2048), [(2048, 2048)]);
        // Far above it, the shape asked is kept.
        assert_eq!(sizes.nearest(8000, 8000), [(2048, 2048)]);
        assert_eq!(sizes.nearest(3000, 2000), [(2496, 1680)]);
        // The side that gives way least in proportion gives way.
        assert_eq!(sizes.nearest(4096, 1040), [(4096, 1024)]);
        assert_eq!(sizes.nearest(100_000, 64), [(65536, 64)]);
    }

    /// What the validator says of a body with this size (and whatever else
    /// the request needs), width, height and pixel limit only.
    fn validator_accepts(schema: &str, width: u32, height: u32) -> bool {
        let document = crate::validate::Document::embedded();
        let body = serde_json::json!({"width": width, "height": height});
        document.validate(schema, &body).iter().all(|problem| {
            let at: Vec<String> = problem.loc.iter().map(ToString::to_string).collect();
            let about_size = at.iter().any(|l| l == "width" || l == "height") || problem.msg.contains("pixels");
            !about_size
        })
    }

    #[test]
    fn the_document_sizes_agree_with_the_validator_and_every_suggestion_passes_it() {
        let document = crate::validate::Document::embedded();
        let mut read = 0;
        for model in document.catalog().models() {
            let Some(schema) = model.operation.request_schema.as_deref() else {
                continue;
            };
            let Some(sizes) = document.sizes(schema) else {
                continue;
            };
            read += 1;
            for (w, h) in [
                (1000, 768),
                (1024, 768),
                (5, 5),
                (64, 64),
                (2000, 1024),
                (2064, 2048),
                (8000, 8000),
            ] {
                assert_eq!(sizes.accepts(w, h), validator_accepts(schema, w, h), "{schema} {w}x{h}");
                let nearest = sizes.nearest(w, h);
                assert!(!nearest.is_empty(), "{schema} {w}x{h}");
                for (nw, nh) in nearest {
                    assert!(validator_accepts(schema, nw, nh), "{schema}: {nw}x{nh} for {w}x{h}");
                }
            }
        }
        assert!(read >= 3, "the models with sizes were not read");
    }

    #[test]
    fn zero_stays_where_it_means_the_model_chooses() {
        let auto = Side {
            zero_means_auto: true,
            ..side(64, None, 16)
        };
        let sizes = Sizes {
            width: auto,
            height: auto,
            max_pixels: Some(4 * 1_048_576),
        };
        assert!(sizes.accepts(0, 0));
        assert_eq!(sizes.nearest(0, 770), [(0, 768)]);
    }
}
