use super::*;

fn series(name: &str, x: &[f64], f: impl Fn(f64) -> f64, band: bool, style: LineStyle) -> Series {
    let y: Vec<f64> = x.iter().map(|&v| f(v)).collect();
    Series {
        below: Vec::new(),
        name: name.into(),
        x: x.to_vec(),
        band: band.then(|| {
            (
                y.iter().map(|v| v * 0.8).collect(),
                y.iter().map(|v| v * 1.25).collect(),
            )
        }),
        y,
        style,
    }
}

/// Two facets, bands, log y, a reference line: the typical "error vs ε" figure.
pub(crate) fn sample_lines() -> LineFigure {
    let eps: Vec<f64> = (0..12).map(|i| 0.05 * 1.6f64.powi(i)).collect();
    let panel = |n: f64| Panel {
        title: format!("n = {n}"),
        series: vec![
            series(
                "Laplace",
                &eps,
                |e| 1.0 / (e * n.sqrt()),
                true,
                LineStyle::LineMarkers,
            ),
            series(
                "Gaussian (δ = 10⁻⁶)",
                &eps,
                |e| 2.2 / (e * n.sqrt()),
                true,
                LineStyle::Solid,
            ),
            series(
                "lower bound",
                &eps,
                |e| 0.5 / (e * n.sqrt()),
                false,
                LineStyle::Dashed,
            ),
        ],
        hlines: vec![("OPT = 0.05".into(), 0.05)],
        y_label: String::new(),
        log_y: None,
    };
    LineFigure {
        below_label: String::new(),
        y_min: None,
        colours: vec![],
        title: "Mean estimation error vs privacy budget".into(),
        x_label: "privacy budget ε".into(),
        y_label: "mean absolute error".into(),
        log_x: true,
        log_y: true,
        panels: vec![panel(100.0), panel(1000.0)],
        columns: 0,
        free_x: false,
        width: 560,
        height: 420,
    }
}

/// Two facets with a contour at rate = 1 and a few missing cells.
pub(crate) fn sample_heatmap() -> HeatmapFigure {
    let eps: Vec<f64> = (0..10).map(|i| 0.1 * 2f64.powf(i as f64 * 0.6)).collect();
    let ns: Vec<f64> = (0..8).map(|i| 10f64.powf(1.0 + i as f64 * 0.5)).collect();
    let panel = |k: f64, title: &str| {
        let mut z = Vec::new();
        for (iy, &n) in ns.iter().enumerate() {
            for (ix, &e) in eps.iter().enumerate() {
                z.push(if ix == 9 && iy >= 6 {
                    f64::NAN
                } else {
                    k * e * n.sqrt() / 30.0
                });
            }
        }
        HeatPanel {
            title: title.into(),
            x: eps.clone(),
            y: ns.clone(),
            z,
        }
    };
    HeatmapFigure {
        title: "Empirical privacy-loss rate".into(),
        x_label: "ε".into(),
        y_label: "sample size n".into(),
        z_label: "rate".into(),
        log_x: true,
        log_y: true,
        panels: vec![panel(1.0, "Laplace"), panel(0.4, "Gaussian")],
        columns: 2,
        contour: Some(1.0),
        log_z: true,
        centre: None,
        width: 460,
        height: 400,
    }
}

fn assert_svg(svg: &str) {
    assert!(
        svg.trim_start().starts_with("<svg"),
        "not an SVG: {}",
        &svg[..svg.len().min(80)]
    );
    assert!(svg.trim_end().ends_with("</svg>"));
    // Tags balance; cheap structural sanity check without an XML parser.
    assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
}

#[test]
fn line_figure_two_panels_bands_log_hline() {
    let svg = render_lines(&sample_lines()).unwrap();
    assert_svg(&svg);
    for needle in [
        "Mean estimation error vs privacy budget",
        "Laplace",
        "Gaussian (δ = 10⁻⁶)",
        "lower bound",
        "OPT = 0.05",
        "privacy budget ε",
        "mean absolute error",
        "n = 100",
        "n = 1000",
    ] {
        assert!(svg.contains(needle), "missing {needle:?}");
    }
    // Bands are translucent polygons.
    assert!(svg.contains("<polygon"));
    // Legend text must be readable: no text smaller than 14 px.
    for part in svg.split("font-size=\"").skip(1) {
        let size: f64 = part.split('"').next().unwrap().parse().unwrap();
        assert!(size >= 13.9, "font too small: {size}");
    }
}

#[test]
fn single_panel_linear_with_nan_gap() {
    let mut fig = sample_lines();
    fig.panels.truncate(1);
    fig.log_x = false;
    fig.log_y = false;
    fig.panels[0].series[0].y[4] = f64::NAN;
    let svg = render_lines(&fig).unwrap();
    assert_svg(&svg);
    assert!(svg.contains("Laplace"));
}

