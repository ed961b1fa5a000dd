//! How a series looks: its palette colour (chosen by its name), its marker's shape, the
//! paper's diamond, and the mark of a value a logarithmic axis cannot show.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::super::*;

pub(super) const MARKER_R: i32 = 4;
/// Half-diagonal of the paper's diamond ([`LineStyle::Paper`]).
const PAPER_R: i32 = 7;
/// The paper's near-black: darker than the text's ink, and apart from it, so that a reader (and
/// the figure check) tells the paper's marks from the figure's lettering.
pub(super) const PAPER_INK: RGBColor = RGBColor(0x11, 0x11, 0x11);

/// The palette slot (colour and marker) of each series name, in order. A name the figure
/// fixes ([`LineFigure::colours`]) has its slot. The others choose by rendezvous hashing: each
/// name ranks the slots by a hash of (name, slot), and the names, in an order set by a hash of
/// the name alone, take their best-ranked slot still free. So a name's colour depends only on
/// the fixed names and on the names before it in that order — never on the legend's order or
/// on the names after it: sibling figures with mostly the same series give those series the
/// same colours, and a series keeps its colour when others come and go unless one that comes
/// before it wants its slot. More names than slots: a name takes its best slot again (the
/// markers on its line tell the repeats apart).
pub(in crate::plot) fn colour_slots(names: &[&str], fixed: &[(String, usize)]) -> Vec<usize> {
    use sha2::{Digest, Sha256};
    let n = PALETTE.len();
    let hash = |parts: &[&[u8]]| -> [u8; 32] {
        let mut h = Sha256::new();
        for p in parts {
            h.update(p);
        }
        h.finalize().into()
    };
    let mut taken = vec![false; n];
    let mut out: Vec<Option<usize>> = names
        .iter()
        .map(|name| {
            let k = fixed.iter().find(|(f, _)| f == name).map(|&(_, k)| k % n);
            if let Some(k) = k {
                taken[k] = true;
            }
            k
        })
        .collect();
    let mut order: Vec<usize> = (0..names.len()).filter(|&i| out[i].is_none()).collect();
    order.sort_by_key(|&i| (hash(&[names[i].as_bytes()]), i));
    for i in order {
        let mut ranked: Vec<usize> = (0..n).collect();
        ranked.sort_by_key(|&k| hash(&[names[i].as_bytes(), &[0, k as u8]]));
        let slot = ranked
            .iter()
            .copied()
            .find(|&k| !taken[k])
            .unwrap_or(ranked[0]);
        taken[slot] = true;
        out[i] = Some(slot);
    }
    out.into_iter().map(|k| k.unwrap_or(0)).collect()
}

/// An open triangle pointing down whose tip is just above `bottom` at `x`: a point whose
/// value the logarithmic axis cannot show.
pub(super) fn draw_below<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    (x, bottom): (i32, i32),
    color: RGBColor,
) -> Result<(), PlotError> {
    let r = MARKER_R + 1;
    let tri = vec![
        (x - r, bottom - 2 * r - 1),
        (x + r, bottom - 2 * r - 1),
        (x, bottom - 1),
        (x - r, bottom - 2 * r - 1),
    ];
    root.draw(&PathElement::new(tri, color.stroke_width(2)))
        .map_err(draw_err)
}

/// The paper's mark ([`LineStyle::Paper`]): a diamond larger than any series' marker, near
/// black with a white rim, so it stays seen over lines and bands of any colour.
pub(super) fn draw_paper_marker<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    (x, y): (i32, i32),
) -> Result<(), PlotError> {
    let diamond = |r: i32| vec![(x, y - r), (x + r, y), (x, y + r), (x - r, y)];
    root.draw(&Polygon::new(diamond(PAPER_R + 2), WHITE.filled()))
        .map_err(draw_err)?;
    root.draw(&Polygon::new(diamond(PAPER_R), PAPER_INK.filled()))
        .map_err(draw_err)
}

pub(super) fn draw_marker<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    (x, y): (i32, i32),
    shape: usize,
    color: RGBColor,
) -> Result<(), PlotError> {
    let r = MARKER_R;
    let style = color.filled();
    // Shapes vary with colour so series stay distinguishable in greyscale: one shape per
    // palette colour (four shapes for eight colours gave two series of one figure one shape).
    let ring = |points: usize, turn: f64, radius: &dyn Fn(usize) -> f64| -> Vec<(i32, i32)> {
        (0..points)
            .map(|k| {
                let a = turn + std::f64::consts::TAU * k as f64 / points as f64;
                let r = radius(k);
                (
                    x + (r * a.cos()).round() as i32,
                    y - (r * a.sin()).round() as i32,
                )
            })
            .collect()
    };
    let rf = f64::from(r) + 0.5;
    match shape % 8 {
        4 => root.draw(&Polygon::new(
            vec![(x, y + r + 1), (x + r + 1, y - r), (x - r - 1, y - r)],
            style,
        )),
        5 => root.draw(&Polygon::new(ring(6, 0.0, &|_| rf + 0.5), style)),
        // A star of five points.
        6 => root.draw(&Polygon::new(
            ring(10, std::f64::consts::FRAC_PI_2, &|k| {
                if k % 2 == 0 {
                    rf + 1.5
                } else {
                    0.45 * rf
                }
            }),
            style,
        )),
        // A plus.
        7 => root.draw(&Polygon::new(
            {
                let (a, b) = (r + 1, (r + 1) / 3 + 1);
                vec![
                    (x - b, y - a),
                    (x + b, y - a),
                    (x + b, y - b),
                    (x + a, y - b),
                    (x + a, y + b),
                    (x + b, y + b),
                    (x + b, y + a),
                    (x - b, y + a),
                    (x - b, y + b),
                    (x - a, y + b),
                    (x - a, y - b),
                    (x - b, y - b),
                ]
            },
            style,
        )),
        0 => root.draw(&Circle::new((x, y), r, style)),
        1 => root.draw(&Rectangle::new(
            [(x - r + 1, y - r + 1), (x + r - 1, y + r - 1)],
            style,
        )),
        2 => root.draw(&Polygon::new(
            vec![(x, y - r - 1), (x + r + 1, y + r), (x - r - 1, y + r)],
            style,
        )),
        // 3: a diamond.
        _ => root.draw(&Polygon::new(
            vec![
                (x, y - r - 1),
                (x + r + 1, y),
                (x, y + r + 1),
                (x - r - 1, y),
            ],
            style,
        )),
    }
    .map_err(draw_err)
}
