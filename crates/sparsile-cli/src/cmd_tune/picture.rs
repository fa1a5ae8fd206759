//! `sparsile tune --strategy stile --picture DIR`: which non-zeros of the matrix each
//! part of a tiles decomposition holds, as a PNG.
//!
//! The matrix is scaled down to at most [`MAX_SIDE`] pixels on its longer side; each
//! pixel takes the colour of the part that holds most of the non-zeros it covers
//! (ties: the larger tiles), white where it covers none. Colours: 32 × 32 tiles red,
//! 16 × 16 orange, 8 × 8 green, 4 × 4 blue, 2 × 2 purple, scattered non-zeros dark grey.
//!
//! ```text
//! sparsile tune --op spmm --k 32 --matrix data/attn_longformer_4096_w512.mtx.gz \
//!     --strategy stile --picture pictures/
//! ```

use std::path::Path;

use anyhow::{Context, Result};
use sparsile::formats::decompose::{DecomposePlan, DecomposeRule, PADDING};
use sparsile::formats::SparseTensor;

/// The longest side of a picture, in pixels.
pub const MAX_SIDE: usize = 1024;

const WHITE: [u8; 3] = [255, 255, 255];
const SCATTERED: [u8; 3] = [64, 64, 64];

/// The colour of a tile side, and its name.
fn tile_colour(side: usize) -> ([u8; 3], &'static str) {
    match side {
        32.. => ([214, 39, 40], "red"),
        16..=31 => ([255, 127, 14], "orange"),
        8..=15 => ([44, 160, 44], "green"),
        4..=7 => ([31, 119, 180], "blue"),
        _ => ([148, 103, 189], "purple"),
    }
}

/// Writes the picture of `rule`'s parts of `a` to `path`; returns its legend.
pub fn write(a: &SparseTensor<'_>, rule: &DecomposeRule, path: &Path) -> Result<String> {
    let DecomposeRule::Tiles { levels } = rule else {
        anyhow::bail!("a picture shows a tiles(…) decomposition, not `{rule}`");
    };
    let shape = a.shape().to_vec();
    let [m, n] = shape[..] else {
        anyhow::bail!("a picture needs a matrix, got shape {shape:?}");
    };
    let plan = DecomposePlan::new(rule, &a.structure).context("decomposing the matrix")?;
    let coords = plan
        .source_coordinates(&a.structure)
        .context("reading the matrix's entries")?;
    // Part 0 is the scattered rest; part l + 1 the tiles of level l.
    let colours: Vec<[u8; 3]> = std::iter::once(SCATTERED)
        .chain(levels.iter().map(|l| tile_colour(l.r.max(l.c)).0))
        .collect();
    let scale = m.max(n).div_ceil(MAX_SIDE).max(1);
    let (h, w) = (m.div_ceil(scale).max(1), n.div_ceil(scale).max(1));
    let parts = plan.parts.len();
    let mut counts = vec![0u32; h * w * parts];
    for (p, part) in plan.parts.iter().enumerate() {
        for &g in part.gather.iter().filter(|&&g| g != PADDING) {
            let (i, j) = (coords[2 * g], coords[2 * g + 1]);
            counts[((i / scale) * w + j / scale) * parts + p] += 1;
        }
    }
    let mut pixels = Vec::with_capacity(h * w * 3);
    for px in counts.chunks(parts) {
        // The part with the most non-zeros; among equals, tiles before the scattered
        // rest and larger tiles (listed first) before smaller.
        let best = (0..parts)
            .max_by_key(|&p| (px[p], p != 0, std::cmp::Reverse(p)))
            .filter(|&p| px[p] > 0);
        pixels.extend_from_slice(&best.map_or(WHITE, |p| colours[p]));
    }
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), w as u32, h as u32);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder
        .write_header()
        .and_then(|mut writer| writer.write_image_data(&pixels))
        .with_context(|| format!("cannot write {}", path.display()))?;
    let mut legend: Vec<String> = levels
        .iter()
        .map(|l| format!("{} {}x{} tiles", tile_colour(l.r.max(l.c)).1, l.r, l.c))
        .collect();
    legend.push("dark grey scattered".into());
    Ok(format!(
        "{w} x {h} pixels, {scale} x {scale} entries a pixel: {}",
        legend.join(", ")
    ))
}