#[test]
fn heatmap_two_panels_contour() {
    let svg = render_heatmap(&sample_heatmap()).unwrap();
    assert_svg(&svg);
    assert!(
        svg.contains("rate (black line at 1)"),
        "colour bar label missing"
    );
    assert!(svg.contains("Laplace") && svg.contains("Gaussian"));
    assert!(svg.contains("no data"));
    assert!(svg.contains("sample size n"));
}

#[test]
fn error_empty_panels() {
    let mut fig = sample_lines();
    fig.panels.clear();
    assert!(matches!(
        render_lines(&fig),
        Err(PlotError::NoPanels { .. })
    ));
    let mut fig = sample_lines();
    fig.panels[1].series.clear();
    fig.panels[1].hlines.clear();
    assert!(matches!(
        render_lines(&fig),
        Err(PlotError::EmptyPanel { .. })
    ));
    let mut h = sample_heatmap();
    h.panels.clear();
    assert!(matches!(
        render_heatmap(&h),
        Err(PlotError::NoPanels { .. })
    ));
}

#[test]
fn error_all_nan_series() {
    let mut fig = sample_lines();
    fig.panels[0].series[1]
        .y
        .iter_mut()
        .for_each(|v| *v = f64::NAN);
    match render_lines(&fig) {
        Err(PlotError::NoFiniteData { series }) => assert_eq!(series, "Gaussian (δ = 10⁻⁶)"),
        other => panic!("expected NoFiniteData, got {other:?}"),
    }
    let mut h = sample_heatmap();
    h.panels
        .iter_mut()
        .for_each(|p| p.z.iter_mut().for_each(|v| *v = f64::NAN));
    assert!(matches!(
        render_heatmap(&h),
        Err(PlotError::NoFiniteData { .. })
    ));
}

