//! Kind `thumbnail`: a compute-heavy kind built on the `image` crate.
//!
//! Input: `{"width": 640, "height": 480}` to draw a deterministic test image, or
//! `{"png_base64": "iVBORw0..."}` to start from a PNG; optionally `"max_edge"` (64 by
//! default) and `"filter"` (`nearest`, `triangle`, `catmull-rom`, `gaussian` or
//! `lanczos3`, the default).
//!
//! - `render` draws or decodes the image and completes with it as base64 PNG.
//! - `resize` scales it to fit `max_edge` (never up) and completes with raw RGBA pixels.
//! - `encode` compresses those into a PNG and completes with its length, CRC-32 and
//!   base64 bytes.
//!
//! Images travel between steps inside JSON outputs, so every dimension is capped.

use std::io::Cursor;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use image::codecs::png::{CompressionType, FilterType as PngFilter, PngEncoder};
use image::imageops::FilterType;
use image::{ImageEncoder, ImageFormat, ImageReader, Limits, Rgba, RgbaImage};
use serde::{Deserialize, Serialize};
use spindle_guest::prelude::*;

struct Thumbnail;

/// Largest width or height accepted: a 4096² RGBA image is 64 MiB decoded, which is
/// as much as a step should ask of its sandbox.
const MAX_DIMENSION: u32 = 4_096;
/// Ceiling on what a PNG decoder may allocate, for the same reason.
const MAX_DECODE_BYTES: u64 = 80 * 1024 * 1024;
const DEFAULT_MAX_EDGE: u32 = 64;

/// The job's input: an image given inline, or one to draw of this size.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Input {
    width: Option<u32>,
    height: Option<u32>,
    png_base64: Option<String>,
    #[serde(default = "default_max_edge")]
    max_edge: u32,
    #[serde(default)]
    filter: Filter,
}

fn default_max_edge() -> u32 {
    DEFAULT_MAX_EDGE
}

#[derive(Debug, Default, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
enum Filter {
    Nearest,
    Triangle,
    CatmullRom,
    Gaussian,
    #[default]
    Lanczos3,
}

impl From<Filter> for FilterType {
    fn from(filter: Filter) -> Self {
        match filter {
            Filter::Nearest => Self::Nearest,
            Filter::Triangle => Self::Triangle,
            Filter::CatmullRom => Self::CatmullRom,
            Filter::Gaussian => Self::Gaussian,
            Filter::Lanczos3 => Self::Lanczos3,
        }
    }
}

/// `render`'s output.
#[derive(Debug, Serialize, Deserialize)]
struct Rendered {
    width: u32,
    height: u32,
    png: String,
}

/// `resize`'s output: raw pixels, so `encode` has real work to do.
#[derive(Debug, Serialize, Deserialize)]
struct Resized {
    width: u32,
    height: u32,
    rgba: String,
}

#[derive(Debug, Serialize)]
struct Encoded {
    width: u32,
    height: u32,
    bytes: usize,
    crc32: String,
    png: String,
}

impl Kind for Thumbnail {
    fn describe() -> KindSpec {
        KindSpec::new("thumbnail")
            .input::<Input>()
            .step("render", 1)
            .step("resize", 2)
            .step("encode", 1)
            .retry(2, 100, 1_000)
    }

    fn run_step(step: &mut Step) -> Result<Outcome, StepError> {
        match step.key() {
            "render" => render(step),
            "resize" => resize(step),
            "encode" => encode(step),
            other => Err(StepError::unknown_step(other)),
        }
    }
}

fn render(step: &Step) -> Result<Outcome, StepError> {
    let input: Input = step.input()?;
    let rendered = match (input.png_base64, input.width, input.height) {
        (Some(png), None, None) => {
            let bytes = BASE64.decode(png.as_bytes()).refused_with("bad-image", "`png_base64` is not base64")?;
            let image = decode_png(&bytes)?;
            Rendered { width: image.width(), height: image.height(), png: png.clone() }
        }
        (None, Some(width), Some(height)) => {
            check_dimensions(width, height)?;
            let image = test_pattern(width, height);
            Rendered { width, height, png: BASE64.encode(encode_png(&image, CompressionType::Fast)?) }
        }
        _ => {
            return Err(StepError::refused("invalid-input", "give either `png_base64` or both `width` and `height`"));
        }
    };
    log::info(format!("rendered {}x{}", rendered.width, rendered.height));
    Ok(Outcome::complete(&rendered))
}

fn resize(step: &Step) -> Result<Outcome, StepError> {
    let input: Input = step.input()?;
    if input.max_edge == 0 {
        return Err(StepError::refused("invalid-input", "`max_edge` must be at least 1"));
    }
    let rendered: Rendered = step.prior("render")?;
    let bytes =
        BASE64.decode(rendered.png.as_bytes()).refused_with("invalid-prior", "`render` output is not base64")?;
    let image = decode_png(&bytes)?;
    let (width, height) = fit(image.width(), image.height(), input.max_edge);
    let thumbnail = image::imageops::resize(&image, width, height, input.filter.into());
    Ok(Outcome::complete(&Resized { width, height, rgba: BASE64.encode(thumbnail.as_raw()) }))
}

fn encode(step: &Step) -> Result<Outcome, StepError> {
    let resized: Resized = step.prior("resize")?;
    check_dimensions(resized.width, resized.height)?;
    let pixels =
        BASE64.decode(resized.rgba.as_bytes()).refused_with("invalid-prior", "`resize` output is not base64")?;
    let image = RgbaImage::from_raw(resized.width, resized.height, pixels)
        .ok_or_else(|| StepError::refused("invalid-prior", "`resize` output does not match its dimensions"))?;
    let png = encode_png(&image, CompressionType::Best)?;
    Ok(Outcome::complete(&Encoded {
        width: resized.width,
        height: resized.height,
        bytes: png.len(),
        crc32: format!("{:08x}", crc32fast::hash(&png)),
        png: BASE64.encode(&png),
    }))
}

