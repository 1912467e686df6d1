//! A chart as a display list in pixels, laid out once and rendered twice: as SVG text (inlined
//! in the HTML reports, with hover titles and links) and as PNG through plotters (for pull
//! requests and Markdown). Layout decisions (axes, label placement) never depend on the renderer,
//! so both show the same picture; text is measured by [`text_width`], an estimate of DejaVu Sans
//! (the sans-serif of the build machines and of headless Chromium there), which is wider than
//! the other fonts the SVG asks for, so a box that fits with it fits with them.

use std::fmt::Write as _;
use std::path::Path;

use super::error::{DrawError, ReportError};

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// An sRGB colour.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rgb(pub u8, pub u8, pub u8);

impl Rgb {
    pub const BLACK: Rgb = Rgb(34, 34, 34);
    pub const GREY: Rgb = Rgb(120, 120, 120);
    pub const LIGHT: Rgb = Rgb(225, 225, 225);
    pub const WHITE: Rgb = Rgb(255, 255, 255);

    /// Mixed towards black by `f` (0–1): whiskers in a darker shade of their series.
    pub fn darker(self, f: f64) -> Rgb {
        let d = |c: u8| (c as f64 * (1.0 - f)).round() as u8;
        Rgb(d(self.0), d(self.1), d(self.2))
    }

    fn hex(self) -> String {
        format!("#{:02x}{:02x}{:02x}", self.0, self.1, self.2)
    }

    fn plotters(self, opacity: f64) -> RGBAColor {
        RGBColor(self.0, self.1, self.2).mix(opacity)
    }
}

/// Horizontal anchor of a text; texts are always centred vertically on their point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

impl Anchor {
    /// The SVG `text-anchor` value.
    fn svg(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

/// An axis-aligned box in pixels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    pub x0: f64,
    pub y0: f64,
    pub x1: f64,
    pub y1: f64,
}

impl Bounds {
    pub fn new(x0: f64, y0: f64, x1: f64, y1: f64) -> Bounds {
        Bounds { x0: x0.min(x1), y0: y0.min(y1), x1: x0.max(x1), y1: y0.max(y1) }
    }
    pub fn overlaps(&self, o: &Bounds) -> bool {
        self.x0 < o.x1 && o.x0 < self.x1 && self.y0 < o.y1 && o.y0 < self.y1
    }
    pub fn inflate(&self, d: f64) -> Bounds {
        Bounds { x0: self.x0 - d, y0: self.y0 - d, x1: self.x1 + d, y1: self.y1 + d }
    }
    pub fn contains(&self, o: &Bounds) -> bool {
        o.x0 >= self.x0 && o.x1 <= self.x1 && o.y0 >= self.y0 && o.y1 <= self.y1
    }
    /// Whether the segment `a`–`b` crosses this box (Liang–Barsky clipping).
    pub fn hits_segment(&self, a: (f64, f64), b: (f64, f64)) -> bool {
        let (dx, dy) = (b.0 - a.0, b.1 - a.1);
        let (mut t0, mut t1) = (0.0f64, 1.0f64);
        for (p, q) in [(-dx, a.0 - self.x0), (dx, self.x1 - a.0), (-dy, a.1 - self.y0), (dy, self.y1 - a.1)] {
            if p == 0.0 {
                if q < 0.0 {
                    return false;
                }
            } else {
                let r = q / p;
                if p < 0.0 {
                    t0 = t0.max(r);
                } else {
                    t1 = t1.min(r);
                }
                if t0 > t1 {
                    return false;
                }
            }
        }
        true
    }
    /// The point of the box nearest to `p`.
    pub fn nearest(&self, p: (f64, f64)) -> (f64, f64) {
        (p.0.clamp(self.x0, self.x1), p.1.clamp(self.y0, self.y1))
    }
}

/// Advance width of `text` at `size` px in DejaVu Sans (per-character classes of its metrics,
/// rounded up), so layouts leave room for the widest of the fonts a browser may pick.
pub fn text_width(text: &str, size: f64) -> f64 {
    let em: f64 = text
        .chars()
        .map(|c| match c {
            'i' | 'j' | 'l' | '\'' | '|' | '!' | ':' | ';' | '.' | ',' => 0.30,
            ' ' => 0.32,
            'f' | 't' | 'r' | 'I' | '(' | ')' | '[' | ']' | '/' | '-' | '·' => 0.42,
            'm' | 'w' => 0.98,
            'M' | 'W' | '%' | '—' => 1.0,
            '0'..='9' => 0.64,
            'a'..='z' => 0.63,
            'A'..='Z' => 0.78,
            '<' | '>' | '=' | '+' | '≥' | '≤' | '×' | '±' => 0.84,
            '–' => 0.5,
            _ => 0.8,
        })
        .sum();
    em * size
}

/// The box a text occupies when drawn at `at` with `anchor`, centred vertically.
pub fn text_bounds(text: &str, size: f64, at: (f64, f64), anchor: Anchor) -> Bounds {
    let w = text_width(text, size);
    let x0 = match anchor {
        Anchor::Start => at.0,
        Anchor::Middle => at.0 - w / 2.0,
        Anchor::End => at.0 - w,
    };
    // DejaVu's ascent + descent is 1.17 em.
    let h = size * 1.2;
    Bounds::new(x0, at.1 - h / 2.0, x0 + w, at.1 + h / 2.0)
}

/// One drawing operation.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    Line {
        pts: Vec<(f64, f64)>,
        color: Rgb,
        width: f64,
        dash: bool,
        opacity: f64,
        class: &'static str,
    },
    Circle {
        c: (f64, f64),
        r: f64,
        fill: Option<Rgb>,
        stroke: Option<(Rgb, f64)>,
        class: &'static str,
    },
    Rect {
        b: Bounds,
        fill: Option<Rgb>,
        stroke: Option<Rgb>,
        opacity: f64,
    },
    Text {
        at: (f64, f64),
        text: String,
        size: f64,
        anchor: Anchor,
        color: Rgb,
        bold: bool,
        vertical: bool,
        class: &'static str,
    },
    /// Items that belong together: a point (hover title, link to its page), or a panel (offset).
    Group {
        items: Vec<Item>,
        title: Option<String>,
        href: Option<String>,
        id: Option<String>,
        class: &'static str,
        offset: (f64, f64),
    },
}