#[test]
fn error_negative_on_log_axis() {
    let mut fig = sample_lines();
    fig.panels[1].series[0].y[3] = -0.5;
    let err = render_lines(&fig).unwrap_err();
    match &err {
        PlotError::NonPositiveOnLog {
            series,
            axis,
            value,
        } => {
            assert_eq!(series, "Laplace");
            assert_eq!(*axis, "y");
            assert_eq!(*value, -0.5);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.to_string().contains("-0.5") && err.to_string().contains("Laplace"));

    let mut fig = sample_lines();
    fig.panels[0].series[2].x[0] = 0.0;
    assert!(matches!(
        render_lines(&fig),
        Err(PlotError::NonPositiveOnLog { axis: "x", .. })
    ));

    let mut h = sample_heatmap();
    h.panels[0].z[0] = -1.0;
    assert!(matches!(
        render_heatmap(&h),
        Err(PlotError::NonPositiveOnLog { axis: "z", .. })
    ));
}

#[test]
fn band_reaching_zero_on_log_axis_is_drawn_not_rejected() {
    let mut fig = sample_lines();
    if let Some((lo, _)) = &mut fig.panels[0].series[0].band {
        lo[0] = 0.0;
    }
    assert!(render_lines(&fig).is_ok());
}

#[test]
fn other_bad_input_is_an_error_not_a_panic() {
    let mut fig = sample_lines();
    fig.panels[0].series[0].y.pop();
    assert!(matches!(
        render_lines(&fig),
        Err(PlotError::LengthMismatch { .. })
    ));

    let mut fig = sample_lines();
    fig.width = 10;
    assert!(matches!(
        render_lines(&fig),
        Err(PlotError::TooSmall { .. })
    ));

    let mut h = sample_heatmap();
    h.panels[0].x.swap(0, 1);
    assert!(matches!(
        render_heatmap(&h),
        Err(PlotError::NotAscending { .. })
    ));

    let mut h = sample_heatmap();
    h.panels[0].z.pop();
    assert!(matches!(
        render_heatmap(&h),
        Err(PlotError::LengthMismatch { .. })
    ));
}

#[test]
fn degenerate_but_valid_inputs_render() {
    // One point, constant series, infinities, one-cell heatmap, constant z.
    let fig = LineFigure {
        below_label: String::new(),
        y_min: None,
        colours: vec![],
        title: String::new(),
        x_label: String::new(),
        y_label: String::new(),
        log_x: false,
        log_y: false,
        panels: vec![Panel {
            title: String::new(),
            series: vec![
                Series {
                    below: Vec::new(),
                    name: "one".into(),
                    x: vec![1.0],
                    y: vec![2.0],
                    band: None,
                    style: LineStyle::Solid,
                },
                Series {
                    below: Vec::new(),
                    name: "flat".into(),
                    x: vec![0.0, 1.0, f64::INFINITY],
                    y: vec![2.0, 2.0, 3.0],
                    band: None,
                    style: LineStyle::Markers,
                },
            ],
            hlines: vec![],
            y_label: String::new(),
            log_y: None,
        }],
        columns: 5,
        free_x: false,
        width: 400,
        height: 300,
    };
    assert_svg(&render_lines(&fig).unwrap());
    let h = HeatmapFigure {
        title: String::new(),
        x_label: String::new(),
        y_label: String::new(),
        z_label: String::new(),
        log_x: true,
        log_y: false,
        panels: vec![HeatPanel {
            title: String::new(),
            x: vec![3.0],
            y: vec![0.0],
            z: vec![5.0],
        }],
        columns: 0,
        contour: Some(5.0),
        log_z: false,
        centre: None,
        width: 300,
        height: 300,
    };
    assert_svg(&render_heatmap(&h).unwrap());
}

#[test]
fn viridis_endpoints() {
    assert_eq!(heatmap::viridis(0.0), RGBColor(0x44, 0x01, 0x54));
    assert_eq!(heatmap::viridis(1.0), RGBColor(0xFD, 0xE7, 0x25));
    assert_eq!(heatmap::viridis(f64::NAN), RGBColor(0x44, 0x01, 0x54));
}

/// A centred map is white at its centre, blue below and red above, each side reaching its
/// saturated end at the data's own extreme however lopsided the range is around the centre.
#[test]
fn a_centred_map_is_white_at_its_centre_blue_below_red_above() {
    let c = heatmap::colour_of;
    let range = (-1.0, 3.0); // log10 z from 0.1 to 1000, centred on 1 (log 0)
    assert_eq!(c(0.0, range, Some(0.0)), RGBColor(0xF7, 0xF7, 0xF7));
    assert_eq!(c(-1.0, range, Some(0.0)), RGBColor(0x05, 0x30, 0x61));
    assert_eq!(c(3.0, range, Some(0.0)), RGBColor(0x67, 0x00, 0x1F));
    for t in [-0.9, -0.5, -0.05] {
        let RGBColor(r, _, b) = c(t, range, Some(0.0));
        assert!(b > r, "{t}: ({r}, {b}) is not blue");
    }
    for t in [0.05, 1.0, 2.9] {
        let RGBColor(r, _, b) = c(t, range, Some(0.0));
        assert!(r > b, "{t}: ({r}, {b}) is not red");
    }
    // A centre below all the data: every cell is above it, so red, none white.
    let RGBColor(r, _, b) = c(1.0, (1.0, 2.0), Some(0.5));
    assert!(r > b && c(1.0, (1.0, 2.0), Some(0.5)) != RGBColor(0xF7, 0xF7, 0xF7));
    // Without a centre, viridis over the range.
    assert_eq!(c(-1.0, range, None), heatmap::viridis(0.0));
    assert_eq!(c(3.0, range, None), heatmap::viridis(1.0));
}

#[test]
fn dash_splits_a_line() {
    let segs = dash(&[(0, 0), (100, 0)], 10.0, 5.0);
    assert_eq!(segs.len(), 7);
    assert_eq!(segs[0], vec![(0, 0), (10, 0)]);
    assert_eq!(segs[1][0], (15, 0));
}

/// Writes sample SVGs when `PLOT_SAMPLES_DIR` is set (used to eyeball output).
#[test]
fn write_samples() {
    let Ok(dir) = std::env::var("PLOT_SAMPLES_DIR") else {
        return;
    };
    let mut single = sample_lines();
    single.panels.truncate(1);
    single.title = "Single panel, linear axes".into();
    single.log_x = false;
    single.log_y = false;
    let mut four = sample_lines();
    four.panels.push(sample_lines().panels.remove(0));
    four.panels.push(sample_lines().panels.remove(1));
    four.log_x = false;
    // A histogram-style step outline with zero bins removed (NaN) on log y,
    // plus many series with markers to stress the legend.
    let mut xs = vec![0.0];
    let mut ys = vec![f64::NAN];
    for b in 0..30 {
        let c = (200.0 * (-(b as f64 - 8.0).powi(2) / 30.0).exp()).floor();
        xs.extend([b as f64 * 0.5, b as f64 * 0.5 + 0.5]);
        let c = if c <= 0.0 { f64::NAN } else { c };
        ys.extend([c, c]);
    }
    let hist = LineFigure {
        below_label: String::new(),
        y_min: None,
        colours: vec![],
        title: "Histogram of noisy counts".into(),
        x_label: "released count".into(),
        y_label: "frequency".into(),
        log_x: false,
        log_y: true,
        panels: vec![Panel {
            title: String::new(),
            series: (0..9)
                .map(|k| Series {
                    below: Vec::new(),
                    name: if k == 0 {
                        "histogram".into()
                    } else {
                        format!("mechanism {k}")
                    },
                    x: if k == 0 {
                        xs.clone()
                    } else {
                        (0..15).map(|i| i as f64).collect()
                    },
                    y: if k == 0 {
                        ys.clone()
                    } else {
                        (0..15)
                            .map(|i| 1.0 + (k as f64) * (i as f64 + 1.0))
                            .collect()
                    },
                    band: None,
                    style: if k % 3 == 0 {
                        LineStyle::Solid
                    } else if k % 3 == 1 {
                        LineStyle::Markers
                    } else {
                        LineStyle::LineMarkers
                    },
                })
                .collect(),
            hlines: vec![("threshold".into(), 3.0), ("OPT = 3.01".into(), 50.0)],
            y_label: String::new(),
            log_y: None,
        }],
        columns: 0,
        free_x: false,
        width: 640,
        height: 440,
    };
    let three = LineFigure {
        below_label: String::new(),
        y_min: None,
        colours: vec![],
        title: "Free y scales when panels differ by orders of magnitude".into(),
        x_label: "n".into(),
        y_label: "value".into(),
        log_x: false,
        log_y: false,
        panels: (0..3)
            .map(|k| Panel {
                title: format!("scale 10^{}", 2 * k),
                series: vec![Series {
                    below: Vec::new(),
                    name: "signal".into(),
                    x: (0..20).map(|i| i as f64).collect(),
                    y: (0..20)
                        .map(|i| (i as f64 * 0.5).sin() * 100f64.powi(k) - 0.3)
                        .collect(),
                    band: None,
                    style: LineStyle::Solid,
                }],
                hlines: vec![],
                y_label: String::new(),
                log_y: None,
            })
            .collect(),
        columns: 0,
        free_x: false,
        width: 420,
        height: 320,
    };
    let mut heat_lin = sample_heatmap();
    heat_lin.title = "Linear axes, one panel, no contour".into();
    heat_lin.panels.truncate(1);
    heat_lin.panels[0].title.clear();
    heat_lin.log_x = false;
    heat_lin.log_y = false;
    heat_lin.log_z = false;
    heat_lin.contour = None;
    heat_lin.z_label = "empirical ε̂ (nats)".into();
    for (name, svg) in [
        ("lines_hist", render_lines(&hist).unwrap()),
        ("lines_three_free_y", render_lines(&three).unwrap()),
        ("heatmap_linear", render_heatmap(&heat_lin).unwrap()),
        ("lines", render_lines(&sample_lines()).unwrap()),
        ("lines_single", render_lines(&single).unwrap()),
        ("lines_four", render_lines(&four).unwrap()),
        ("heatmap", render_heatmap(&sample_heatmap()).unwrap()),
    ] {
        std::fs::write(format!("{dir}/{name}.svg"), svg).unwrap();
    }
}

#[test]
fn a_series_keeps_its_colour_when_others_come_and_go() {
    use super::lines::colour_slots;
    let names = [
        "grid floor (no noise)",
        "ours, PCA noise of §3.1 (default)",
        "ours, PCA noise of Algorithm 7",
        "ours, thesis calibration",
        "exact basis answers",
        "exact mean and PCA",
        "no noise (exact all)",
        "exponential mechanism",
    ];
    let slots = colour_slots(&names, &[]);
    // Distinct colours while there are enough.
    let mut seen = slots.clone();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), names.len(), "{slots:?}");
    // The legend's order does not matter: reversed, every name keeps its colour.
    let mut reversed = names;
    reversed.reverse();
    let mut back = colour_slots(&reversed, &[]);
    back.reverse();
    assert_eq!(back, slots);
    // A name's colour depends only on the names that choose before it: drop any subset of
    // the others and the names whose choices it did not take keep theirs. Checked for every
    // single drop: a name changes colour only if some name it now competes with differently
    // changed first — so the first name to choose never changes, and at most the names
    // after the dropped one in choosing order do.
    let alone: Vec<usize> = names.iter().map(|n| colour_slots(&[n], &[])[0]).collect();
    for drop in 0..names.len() {
        let rest: Vec<&str> = (0..names.len())
            .filter(|&i| i != drop)
            .map(|i| names[i])
            .collect();
        let rs = colour_slots(&rest, &[]);
        for (j, name) in rest.iter().enumerate() {
            let i = names.iter().position(|n| n == name).unwrap();
            // A name holding its first choice in the full figure still holds it.
            if slots[i] == alone[i] {
                assert_eq!(
                    rs[j], slots[i],
                    "{name} lost its first choice when {} went",
                    names[drop]
                );
            }
        }
    }
    // The first choice is the name's, not always the first colour.
    assert!(alone.iter().any(|&p| p != 0));
    // A fixed colour is kept, and no other name takes it while others are free.
    let fixed = vec![(names[3].to_string(), 0usize), (names[5].to_string(), 7)];
    let fs = colour_slots(&names, &fixed);
    assert_eq!((fs[3], fs[5]), (0, 7));
    let others: Vec<usize> = (0..names.len())
        .filter(|&i| i != 3 && i != 5)
        .map(|i| fs[i])
        .collect();
    assert!(!others.contains(&0) && !others.contains(&7), "{fs:?}");
}