/// Dimensions that fit within `max_edge`, keeping the aspect ratio and never scaling up.
fn fit(width: u32, height: u32, max_edge: u32) -> (u32, u32) {
    let longest = width.max(height);
    if longest <= max_edge {
        return (width, height);
    }
    let scale = |side: u32| {
        let scaled = u64::from(side) * u64::from(max_edge) / u64::from(longest);
        u32::try_from(scaled).unwrap_or(max_edge).max(1)
    };
    (scale(width), scale(height))
}

fn check_dimensions(width: u32, height: u32) -> Result<(), StepError> {
    if width == 0 || height == 0 || width > MAX_DIMENSION || height > MAX_DIMENSION {
        return Err(StepError::refused("too-large", format!("each side must be between 1 and {MAX_DIMENSION} pixels")));
    }
    Ok(())
}

/// Decodes an untrusted PNG under dimension and allocation caps.
fn decode_png(bytes: &[u8]) -> Result<RgbaImage, StepError> {
    let mut reader = ImageReader::with_format(Cursor::new(bytes), ImageFormat::Png);
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_DIMENSION);
    limits.max_image_height = Some(MAX_DIMENSION);
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    reader.limits(limits);
    let image = reader.decode().refused_with("bad-image", "the image is not a PNG within the size limits")?;
    Ok(image.into_rgba8())
}

fn encode_png(image: &RgbaImage, compression: CompressionType) -> Result<Vec<u8>, StepError> {
    let mut png = Vec::new();
    PngEncoder::new_with_quality(&mut png, compression, PngFilter::Adaptive)
        .write_image(image.as_raw(), image.width(), image.height(), image::ExtendedColorType::Rgba8)
        .refused("encode-failed")?;
    Ok(png)
}

/// A deterministic picture with detail at every scale, so filters differ visibly:
/// a colour gradient, a checkerboard and a ring.
fn test_pattern(width: u32, height: u32) -> RgbaImage {
    let (w, h) = (u64::from(width), u64::from(height));
    let (cx, cy) = (w / 2, h / 2);
    let radius = w.min(h) / 3;
    RgbaImage::from_fn(width, height, |x, y| {
        let (x, y) = (u64::from(x), u64::from(y));
        let channel = |value: u64| u8::try_from(value.min(255)).unwrap_or(u8::MAX);
        let dx = x.abs_diff(cx);
        let dy = y.abs_diff(cy);
        let distance_sq = dx * dx + dy * dy;
        let on_ring = distance_sq <= radius * radius && distance_sq + 4 * radius >= radius * radius;
        if on_ring {
            return Rgba([255, 255, 255, 255]);
        }
        let checker = ((x / 8) + (y / 8)) % 2 == 0;
        let shade = if checker { 0 } else { 48 };
        Rgba([
            channel(x * 255 / w.max(1)).saturating_sub(shade),
            channel(y * 255 / h.max(1)).saturating_sub(shade),
            channel(128 + (x ^ y) % 64),
            255,
        ])
    })
}

spindle_guest::export_kind!(Thumbnail);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_keeps_the_aspect_ratio_and_never_upscales() {
        assert_eq!(fit(640, 480, 64), (64, 48));
        assert_eq!(fit(480, 640, 64), (48, 64));
        assert_eq!(fit(10_000, 1, 64), (64, 1));
        assert_eq!(fit(32, 16, 64), (32, 16));
    }

    #[test]
    fn a_rendered_pattern_survives_a_png_round_trip() {
        let image = test_pattern(40, 30);
        let png = encode_png(&image, CompressionType::Best).expect("encodes");
        assert_eq!(decode_png(&png).expect("decodes"), image);
    }
}

#[cfg(test)]
mod job_tests {
    use spindle_guest::testing::run_job;

    use super::*;

    #[derive(Debug, Deserialize)]
    struct EncodedOutput {
        width: u32,
        height: u32,
        bytes: usize,
        crc32: String,
        png: String,
    }

    #[test]
    fn renders_resizes_and_encodes_a_test_image() {
        let run = run_job::<Thumbnail>(br#"{"width": 200, "height": 100, "filter": "catmull-rom"}"#);
        assert!(run.succeeded(), "{:?}", run.failure);
        let encoded: EncodedOutput = run.output("encode").expect("encode completed");
        assert_eq!((encoded.width, encoded.height), (64, 32));
        let png = BASE64.decode(encoded.png).expect("base64");
        assert_eq!(png.len(), encoded.bytes);
        assert_eq!(encoded.crc32, format!("{:08x}", crc32fast::hash(&png)));
        assert_eq!(decode_png(&png).expect("a PNG").dimensions(), (64, 32));
    }

    #[test]
    fn starts_from_a_given_png_and_refuses_garbage() {
        let png = encode_png(&test_pattern(30, 90), CompressionType::Fast).expect("encodes");
        let payload = serde_json::json!({ "png_base64": BASE64.encode(png), "max_edge": 45 });
        let run = run_job::<Thumbnail>(payload.to_string().as_bytes());
        let encoded: EncodedOutput = run.output("encode").expect("encode completed");
        assert_eq!((encoded.width, encoded.height), (15, 45));

        let garbage = serde_json::json!({ "png_base64": BASE64.encode(b"not a png") });
        let run = run_job::<Thumbnail>(garbage.to_string().as_bytes());
        assert_eq!(run.failure.map(|f| f.code), Some("bad-image".to_owned()));
    }
}