impl Item {
    pub fn line(pts: Vec<(f64, f64)>, color: Rgb, width: f64) -> Item {
        Item::Line { pts, color, width, dash: false, opacity: 1.0, class: "" }
    }
    pub fn text(at: (f64, f64), text: impl Into<String>, size: f64, anchor: Anchor) -> Item {
        Item::Text { at, text: text.into(), size, anchor, color: Rgb::BLACK, bold: false, vertical: false, class: "" }
    }
}

/// A picture of `w` × `h` pixels.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scene {
    pub w: f64,
    pub h: f64,
    pub items: Vec<Item>,
}

impl Scene {
    /// Scenes side by side, tops aligned, `gap` pixels apart.
    pub fn hstack(scenes: Vec<Scene>, gap: f64) -> Scene {
        let mut out = Scene::default();
        for s in scenes {
            let x = if out.items.is_empty() { 0.0 } else { out.w + gap };
            out.h = out.h.max(s.h);
            out.w = x + s.w;
            out.items.push(Item::Group { items: s.items, title: None, href: None, id: None, class: "panel", offset: (x, 0.0) });
        }
        out
    }

    /// Standalone SVG text (no external resources).
    pub fn svg(&self, id: &str) -> String {
        let mut o = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"{}\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"DejaVu Sans, Verdana, Arial, sans-serif\" role=\"img\">\n<rect width=\"{w}\" height=\"{h}\" fill=\"#fff\"/>\n",
            esc(id),
            w = self.w.round(),
            h = self.h.round()
        );
        for it in &self.items {
            svg_item(&mut o, it);
        }
        o.push_str("</svg>\n");
        o
    }

    /// Draws the scene into a PNG file at `path` (written whole: callers rename it into place).
    pub fn png(&self, path: &Path) -> Result<(), ReportError> {
        let root = BitMapBackend::new(path, (self.w.round() as u32, self.h.round() as u32)).into_drawing_area();
        root.fill(&WHITE)?;
        for it in &self.items {
            png_item(&root, it, (0.0, 0.0))?;
        }
        root.present().map_err(|source| ReportError::Present { path: path.to_path_buf(), source })
    }

    /// Every text's box with its class, in scene pixels (tests check labels never overlap).
    pub fn text_boxes(&self) -> Vec<(&'static str, String, Bounds)> {
        fn walk(items: &[Item], off: (f64, f64), out: &mut Vec<(&'static str, String, Bounds)>) {
            for it in items {
                match it {
                    Item::Text { at, text, size, anchor, class, vertical: false, .. } => {
                        let b = text_bounds(text, *size, *at, *anchor);
                        out.push((class, text.clone(), Bounds::new(b.x0 + off.0, b.y0 + off.1, b.x1 + off.0, b.y1 + off.1)));
                    }
                    Item::Group { items, offset, .. } => walk(items, (off.0 + offset.0, off.1 + offset.1), out),
                    _ => {}
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.items, (0.0, 0.0), &mut out);
        out
    }
}

fn esc(s: &str) -> String {
    crate::html::escape(s)
}

fn num(x: f64) -> String {
    let r = (x * 10.0).round() / 10.0;
    if r.fract() == 0.0 { format!("{}", r as i64) } else { format!("{r:.1}") }
}

fn class_attr(class: &str) -> String {
    if class.is_empty() { String::new() } else { format!(" class=\"{class}\"") }
}

/// The `transform` attribute that moves a group by `offset`; none when it stays put.
fn translate_attr(offset: (f64, f64)) -> String {
    if offset != (0.0, 0.0) { format!(" transform=\"translate({} {})\"", num(offset.0), num(offset.1)) } else { String::new() }
}

fn svg_item(o: &mut String, it: &Item) {
    match it {
        Item::Line { pts, color, width, dash, opacity, class } => {
            if pts.len() < 2 {
                return;
            }
            let d: Vec<String> = pts.iter().map(|(x, y)| format!("{},{}", num(*x), num(*y))).collect();
            let _ = writeln!(
                o,
                "<polyline{} points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"{}{}/>",
                class_attr(class),
                d.join(" "),
                color.hex(),
                width,
                if *dash { " stroke-dasharray=\"5,4\"" } else { "" },
                if *opacity < 1.0 { format!(" stroke-opacity=\"{opacity:.2}\"") } else { String::new() }
            );
        }
        Item::Circle { c, r, fill, stroke, class } => {
            let _ = writeln!(
                o,
                "<circle{} cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\"{}/>",
                class_attr(class),
                num(c.0),
                num(c.1),
                r,
                fill.map_or("#fff".into(), |f| f.hex()),
                stroke.map_or(String::new(), |(s, w)| format!(" stroke=\"{}\" stroke-width=\"{w}\"", s.hex()))
            );
        }
        Item::Rect { b, fill, stroke, opacity } => {
            let _ = writeln!(
                o,
                "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"{}{}/>",
                num(b.x0),
                num(b.y0),
                num(b.x1 - b.x0),
                num(b.y1 - b.y0),
                fill.map_or("none".into(), |f| f.hex()),
                stroke.map_or(String::new(), |s| format!(" stroke=\"{}\"", s.hex())),
                if *opacity < 1.0 { format!(" fill-opacity=\"{opacity:.2}\"") } else { String::new() }
            );
        }
        Item::Text { at, text, size, anchor, color, bold, vertical, class } => {
            let a = anchor.svg();
            let rot = if *vertical { format!(" transform=\"rotate(-90 {} {})\"", num(at.0), num(at.1)) } else { String::new() };
            let _ = writeln!(
                o,
                "<text{} x=\"{}\" y=\"{}\" font-size=\"{size}\" text-anchor=\"{a}\" dominant-baseline=\"central\" fill=\"{}\"{}{rot}>{}</text>",
                class_attr(class),
                num(at.0),
                num(at.1),
                color.hex(),
                if *bold { " font-weight=\"bold\"" } else { "" },
                esc(text)
            );
        }
        Item::Group { items, title, href, id, class, offset } => {
            if let Some(h) = href {
                let _ = write!(o, "<a href=\"{}\">", esc(h));
            }
            let tr = translate_attr(*offset);
            let _ =
                writeln!(o, "<g{}{}{tr}>", class_attr(class), id.as_ref().map_or(String::new(), |i| format!(" data-point=\"{}\"", esc(i))));
            if let Some(t) = title {
                let _ = writeln!(o, "<title>{}</title>", esc(t));
            }
            for i in items {
                svg_item(o, i);
            }
            o.push_str("</g>");
            if href.is_some() {
                o.push_str("</a>");
            }
            o.push('\n');
        }
    }
}

/// Stroke widths in whole pixels: thin lines (whiskers at 1.5) stay one pixel.
fn px_width(w: f64) -> u32 {
    if w < 1.8 { 1 } else { w.round() as u32 }
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;

fn png_item(root: &Area<'_>, it: &Item, off: (f64, f64)) -> Result<(), DrawError> {
    let p = |(x, y): (f64, f64)| ((x + off.0).round() as i32, (y + off.1).round() as i32);
    match it {
        Item::Line { pts, color, width, dash, opacity, .. } => {
            let style = ShapeStyle { color: color.plotters(*opacity), filled: false, stroke_width: px_width(*width) };
            let v: Vec<(i32, i32)> = pts.iter().map(|q| p(*q)).collect();
            if *dash {
                root.draw(&plotters::element::DashedPathElement::new(v, 5, 4, style))?;
            } else {
                root.draw(&PathElement::new(v, style))?;
            }
        }
        Item::Circle { c, r, fill, stroke, .. } => {
            // A ring as two discs: plotters' wide circle outlines come out jagged.
            let f = fill.unwrap_or(Rgb::WHITE);
            let inner = match stroke {
                Some((s, w)) => {
                    root.draw(&Circle::new(p(*c), (r + w / 2.0).round() as i32, s.plotters(1.0).filled()))?;
                    r - w / 2.0
                }
                None => *r,
            };
            root.draw(&Circle::new(p(*c), inner.round() as i32, f.plotters(1.0).filled()))?;
        }
        Item::Rect { b, fill, stroke, opacity } => {
            let corners = [p((b.x0, b.y0)), p((b.x1, b.y1))];
            if let Some(f) = fill {
                root.draw(&Rectangle::new(corners, f.plotters(*opacity).filled()))?;
            }
            if let Some(s) = stroke {
                root.draw(&Rectangle::new(corners, s.plotters(1.0)))?;
            }
        }
        Item::Text { at, text, size, anchor, color, bold, vertical, .. } => {
            let h = match anchor {
                Anchor::Start => HPos::Left,
                Anchor::Middle => HPos::Center,
                Anchor::End => HPos::Right,
            };
            // plotters sizes a font by its whole height (ascent + descent: 1.17 em in DejaVu Sans),
            // the SVG by its em: scaled so both draw the same text at the same size.
            let font = FontDesc::new(FontFamily::SansSerif, *size * 1.17, if *bold { FontStyle::Bold } else { FontStyle::Normal });
            let font = if *vertical { font.transform(FontTransform::Rotate270) } else { font };
            let c = color.plotters(1.0);
            let style = TextStyle::from(font).color(&c).pos(Pos::new(h, VPos::Center));
            root.draw(&Text::new(text.clone(), p(*at), style))?;
        }
        Item::Group { items, offset, .. } => {
            for i in items {
                png_item(root, i, (off.0 + offset.0, off.1 + offset.1))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boxes_overlap_and_segments_cross() {
        let a = Bounds::new(0.0, 0.0, 10.0, 10.0);
        assert!(a.overlaps(&Bounds::new(9.0, 9.0, 20.0, 20.0)));
        assert!(!a.overlaps(&Bounds::new(10.0, 0.0, 20.0, 10.0)), "touching is not overlapping");
        assert!(a.hits_segment((-5.0, 5.0), (15.0, 5.0)));
        assert!(!a.hits_segment((-5.0, -5.0), (-1.0, 20.0)));
        assert_eq!(a.nearest((20.0, 5.0)), (10.0, 5.0));
    }

    #[test]
    fn wider_text_is_wider() {
        assert!(text_width("DEP8 c32", 12.0) > text_width("tp4 c1", 12.0));
        // DejaVu Sans: "DEP8 c32" is 58 px at 12 px; the estimate never undershoots it.
        assert!(text_width("DEP8 c32", 12.0) >= 58.0, "{}", text_width("DEP8 c32", 12.0));
    }

    #[test]
    fn svg_escapes_text_and_links() {
        let s = Scene {
            w: 100.0,
            h: 50.0,
            items: vec![Item::Group {
                items: vec![Item::text((1.0, 2.0), "<b>&", 12.0, Anchor::Start)],
                title: Some("a \"b\"".into()),
                href: Some("x/y.html?a=1&b=2".into()),
                id: Some("cfg/p".into()),
                class: "pt",
                offset: (0.0, 0.0),
            }],
        };
        let svg = s.svg("c");
        assert!(
            svg.contains("&lt;b&gt;&amp;") && svg.contains("a &quot;b&quot;") && svg.contains("href=\"x/y.html?a=1&amp;b=2\""),
            "{svg}"
        );
        assert!(!svg.contains("<b>"));
    }
}