/// The paper's values are drawn over every other series, first in the legend, near-black and
/// larger than a series' marker; a panel where only they have values says so in its title.
#[test]
fn the_paper_is_drawn_last_listed_first_and_named_where_it_stands_alone() {
    let paper = |x: &[f64]| Series {
        below: Vec::new(),
        name: "thesis".into(),
        x: x.to_vec(),
        y: x.iter().map(|v| 0.5 + v).collect(),
        band: None,
        style: LineStyle::Paper,
    };
    let mut f = sample_lines();
    f.panels.truncate(1);
    let x = f.panels[0].series[0].x.clone();
    // First in the panel's list, so only the drawing order can put it on top.
    f.panels[0].series.insert(0, paper(&x));
    let svg = render_lines(&f).unwrap();
    let first_line = svg.find("stroke-width=\"3\"").unwrap();
    let diamonds: Vec<usize> = svg
        .match_indices("<polygon")
        .map(|(k, _)| k)
        .filter(|&k| {
            svg[k..]
                .split('>')
                .next()
                .unwrap()
                .contains("fill=\"#111111\"")
        })
        .collect();
    assert!(
        diamonds[0] > first_line,
        "the paper is drawn under the lines"
    );
    assert_eq!(
        diamonds.len(),
        x.len() + 1,
        "a diamond per value and one in the legend"
    );
    // First in the legend, though another series' rows come first in its panel.
    let label_at = |t: &str| svg.find(&format!(">\n{t}\n<")).unwrap();
    for s in &f.panels[0].series[1..] {
        assert!(
            label_at("thesis") < label_at(&s.name),
            "{} listed before the paper",
            s.name
        );
    }
    // A panel of the paper alone, beside one with other series, says so; the other does not.
    let mut two = sample_lines();
    two.panels.truncate(2);
    two.panels[0].title = "ours".into();
    two.panels[1].title = "PAM".into();
    two.panels[1].series = vec![paper(&x)];
    let svg = render_lines(&two).unwrap();
    assert!(svg.contains("PAM (only the paper has values)"), "{svg}");
    assert!(!svg.contains("ours (only"));
}

#[test]
fn panels_of_different_measures_carry_their_own_y_labels() {
    let panel = |title: &str, y_label: &str, scale: f64| Panel {
        title: title.into(),
        series: vec![Series {
            below: Vec::new(),
            name: "σ = 2".into(),
            x: vec![0.0, 1.0, 7.0],
            y: vec![0.15 * scale, 0.08 * scale, 0.1 * scale],
            band: None,
            style: LineStyle::Solid,
        }],
        hlines: vec![],
        y_label: y_label.into(),
        log_y: None,
    };
    let fig = LineFigure {
        below_label: String::new(),
        y_min: None,
        colours: vec![],
        title: "CSN vs κ".into(),
        x_label: "κ".into(),
        y_label: "mean of 10 runs".into(),
        log_x: false,
        log_y: false,
        panels: vec![
            panel("worst absolute error", "absolute error", 1.0),
            panel("synthesis time", "seconds", 100.0),
        ],
        columns: 2,
        free_x: false,
        width: 420,
        height: 320,
    };
    let svg = render_lines(&fig).unwrap();
    // Each panel's label, rotated like the figure's, and the figure's shared one.
    for label in ["absolute error", "seconds", "mean of 10 runs"] {
        // plotters writes a text's content on a line of its own.
        let at = svg
            .find(&format!("\n{label}\n</text>"))
            .unwrap_or_else(|| panic!("no {label}"));
        let open = svg[..at].rfind("<text").unwrap();
        assert!(svg[open..at].contains("rotate(270"), "{}", &svg[open..at]);
    }
}

/// The contour is interpolated between cell centres (marching squares), not traced along cell
/// edges: on z = x + y every vertex lies on the straight line x + y = level, strictly between
/// centres, where the old staircase along cell edges had vertices only at half-integers.
#[test]
fn contour_interpolates_between_cell_centres() {
    use super::heatmap::contour_lines;
    let (nx, ny) = (6, 5);
    let tx: Vec<f64> = (0..nx).map(|i| i as f64).collect();
    let ty: Vec<f64> = (0..ny).map(|j| j as f64).collect();
    let mut z = Vec::new();
    for y in &ty {
        for x in &tx {
            z.push(x + y);
        }
    }
    let level = 3.3;
    let lines = contour_lines(&z, (&tx, &ty), level).unwrap();
    let vertices: Vec<(f64, f64)> = lines.iter().flatten().copied().collect();
    assert!(vertices.len() >= 4, "{lines:?}");
    for &(x, y) in &vertices {
        assert!(
            (x + y - level).abs() < 1e-9,
            "({x}, {y}) is off x + y = {level}"
        );
        assert!(
            (0.0..=5.0).contains(&x) && (0.0..=4.0).contains(&y),
            "({x}, {y})"
        );
    }
    // Some vertex strictly between two centres in x, and none on a cell edge (k + 0.5) in both.
    assert!(vertices
        .iter()
        .any(|&(x, _)| (x - x.round()).abs() > 0.05 && (x - x.floor() - 0.5).abs() > 0.05));
    assert!(vertices
        .iter()
        .all(|&(x, y)| (x - x.floor() - 0.5).abs() > 1e-6 || (y - y.floor() - 0.5).abs() > 1e-6));
    // One straight line from edge to edge of the centres' hull: from (3.3, 0) to (0, 3.3).
    assert_eq!(lines.len(), 1, "{lines:?}");
    let ends = [lines[0][0], *lines[0].last().unwrap()];
    for want in [(3.3, 0.0), (0.0, 3.3)] {
        assert!(
            ends.iter()
                .any(|e| (e.0 - want.0).abs() < 1e-9 && (e.1 - want.1).abs() < 1e-9),
            "{ends:?}"
        );
    }

    // Unevenly spaced centres: interpolated in axis units between neighbours.
    let tx = [0.0, 1.0, 10.0];
    let z = [0.0, 1.0, 2.0, 0.0, 1.0, 2.0];
    let lines = contour_lines(&z, (&tx, &[0.0, 1.0]), 1.5).unwrap();
    for &(x, _) in lines.iter().flatten() {
        assert!((x - 5.5).abs() < 1e-9, "{x}");
    }

    // A missing cell stops the line: no vertex in a square with a missing corner.
    let tx: Vec<f64> = (0..4).map(|i| i as f64).collect();
    let mut z: Vec<f64> = (0..16).map(|k| (k % 4) as f64).collect();
    z[2 * 4 + 1] = f64::NAN;
    let lines = contour_lines(&z, (&tx, &tx), 1.5).unwrap();
    for &(x, y) in lines.iter().flatten() {
        assert!((x - 1.5).abs() < 1e-9, "{x}");
        assert!(
            !(1.0 < y && y < 3.0),
            "vertex ({x}, {y}) beside the missing cell"
        );
    }
    assert!(!lines.is_empty());

    // Degenerate grids draw nothing and do not fail.
    assert!(contour_lines(&[1.0, 2.0], (&[0.0, 1.0], &[0.0]), 1.5)
        .unwrap()
        .is_empty());
    assert!(
        contour_lines(&[f64::NAN; 4], (&[0.0, 1.0], &[0.0, 1.0]), 1.5)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn panels_of_different_measures_have_their_own_scale_type() {
    let panel = |title: &str, y: Vec<f64>, log_y: Option<bool>| Panel {
        title: title.into(),
        series: vec![Series {
            below: Vec::new(),
            name: "σ = 2".into(),
            x: vec![1.0, 2.0, 3.0, 4.0],
            y,
            band: None,
            style: LineStyle::Solid,
        }],
        hlines: vec![],
        y_label: String::new(),
        log_y,
    };
    let fig = |share_log: Option<bool>| LineFigure {
        below_label: String::new(),
        y_min: None,
        colours: vec![],
        title: "CSN vs κ".into(),
        x_label: "κ".into(),
        y_label: "mean of 10 runs".into(),
        log_x: false,
        log_y: true,
        panels: vec![
            panel("worst absolute error", vec![0.002, 0.03, 0.5, 8.0], None),
            panel(
                "share of points outside",
                vec![0.0, 0.25, 0.5, 0.75],
                share_log,
            ),
        ],
        columns: 2,
        free_x: false,
        width: 420,
        height: 320,
    };
    // On the figure's log scale the share's 0 has no place.
    assert!(matches!(
        render_lines(&fig(None)),
        Err(PlotError::NonPositiveOnLog { .. })
    ));
    let svg = render_lines(&fig(Some(false))).unwrap();
    // The linear panel's ticks are evenly spaced plain numbers from 0; the log panel's are
    // powers of ten (as 0.01 … 1 or 10⁻² … 10⁰).
    let ticks: Vec<&str> = svg
        .split("</text>")
        .filter_map(|t| t.rsplit('>').next())
        .map(str::trim)
        .collect();
    for t in ["0.0", "0.2", "0.4", "0.6"] {
        assert!(ticks.contains(&t), "no linear tick {t}: {ticks:?}");
    }
    assert!(
        ticks.iter().any(|t| *t == "0.01" || t.contains("10")),
        "no log tick: {ticks:?}"
    );
    // The same figure with every panel linear has no power-of-ten tick.
    let mut all_linear = fig(Some(false));
    all_linear.log_y = false;
    let svg = render_lines(&all_linear).unwrap();
    assert!(!svg.contains("10⁻") && !svg.contains(">\n0.01\n<"), "{svg}");
}

/// Widths come from DejaVu Sans's own advance widths (units per em 2048), not a guess.
#[test]
fn text_widths_are_the_fonts() {
    // hmtx advances of DejaVu Sans 2.37: M 1767, i 569, 0 1303, space 651.
    for (s, units) in [("M", 1767.0), ("i", 569.0), ("0", 1303.0), (" ", 651.0)] {
        let w = text_width(s, 2048.0);
        assert!((w - units).abs() < 1e-9, "{s:?}: {w}");
    }
    // Superscripts are drawn at 75%.
    let plain = text_width("104", 20.0);
    let sup = text_width("10^4", 20.0);
    assert!((sup - (plain - text_width("4", 20.0) * 0.25)).abs() < 1e-9);
    // A character the font lacks is measured, not zero.
    assert!(text_width("\u{10FFFD}", 20.0) > 0.0);
}

/// One `<text>` element of an SVG.
#[derive(Debug)]
struct SvgText {
    x: f64,
    anchor: String,
    px: f64,
    /// Its content, tspans apart: (text, scale of the font size).
    pieces: Vec<(String, f64)>,
    rotated: bool,
}

fn svg_texts(svg: &str) -> Vec<SvgText> {
    let attr = |tag: &str, name: &str| -> Option<String> {
        let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        Some(tag[at..].split('"').next()?.to_string())
    };
    let unescape = |t: &str| {
        t.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&amp;", "&")
    };
    let mut out = Vec::new();
    for part in svg.split("<text").skip(1) {
        let (tag, rest) = part.split_once('>').unwrap();
        let body = rest.split("</text>").next().unwrap();
        let mut pieces = Vec::new();
        let mut b = body;
        while let Some(open) = b.find("<tspan") {
            pieces.push((unescape(b[..open].trim_matches('\n')), 1.0));
            let inner = &b[open..];
            let text_start = inner.find('>').unwrap() + 1;
            let end = inner.find("</tspan>").unwrap();
            pieces.push((unescape(&inner[text_start..end]), 0.75));
            b = &inner[end + "</tspan>".len()..];
        }
        pieces.push((unescape(b.trim_matches('\n')), 1.0));
        out.push(SvgText {
            x: attr(tag, "x").unwrap().parse().unwrap(),
            anchor: attr(tag, "text-anchor").unwrap_or_else(|| "start".into()),
            px: attr(tag, "font-size").unwrap().parse().unwrap(),
            pieces,
            rotated: tag.contains("rotate("),
        });
    }
    out
}

/// A very long title on a narrow figure is shrunk and wrapped so that every line's measured
/// width fits inside the figure; no horizontal text of the figure crosses its edges.
#[test]
fn a_very_long_title_fits_inside_the_figure() {
    let mut fig = sample_lines();
    fig.panels.truncate(1);
    fig.width = 320;
    fig.title = "Worst absolute error of the improved mechanism over every dataset of the thesis \
                 (CRM, CSN, CTG, PKS, WDBC) against the kernel width σ with C = 10^4 candidate \
                 points, R = 50 and e^(−cε/2) noise: ours beside the thesis's"
        .into();
    let svg = render_lines(&fig).unwrap();
    let width: f64 = svg
        .split("width=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let texts = svg_texts(&svg);
    let title_lines: Vec<_> = texts
        .iter()
        .filter(|t| {
            t.pieces
                .iter()
                .any(|(s, _)| s.contains("Worst") || s.contains("thesis"))
        })
        .collect();
    assert!(title_lines.len() >= 2, "not wrapped: {title_lines:?}");
    for SvgText {
        x,
        anchor,
        px,
        pieces,
        rotated,
    } in &texts
    {
        if *rotated {
            continue;
        }
        let w: f64 = pieces.iter().map(|(s, k)| text_width(s, px * k)).sum();
        let (lo, hi) = match anchor.as_str() {
            "middle" => (x - w / 2.0, x + w / 2.0),
            "end" => (x - w, *x),
            _ => (*x, x + w),
        };
        assert!(
            lo >= 0.0 && hi <= width,
            "{pieces:?} at {x} ({anchor}, {px} px) spans {lo:.1}…{hi:.1} of 0…{width}"
        );
    }
    // Wrapping keeps bracketed groups whole, so superscripts stay marked up.
    assert!(svg.contains(r#"baseline-shift="super""#));
    assert!(svg.contains(r#"font-family="DejaVu Sans, sans-serif""#));
    // Titles that fit keep one line at full size.
    let (lines, px) = fit_title("Short title", 600.0);
    assert_eq!((lines.len(), px), (1, TITLE_PX));
    // Degenerate widths do not loop or panic.
    let (lines, _) = fit_title("a b c", 0.0);
    assert!(!lines.is_empty());
}

/// Wrapping is linear in the title's length: a megabyte-long title (one word, or many) is laid
/// out at once, every line within the width.
#[test]
fn huge_titles_wrap_quickly() {
    for title in ["x".repeat(1 << 20), "ab ".repeat(1 << 18)] {
        let (lines, px) = fit_title(&title, 500.0);
        assert!(lines.len() > 100);
        assert!(lines.iter().take(50).all(|l| text_width(l, px) <= 500.0));
    }
}

/// Two series at 0 at the same x on a log axis: each gets its triangle, side by side, so
/// neither hides the other (the Monte-Carlo 0 and Report Noisy Max's 0 at ε = 2, c = 10 of
/// the permute-and-flip example were drawn on one spot); and every triangle stands below the
/// panel's frame, never inside it, where it would read as a value (#41: eight triangles
/// stacked upward stood where the log axis reads 1.1–5.7 steps).
#[test]
fn coinciding_points_below_the_axis_are_all_visible() {
    let mut fig = sample_lines();
    fig.panels.truncate(1);
    for s in &mut fig.panels[0].series {
        s.below = vec![0.2];
    }
    let svg = render_lines(&fig).unwrap();
    // Each triangle is a closed polyline of 4 points; its tip is the third.
    let tips: Vec<(String, String)> = svg
        .split("<polyline")
        .skip(1)
        .filter_map(|p| {
            let points = p.split("points=\"").nth(1)?.split('"').next()?;
            let pts: Vec<&str> = points.split_whitespace().collect();
            (pts.len() == 4 && pts[0] == pts[3]).then(|| {
                let (x, y) = pts[2].split_once(',').unwrap();
                (x.to_string(), y.to_string())
            })
        })
        .collect();
    assert_eq!(
        tips.len(),
        3 + 1,
        "three series and the legend's sample: {tips:?}"
    );
    // The panel's frame: the grey rectangle with no fill (the legend's box is lighter). Each
    // piece is cut at its tag's end: what follows belongs to other elements.
    let frame_bottom = svg
        .split("<rect")
        .skip(1)
        .map(|r| &r[..r.find('>').unwrap_or(r.len())])
        .filter(|r| r.contains("stroke=\"#666666\"") && r.contains("fill=\"none\""))
        .map(|r| {
            let attr = |name: &str| -> f64 {
                r.split(&format!(" {name}=\""))
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap()
            };
            attr("y") + attr("height")
        })
        .fold(f64::NAN, f64::max);
    assert!(frame_bottom.is_finite(), "no frame found");
    let marks: Vec<(f64, f64)> = tips
        .iter()
        .map(|(x, y)| (x.parse().unwrap(), y.parse().unwrap()))
        .collect();
    // The legend's sample is the last drawn; the three before it are the series'.
    let series = &marks[..3];
    assert!(
        series
            .iter()
            .all(|&(_, y)| y == series[0].1 && y > frame_bottom),
        "one height, under the frame (bottom {frame_bottom}): {marks:?}"
    );
    let mut xs: Vec<f64> = series.iter().map(|m| m.0).collect();
    xs.sort_by(f64::total_cmp);
    assert!(
        xs.windows(2).all(|w| w[1] - w[0] >= 10.0),
        "side by side, a marker (8 px) and more apart: {marks:?}"
    );
}

/// A point with an interval but no neighbour (the Monte-Carlo estimate at ε = 1, c = 16 of
/// dr-two-diseases) shows its interval as an error bar: a band needs two points.
#[test]
fn an_isolated_point_shows_its_interval_as_an_error_bar() {
    let lone = |band: bool| Series {
        below: Vec::new(),
        name: "Monte-Carlo".into(),
        x: vec![0.2, 0.5],
        y: vec![0.04, f64::NAN],
        band: band.then(|| (vec![0.03, f64::NAN], vec![0.05, f64::NAN])),
        style: LineStyle::Markers,
    };
    let polylines = |band: bool| {
        let mut f = sample_lines();
        f.panels.truncate(1);
        f.panels[0].series.push(lone(band));
        render_lines(&f).unwrap().matches("<polyline").count()
    };
    assert_eq!(
        polylines(true),
        polylines(false) + 3,
        "a bar and its two caps"
    );
}

/// A row of panels stays within a width the report shows near its own size (#58 item 8: a
/// strip of three 640 px panels was 1 964 px wide, shown at 54 %, its ticks 5–6 px): three
/// panels share [`super::ROW_WIDTH`], two keep the width asked for.
#[test]
fn a_strip_of_three_panels_is_no_wider_than_two() {
    let svg_width = |fig: &LineFigure| -> f64 {
        let svg = render_lines(fig).unwrap();
        let w = svg
            .split("width=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        w.parse().unwrap()
    };
    let mut two = sample_lines();
    two.width = 640;
    let mut three = sample_lines();
    three.width = 640;
    let extra = sample_lines().panels.remove(0);
    three.panels.push(extra);
    three.columns = 3;
    let (w2, w3) = (svg_width(&two), svg_width(&three));
    assert!(w3 <= w2 + 1.0, "three panels {w3} px, two {w2} px");
    assert!(w2 >= 2.0 * 640.0, "two panels keep their width: {w2}");
    assert_eq!(super::panel_width(640, 3), 426);
    assert_eq!(super::panel_width(640, 2), 640);
    assert_eq!(super::panel_width(640, 12), super::MIN_PANEL);
}
